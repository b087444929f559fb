"""A torchrun worker for test_balanced_gradients.py: mmfeed.hf.Trainer trains the tiny Qwen2-VL
(tiny_vl.py) on CPU over gloo for a few optimizer steps, and writes what the test compares.

    python -m torch.distributed.run --standalone --nproc-per-node 4 ddp_gradients.py \
        MANIFEST OUT --balance compute [--per-rank-normaliser]

Rank 0 writes OUT/gradients.pt: each optimizer step's gradients as the optimizer meets them (after
the data-parallel all-reduce, no clipping), one flat float64 vector a step. Every rank writes
OUT/rank<N>.json: each micro-batch's sample ids, its label tokens, and its forward+backward seconds.
--per-rank-normaliser turns off TrainingArguments.average_tokens_across_devices: each rank's loss
is then averaged over its own label tokens, not the global step's."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "examples"))

import tiny_vl  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import mmfeed.hf  # noqa: E402


class Gradients(transformers.TrainerCallback):
    """Each optimizer step's gradients, on rank 0."""

    def __init__(self):
        self.steps: list[torch.Tensor] = []

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if args.process_index == 0:
            grads = [p.grad.detach().double().flatten() for p in model.parameters() if p.grad is not None]
            self.steps.append(torch.cat(grads))


class TimedTrainer(mmfeed.hf.Trainer):
    """Records each micro-batch: its samples, its label tokens and its forward+backward time."""

    micro: list

    def training_step(self, model, inputs, num_items_in_batch=None):
        labels = inputs["labels"][..., 1:]
        t0 = time.perf_counter()
        loss = super().training_step(model, inputs, num_items_in_batch)
        seconds = time.perf_counter() - t0
        self.micro.append(
            dict(samples=list(inputs["sample_ids"]), label_tokens=int(labels.ne(-100).sum()), seconds=seconds)
        )
        return loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("manifest")
    parser.add_argument("out", type=Path)
    parser.add_argument("--balance", default="none")
    parser.add_argument("--per-rank-normaliser", action="store_true")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--accumulation", type=int, default=2)
    parser.add_argument("--max-pixels", type=int, default=50_176)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = tiny_vl.tiny_model("qwen2-vl").train()
    gradients = Gradients()
    training = transformers.TrainingArguments(
        output_dir=str(args.out / "trainer"),
        max_steps=args.steps,
        gradient_accumulation_steps=args.accumulation,
        learning_rate=1e-3,
        max_grad_norm=0,
        average_tokens_across_devices=not args.per_rank_normaliser,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        ddp_backend="gloo",
    )
    loader = dict(
        manifest=args.manifest,
        tokenizer=str(tiny_vl.TOKENIZER),
        model="qwen2-vl",
        max_pixels=args.max_pixels,
        batch_size=2,
        seed=5,
        balance=args.balance,
        workers=1,
    )
    trainer = TimedTrainer(model=model, args=training, train_loader=loader, callbacks=[gradients])
    trainer.micro = []
    trainer.train()
    rank = int(os.environ.get("RANK", "0"))
    (args.out / f"rank{rank}.json").write_text(json.dumps(trainer.micro))
    if rank == 0:
        torch.save(gradients.steps, args.out / "gradients.pt")


if __name__ == "__main__":
    main()
