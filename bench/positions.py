"""bench/positions: what the mrope position_ids in mmfeed's batches save the trainer. Without them
a transformers 5 Qwen-VL forward runs get_rope_index, a Python loop over every sample of every
batch, on the trainer's thread; with them (mmfeed's default) the engine's workers have computed
the same ids in C++. One run, the same batches: the time transformers' get_rope_index takes per
batch (checked equal to the batch's position_ids first), against the Loader's samples/s with
mrope on and off (the cost of computing them, on the workers).

Usage: python bench/positions.py [--samples 64] [--batch-size 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "support"), str(ROOT / "examples")]

import datagen  # noqa: E402
from tiny_models import tiny_model  # noqa: E402

import mmfeed  # noqa: E402

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"


def load(manifest, batch_size: int, mrope: bool) -> tuple[list, float]:
    start = time.perf_counter()
    with mmfeed.Loader(
        manifest,
        tokenizer=TOKENIZER,
        model="qwen2-vl",
        max_pixels=1_003_520,
        batch_size=batch_size,
        shuffle=False,
        mrope=mrope,
        pixels="uint8",
    ) as loader:
        batches = list(loader)
    return batches, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        datagen.generate(Path(tmp), samples=args.samples, seed=7, max_megapixels=1.0, workers=2)
        manifest = Path(tmp) / "manifest.jsonl"
        model = tiny_model("qwen2-vl").model
        batches, _ = load(manifest, args.batch_size, True)
        for b in batches:  # the ids are transformers' own
            want, _ = model.get_rope_index(
                b["input_ids"],
                b["mm_token_type_ids"],
                image_grid_thw=b.get("image_grid_thw"),  # none in a batch without images
                attention_mask=b["attention_mask"],
            )
            assert torch.equal(want, b["position_ids"])
        rope, with_ids, without_ids = [], [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            for b in batches:
                model.get_rope_index(
                    b["input_ids"],
                    b["mm_token_type_ids"],
                    image_grid_thw=b.get("image_grid_thw"),  # none in a batch without images
                    attention_mask=b["attention_mask"],
                )
            rope.append((time.perf_counter() - start) / len(batches))
            with_ids.append(load(manifest, args.batch_size, True)[1])
            without_ids.append(load(manifest, args.batch_size, False)[1])
    tokens = sum(int(b["attention_mask"].sum()) for b in batches) / len(batches)
    print(f"{len(batches)} batches of {args.batch_size} samples, {tokens:.0f} tokens a batch (best of {args.repeat})")
    print(f"transformers get_rope_index, per batch, on the trainer's thread: {1000 * min(rope):.2f} ms")
    print(f"Loader, mrope on:  {args.samples / min(with_ids):.1f} samples/s")
    print(
        f"Loader, mrope off: {args.samples / min(without_ids):.1f} samples/s "
        f"(on / off: {min(without_ids) / min(with_ids):.3f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
