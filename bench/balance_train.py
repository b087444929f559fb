"""Ranks balanced by compute, measured: the per-rank forward+backward time of a real model on the
batches each rank's Loader delivers, as drawn and balanced. One run, the same data, model and core.

Four rank Loaders (batch_size 2, gradient_accumulation_steps 2: a step is 16 samples) over a
demo set of photographs of 0.2-2 MP, bounded by max_pixels; the tiny random Qwen2-VL of the tests
(width 64, two text and two vision layers, the real vocabulary: tests/support/tiny_vl.py) in
float32 on the CPU. Each rank's micro-batches of a step are trained (forward, backward, gradients
kept) one rank after another in this process on one thread, each timed alone by this thread's
CPU time (--clock thread, the default: the Loaders' threads preparing later batches meanwhile do
not count; --clock wall: the wall clock), so a rank's time is its own compute, not its share of a
contended machine. Per step the largest rank's time over the
ranks' mean (1.00 is perfect: no rank waits at the all-reduce), as drawn (balance="none"),
balanced by tokens, by the default cost model (Qwen2-VL-7B's FLOPs), and by the coefficients
fitted to this model's own times (Loader.step_times() of the run before: what
report_step_time gives a trainer). The correlation of each run's predicted costs with the
measured rank times says how well each cost model predicts this model on this machine.

Usage:
    python bench/balance_train.py [--steps N] [--clock thread|wall] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "support"), str(ROOT / "examples")]

import datagen  # noqa: E402
import numpy as np  # noqa: E402
import tiny_vl  # noqa: E402
import torch  # noqa: E402

import mmfeed  # noqa: E402
from mmfeed.step_times import FLOPS_A_SECOND, fit  # noqa: E402

WORLD = 4
BATCH = 2
ACCUMULATION = 2
MAX_PIXELS = 401_408


def open_ranks(manifest: Path, **options) -> list:
    """The four rank Loaders of one run."""
    return [
        mmfeed.Loader(
            manifest,
            tokenizer=str(tiny_vl.TOKENIZER),
            model="qwen2-vl",
            max_pixels=MAX_PIXELS,
            batch_size=BATCH,
            gradient_accumulation_steps=ACCUMULATION,
            seed=11,
            rank=rank,
            world_size=WORLD,
            workers=1,
            **options,
        )
        for rank in range(WORLD)
    ]


def train_time(model, micro_batches: list, clock=time.perf_counter) -> float:
    """One forward+backward pass over a rank's micro-batches of one step (seconds of compute on
    one core: steady to about a percent, far less than the spreads measured); `clock`
    time.thread_time counts this thread's CPU alone (torch's CPU backward runs on it too)."""
    model.zero_grad(set_to_none=True)
    start = clock()
    for batch in micro_batches:
        model(**batch.model_inputs()).loss.backward()
    return clock() - start


def train_run(model, manifest: Path, steps: int, clock=time.thread_time, **options) -> dict:
    """Each step's rank times and their largest over the mean; a balancing run's rank Loaders
    told each step's time (report_step_time, as a trainer tells them), their step_times() pooled:
    the correlation of the predicted costs with the times, and the coefficients fitted to them."""
    loaders = open_ranks(manifest, **options)
    ratios, terms, seconds, predicted = [], [], [], []
    for _ in range(steps):
        times = []
        for loader in loaders:
            times.append(train_time(model, [next(loader) for _ in range(ACCUMULATION)], clock))
            if "balance" in options:
                loader.report_step_time(times[-1])
        ratios.append(max(times) / statistics.mean(times))
    out = dict(max_over_mean=statistics.mean(ratios), worst=max(ratios))
    print(f"  {options or 'drawn'}: max/mean {out['max_over_mean']:.3f}", flush=True)
    if "balance" in options:
        for loader in loaders:
            summary = loader.step_times()
            terms += list(zip(*summary["terms"].values()))
            seconds += summary["seconds"]
            predicted += summary["predicted_flops"]
        out["correlation"] = float(np.corrcoef(predicted, seconds)[0, 1])
        out["fitted"] = (fit(np.array(terms), np.array(seconds)) * FLOPS_A_SECOND).tolist()
    for loader in loaders:
        loader.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    parser.add_argument(
        "--clock",
        choices=("thread", "wall"),
        default="thread",
        help="time each rank's compute by this thread's CPU (default: the Loaders' threads preparing batches "
        "meanwhile do not count) or by the wall clock",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = tiny_vl.tiny_model("qwen2-vl").train()
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    with tempfile.TemporaryDirectory() as tmp:
        datagen.generate(Path(tmp), samples=WORLD * BATCH * ACCUMULATION * args.steps, seed=52, max_megapixels=2.0)
        manifest = Path(tmp) / "manifest.jsonl"
        # The index gives the plan each image's size from its header.
        subprocess.run([str(ROOT / "build" / "mmfeed"), "index", str(manifest)], check=True, capture_output=True)
        runs = {"drawn": train_run(model, manifest, args.steps, clock)}
        runs["tokens"] = train_run(model, manifest, args.steps, clock, balance="tokens")
        runs["compute (Qwen2-VL-7B FLOPs)"] = train_run(model, manifest, args.steps, clock, balance="compute")
        fitted = runs["compute (Qwen2-VL-7B FLOPs)"]["fitted"]
        runs["compute (fitted to this model)"] = train_run(
            model, manifest, args.steps, clock, balance="compute", balance_cost=fitted
        )
    print(
        f"{WORLD} ranks x {ACCUMULATION} micro-batches of {BATCH}, {args.steps} steps; tiny Qwen2-VL, CPU, one "
        f"thread; timed by the {args.clock} clock"
    )
    print(f"{'split':34} {'max/mean':>9} {'worst':>7} {'corr':>6}")
    for name, run in runs.items():
        corr = f"{run['correlation']:6.3f}" if "correlation" in run else "     -"
        print(f"{name:34} {run['max_over_mean']:9.3f} {run['worst']:7.3f} {corr}")
    print("fitted balance_cost (FLOPs at 1 PFLOP/s):", ", ".join(f"{c:.3g}" for c in fitted))
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
