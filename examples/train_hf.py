"""Fine-tuning with the Hugging Face Trainer fed by mmfeed (mmfeed.hf.Trainer): each process reads
its own shard, checkpoints hold the loader's state, and a resumed run continues at the next batch.

    python examples/train_hf.py demo-data/manifest.jsonl --tiny qwen2-vl --steps 6 --out runs/hf
    python examples/train_hf.py demo-data/manifest.jsonl --tiny qwen2-vl --steps 6 --out runs/hf --resume
    torchrun --nproc_per_node 2 examples/train_hf.py demo-data/manifest.jsonl --tiny qwen2-vl --steps 6 --out runs/ddp
    python examples/train_hf.py train.jsonl --model-path ./Qwen2-VL-2B-Instruct --tokenizer ./Qwen2-VL-2B-Instruct/tokenizer.json

--trl trains with TRL's SFTTrainer (mmfeed.hf.SFTTrainer) instead. The model is a local
transformers checkpoint (--model-path) or a randomly initialised width-64 one (--tiny FAMILY).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import transformers
from tiny_models import add_model_arguments, model_from

import mmfeed.hf

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser, ROOT)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--save-steps", type=int, default=3)
    parser.add_argument("--accumulation", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--packed", type=int, default=0, metavar="TOKENS")
    parser.add_argument("--max-pixels", type=int, default=50_176)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--trl", action="store_true", help="TRL's SFTTrainer")
    args = parser.parse_args()

    model = model_from(args)
    loader = dict(
        manifest=args.manifest,
        tokenizer=args.tokenizer,
        model=args.family or args.tiny,
        batch_size=args.batch_size,
        max_pixels=args.max_pixels,
        epochs=1000,
        seed=0,
        token_budget=args.packed,
        pack_window=4 * args.batch_size,
    )
    settings = dict(
        output_dir=str(args.out),
        max_steps=args.steps,
        save_steps=args.save_steps,
        logging_steps=1,
        learning_rate=1e-4,
        gradient_accumulation_steps=args.accumulation,
        report_to=[],
        seed=0,
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
    )
    if args.trl:
        import trl

        tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=args.tokenizer)
        trainer = mmfeed.hf.SFTTrainer(
            model=model, args=trl.SFTConfig(**settings), processing_class=tokenizer, train_loader=loader
        )
    else:
        trainer = mmfeed.hf.Trainer(model=model, args=transformers.TrainingArguments(**settings), train_loader=loader)
    trainer.train(resume_from_checkpoint=True if args.resume else None)
    if trainer.is_world_process_zero():
        losses = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
        print(json.dumps({"losses": losses}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
