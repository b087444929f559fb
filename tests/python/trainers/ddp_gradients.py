"""A torchrun worker for test_balanced_gradients.py: mmfeed.hf.Trainer trains the tiny Qwen2-VL
(tiny_vl.py) on CPU over gloo for a few optimizer steps, and writes what the test compares.

    python -m torch.distributed.run --standalone --nproc-per-node 4 ddp_gradients.py \
        MANIFEST OUT --balance compute [--per-rank-normaliser]

Rank 0 writes OUT/gradients.pt: each optimizer step's gradients as the optimizer meets them (after
the data-parallel all-reduce, no clipping), one flat float64 vector a step. Every rank writes
OUT/rank<N>.json: each micro-batch's sample ids, its label tokens, its forward+backward seconds and
its cost terms (mmfeed.step_times.batch_terms).
--calibrate N gives the loader balance_cost="calibrated" (calibration_steps=N) and two epochs: the
Trainer reports each step's forward time itself (its first step left out), and every rank writes OUT/rank<N>-times.json, the loader's
step_times() after training. --per-rank-normaliser turns off TrainingArguments.average_tokens_across_devices: each rank's loss
is then averaged over its own label tokens, not the global step's. --loop trains with a plain
DDP loop instead of the Trainer, normalised by mmfeed.torch.step_label_tokens."""

from __future__ import annotations

import argparse
import contextlib
import datetime
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
import mmfeed.step_times  # noqa: E402


class Gradients(transformers.TrainerCallback):
    """Each optimizer step's gradients, on rank 0."""

    def __init__(self):
        self.steps: list[torch.Tensor] = []

    def record(self, model, rank: int) -> None:
        if rank == 0:
            grads = [p.grad.detach().double().flatten() for p in model.parameters() if p.grad is not None]
            self.steps.append(torch.cat(grads))

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        self.record(model, args.process_index)


class TimedTrainer(mmfeed.hf.Trainer):
    """Records each micro-batch: its samples, its label tokens and its forward+backward time."""

    micro: list

    def training_step(self, model, inputs, num_items_in_batch=None):
        labels = inputs["labels"][..., 1:]
        t0 = time.perf_counter()
        loss = super().training_step(model, inputs, num_items_in_batch)
        seconds = time.perf_counter() - t0
        self.micro.append(
            dict(
                samples=list(inputs["sample_ids"]),
                label_tokens=int(labels.ne(-100).sum()),
                seconds=seconds,
                terms=mmfeed.step_times.batch_terms(inputs).tolist(),
            )
        )
        return loss


def train_loop(args, loader_options: dict, gradients: Gradients) -> list:
    """A plain DDP loop of one's own: each step's loss normalised by the step's label tokens over
    the ranks (mmfeed.torch.step_label_tokens), scaled by the world size (DDP averages)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import mmfeed.torch

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    model = tiny_vl.tiny_model("qwen2-vl").train()
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    world, micro = dist.get_world_size(), []
    options = {k: v for k, v in loader_options.items() if k != "manifest"}
    with mmfeed.Loader(loader_options["manifest"], gradient_accumulation_steps=args.accumulation, **options) as loader:
        for _ in range(args.steps):
            batches = [next(loader) for _ in range(args.accumulation)]
            tokens = mmfeed.torch.step_label_tokens(batches)
            for i, batch in enumerate(batches):
                start = time.perf_counter()
                sync = contextlib.nullcontext() if i == len(batches) - 1 else ddp.no_sync()
                with sync:
                    loss = ddp(**batch.model_inputs(), num_items_in_batch=tokens).loss * world
                    loss.backward()
                labels = batch["labels"][..., 1:]
                micro.append(
                    dict(
                        samples=list(batch["sample_ids"]),
                        label_tokens=int(labels.ne(-100).sum()),
                        seconds=time.perf_counter() - start,
                    )
                )
            gradients.record(model, dist.get_rank())
            optimizer.step()
            optimizer.zero_grad()
    dist.destroy_process_group()
    return micro


def train_trainer(args, loader_options: dict, gradients: Gradients) -> list:
    """mmfeed.hf.Trainer: the Trainer's own normaliser (average_tokens_across_devices)."""
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
    model = tiny_vl.tiny_model("qwen2-vl").train()
    trainer = TimedTrainer(model=model, args=training, train_loader=loader_options, callbacks=[gradients])
    trainer.micro = []
    trainer.train()
    if args.calibrate:
        rank = int(os.environ.get("RANK", "0"))
        (args.out / f"rank{rank}-times.json").write_text(json.dumps(trainer.train_loader.step_times()))
    return trainer.micro


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("manifest")
    parser.add_argument("out", type=Path)
    parser.add_argument("--balance", default="none")
    parser.add_argument("--per-rank-normaliser", action="store_true")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--accumulation", type=int, default=2)
    parser.add_argument("--max-pixels", type=int, default=50_176)
    parser.add_argument("--loop", action="store_true", help="a plain DDP loop (mmfeed.torch.step_label_tokens)")
    parser.add_argument("--calibrate", type=int, default=0, help="calibration_steps (the Trainer reports)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    gradients = Gradients()
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
    if args.calibrate:
        loader.update(balance_cost="calibrated", calibration_steps=args.calibrate, epochs=2)
    micro = train_loop(args, loader, gradients) if args.loop else train_trainer(args, loader, gradients)
    rank = int(os.environ.get("RANK", "0"))
    (args.out / f"rank{rank}.json").write_text(json.dumps(micro))
    if rank == 0:
        torch.save(gradients.steps, args.out / "gradients.pt")


if __name__ == "__main__":
    main()
