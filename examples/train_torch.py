"""Fine-tuning with a plain PyTorch loop: mmfeed's batches straight into a transformers Qwen-VL
model, with a resumable loader state saved beside the weights.

    python examples/train_torch.py demo-data/manifest.jsonl --tokenizer tokenizer.json \\
        --model-path Qwen/Qwen2-VL-2B-Instruct-local-copy --steps 100
    python examples/train_torch.py demo-data/manifest.jsonl --tiny qwen2-vl --steps 5 --packed 4096

--tiny FAMILY trains a randomly initialised width-64 model (examples/tiny_models.py) instead of
loading one. --packed TOKENS packs samples into rows of at most TOKENS tokens (transformers'
packed layout: the model attends within each sample). --out DIR saves the model and the loader's
state every --save-every steps; --resume continues from DIR at the next batch.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from tiny_models import add_model_arguments, model_from

import mmfeed

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser, ROOT)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--packed", type=int, default=0, metavar="TOKENS")
    parser.add_argument("--max-pixels", type=int, default=200_704)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()

    model = model_from(args)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loader = mmfeed.Loader(
        args.manifest,
        tokenizer=args.tokenizer,
        model=args.family or args.tiny,
        batch_size=args.batch_size,
        max_pixels=args.max_pixels,
        epochs=1000,
        token_budget=args.packed,
        pack_window=4 * args.batch_size,
    )
    step = 0
    if args.resume and not args.out:
        parser.error("--resume needs --out, the folder it saved to")
    if args.resume:
        loader.load_state_dict(json.loads((args.out / "loader.json").read_text()))
        model.load_state_dict(torch.load(args.out / "model.pt", weights_only=True))
        optimizer.load_state_dict(torch.load(args.out / "optimizer.pt", weights_only=True))
        step = json.loads((args.out / "step.json").read_text())["step"]
    start = time.perf_counter()
    with loader:
        for batch in loader:
            if step >= args.steps:
                break
            loss = model(**batch.model_inputs()).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            print(f"step {step}  loss {loss.item():.6f}  samples {len(batch['sample_ids'])}", flush=True)
            if args.out and step % args.save_every == 0:
                args.out.mkdir(parents=True, exist_ok=True)
                torch.save(model.state_dict(), args.out / "model.pt")
                torch.save(optimizer.state_dict(), args.out / "optimizer.pt")
                (args.out / "loader.json").write_text(json.dumps(loader.state_dict()))
                (args.out / "step.json").write_text(json.dumps({"step": step}))
    print(f"{step} steps in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
