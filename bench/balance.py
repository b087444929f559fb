"""Ranks balanced by compute, simulated: for each data set, world size and samples a rank a step,
the largest rank's forward FLOPs over the ranks' mean, averaged over the steps, as drawn
(balance="none", what every loader does), split by tokens (balance="tokens") and by FLOPs
(balance="compute"), with the plan's time a step on one core, and by FLOPs were each rank's count
free (a batch of 1 to twice batch_size samples: what per-rank counts that differ would add); and packed rows (token_budget), each
rank's windows packed by their samples' estimated tokens as the Loader packs them. One run, the same data and steps
for every column (mmfeed.balance_report: the Loader's own plan, costed from each data set's index,
its text tokens counted with the Loader's tokenizer and template: `mmfeed index --tokenizer`).

Data: the demo set (`mmfeed make-dataset`: photographs of up to 12 MP in conversations), a
video-heavy mix (the demo's images and its clips drawn half and half), and a held-out set (another
seed, never looked at while the planner was written). Images bounded by max_pixels 1003520 (1280
merged tokens, a common fine-tuning setting); costs are Qwen2-VL-7B's forward FLOPs
(docs/loading.md, "Ranks balanced by compute"). Each epoch is a blend of `STEPS` steps.

Usage:
    python bench/balance.py [--data DIR] [--out DIR]
Writes DIR/balance.json (default: a temporary folder, removed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

import datagen  # noqa: E402

import mmfeed  # noqa: E402

CLI = ROOT / "build" / "mmfeed"
TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
WORLDS = (8, 64, 512)
PER_RANK = (1, 2, 4, 8)
STEPS = 32
MAX_PIXELS = 1_003_520
# Packed: rows of BUDGET tokens, one a step a rank; each rank's PACK_WINDOW samples a window
# packed as the Loader packs them, WINDOWS windows a run.
BUDGET = 8192
PACK_WINDOW = 64
WINDOWS = 4


def indexed(manifest: Path) -> Path:
    subprocess.run(
        [str(CLI), "index", "--tokenizer", str(TOKENIZER), str(manifest)], check=True, capture_output=True, timeout=600
    )
    return manifest


def data_sets(root: Path) -> dict[str, dict]:
    demo, held_out = root / "demo", root / "held-out"
    datagen.generate(demo, samples=136, seed=0, videos=12)
    datagen.generate(held_out, samples=96, seed=7)
    images, videos = indexed(demo / "manifest.jsonl"), indexed(demo / "videos.jsonl")
    return {
        "demo (136 image conversations)": dict(manifest=[images], weights=[1.0]),
        "video-heavy (images and clips, half each)": dict(manifest=[images, videos], weights=[1.0, 1.0]),
        "held-out (96, another seed)": dict(manifest=[indexed(held_out / "manifest.jsonl")], weights=[1.0]),
    }


def compare(world: int, data: dict, shape: dict) -> dict:
    """One run's steps as drawn, balanced by tokens and by compute (the report's FLOPs), and the
    plan's milliseconds a step (a packing window, packed)."""
    common = dict(tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, world_size=world, **shape, **data)
    tokens = mmfeed.balance_report(balance="tokens", **common)
    compute = mmfeed.balance_report(balance="compute", **common)
    assert tokens["mean_drawn"] == compute["mean_drawn"] and compute["media_nominal"] == 0
    plans = WINDOWS if "token_budget" in shape else len(compute["steps"])
    return dict(
        drawn=compute["mean_drawn"],
        tokens=tokens["mean_planned"],
        compute=compute["mean_planned"],
        free=compute["mean_free"],
        plan_ms=1e3 * compute["plan_seconds"] / plans,
        steps=len(compute["steps"]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="where the data sets are (made if missing); default: --out")
    parser.add_argument("--out", type=Path, help="where balance.json goes (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        sets = data_sets(args.data or out)
        rows = []
        print(f"{'data':44} {'ranks x n':>13} {'drawn':>7} {'tokens':>7} {'compute':>8} {'free':>7} {'plan ms':>8}")
        for name, data in sets.items():
            for world in WORLDS:
                runs = [
                    (str(per_rank), dict(batch_size=per_rank, blend_samples=world * per_rank * STEPS))
                    for per_rank in PER_RANK
                ]
                runs.append(
                    (
                        f"{BUDGET} tok",
                        dict(token_budget=BUDGET, pack_window=PACK_WINDOW, blend_samples=world * PACK_WINDOW * WINDOWS),
                    )
                )
                for per_rank, shape in runs:
                    row = dict(data=name, world=world, per_rank=per_rank, **compare(world, data, shape))
                    rows.append(row)
                    free = f"{row['free']:7.3f}" if row["free"] > 0 else "-"
                    print(
                        f"{name:44} {f'{world} x {per_rank}':>13} {row['drawn']:7.3f} {row['tokens']:7.3f} "
                        f"{row['compute']:8.3f} {free:>7} {row['plan_ms']:8.3f}"
                    )
        (out / "balance.json").write_text(json.dumps(rows, indent=1))
        print(
            f"largest rank's FLOPs / mean, the mean of {STEPS} steps (packed: rows of {BUDGET} tokens, one a "
            f"step a rank, {WINDOWS} windows of {PACK_WINDOW} samples a rank); the plan's ms a step (a "
            "window) on one core; free: balanced by compute with each rank's count free (a batch of 1 to twice "
            "batch_size samples), which the Loader does not do (its counts stay equal)"
        )
        if args.out:
            print(f"wrote {out / 'balance.json'}")


if __name__ == "__main__":
    main()
