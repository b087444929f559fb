"""balance_cost="calibrated", measured in a real four-process run: four gloo ranks under torchrun,
each with its own rank Loader and a copy of the tiny random Qwen2-VL (tests/support/tiny_vl.py,
float32, one thread), as bench/balance_train.py sets them up (batch_size 2, gradient accumulation
2, photographs of 0.2-2 MP). The ranks take turns to compute each step (a barrier between turns),
and each rank's forward+backward is timed by its thread's CPU time (time.thread_time), so that
the Loaders' own threads preparing batches meanwhile do not count; each rank reports its own
time (Loader.report_step_time), and the times of every rank are gathered for the table. Three
runs on the same data, model and cores: as drawn, balanced by the default cost model
(Qwen2-VL-7B's FLOPs), and calibrated: the default model until every rank has reported
--calibrate steps, then the coefficients fitted to all ranks' times, switched to together.

Usage:
    python bench/balance_calibrated.py [--steps N] [--calibrate K] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests" / "support"), str(ROOT / "examples")]

from balance_train import ACCUMULATION, BATCH, WORLD, open_ranks, train_time  # noqa: E402

RUNS = {
    "drawn": {},
    "compute (Qwen2-VL-7B FLOPs)": dict(balance="compute"),
    "compute, calibrated during the run": dict(balance="compute", balance_cost="calibrated"),
}


def worker(manifest: Path, out: Path, steps: int, options: dict) -> None:
    """One rank: its steps' times, each computed in its turn; rank 0 writes every rank's."""
    import tiny_vl
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = tiny_vl.tiny_model("qwen2-vl").train()
    loader = open_ranks(manifest, **options)[rank]  # (the others are never iterated: nothing read)
    times = []
    for _ in range(steps):
        micro = [next(loader) for _ in range(ACCUMULATION)]
        for turn in range(WORLD):
            dist.barrier()
            if turn == rank:
                seconds = train_time(model, micro, clock=time.thread_time)
        times.append(seconds)
        if options:
            loader.report_step_time(seconds)
    every = [None] * WORLD
    dist.all_gather_object(every, dict(times=times, step_times=loader.step_times() if options else None))
    if rank == 0:
        out.write_text(json.dumps(every))
    loader.close()
    dist.destroy_process_group()


def run(manifest: Path, out: Path, steps: int, options: dict) -> dict:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={WORLD}"]
    command += [__file__, "--worker", str(manifest), str(out), str(steps), json.dumps(options)]
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    ranks = json.loads(out.read_text())
    ratios = [max(r["times"][s] for r in ranks) / statistics.mean(r["times"][s] for r in ranks) for s in range(steps)]
    summary = ranks[0]["step_times"] or {}
    switch = summary.get("calibrated")
    return dict(ratios=ratios, correlation=summary.get("correlation"), calibrated=switch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--calibrate", type=int, default=2, help="steps reported before the fit")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        import datagen

        datagen.generate(Path(tmp), samples=WORLD * BATCH * ACCUMULATION * args.steps, seed=52, max_megapixels=2.0)
        manifest = Path(tmp) / "manifest.jsonl"
        subprocess.run([str(ROOT / "build" / "mmfeed"), "index", str(manifest)], check=True, capture_output=True)
        runs = {}
        for name, options in RUNS.items():
            if options.get("balance_cost") == "calibrated":
                options = {**options, "calibration_steps": args.calibrate}
            runs[name] = run(manifest, Path(tmp) / "ranks.json", args.steps, options)
            print(f"  {name}: " + " ".join(f"{r:.3f}" for r in runs[name]["ratios"]), flush=True)
    k = args.calibrate
    print(f"{WORLD} gloo ranks x {ACCUMULATION} micro-batches of {BATCH}, {args.steps} steps, each rank's compute")
    print("timed by its thread's CPU (tiny Qwen2-VL, one thread); largest rank / mean, steps' mean")
    print(f"{'split':36} {'all steps':>9} {f'steps {k}+':>9} {'corr':>6}")
    for name, r in runs.items():
        corr = "     -" if r["correlation"] is None else f"{r['correlation']:6.3f}"
        print(f"{name:36} {statistics.mean(r['ratios']):9.3f} {statistics.mean(r['ratios'][k:]):9.3f} {corr}")
    switch = runs["compute, calibrated during the run"]["calibrated"]
    if switch:
        cost = ", ".join(f"{c:.3g}" for c in switch["balance_cost"])
        print(f"calibrated: from epoch {switch['epoch']} step {switch['step']}, balance_cost {cost}")
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5]))
    else:
        main()
