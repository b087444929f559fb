"""What Ray costs: mmfeed.ray.Loader against mmfeed.Loader at equal cores, on this machine.

The demo data set (written or reused), an infinitely fast trainer, the same options; mmfeed.Loader
with `cores` workers, then mmfeed.ray.Loader with 1 actor of `cores` workers and with 2 actors of
cores / 2 (a local Ray instance of `cores` CPUs, actors on this machine). For each: samples/s, CPU
seconds per sample (the trainer's process plus, for Ray, each actor process's over its parts) and
the trainer's wait share; the batches are checked equal to mmfeed.Loader's.

Usage: python bench/ray_loader.py [--samples 64] [--epochs 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

import datagen  # noqa: E402
import mmfeed  # noqa: E402
from mmfeed import _mmfeed  # noqa: E402


def run(loader) -> dict:
    t, cpu = time.perf_counter(), time.process_time()
    digests, samples = [], 0
    with loader:
        for b in loader:
            samples += len(b["sample_ids"])
            digests.append((tuple(b["sample_ids"]), b["input_ids"].tobytes().__hash__(),
                            np.asarray(b["pixel_values"]).tobytes().__hash__()))
        metrics = loader.metrics()
    seconds = time.perf_counter() - t
    actor_cpu = sum(a.get("cpu_s", 0.0) for a in metrics.get("actors", []))
    return {"samples": samples, "seconds": seconds, "samples_per_s": samples / seconds,
            "cpu_ms_per_sample": (time.process_time() - cpu + actor_cpu) / samples * 1e3,
            "wait_share": metrics.get("wait_share"), "digests": digests}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--data", type=Path, default=ROOT / "bench-results" / "ray-data")
    parser.add_argument("--json")
    args = parser.parse_args()
    import ray

    import mmfeed.ray

    cores = _mmfeed.usable_cpus()
    datagen.generate(args.data, samples=args.samples, seed=0, max_megapixels=2.0, workers=os.cpu_count())
    options = dict(tokenizer=str(ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"), batch_size=8,
                   max_pixels=1003520, epochs=args.epochs, tensors="np")
    manifest = args.data / "manifest.jsonl"
    rows = {"mmfeed.Loader": run(mmfeed.Loader(manifest, workers=cores, **options))}
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    try:
        for actors in (1, 2):
            each = max(1, cores // actors)
            rows[f"mmfeed.ray.Loader x{actors}"] = run(mmfeed.ray.Loader(
                manifest, num_actors=actors, actor_options={"num_cpus": cores / actors}, workers=each, **options))
    finally:
        ray.shutdown()
    base = rows["mmfeed.Loader"]
    print(f"mmfeed.ray.Loader against mmfeed.Loader, {cores} cores, {args.samples} samples x {args.epochs} epochs, "
          f"batches of 8, an infinitely fast trainer\n")
    print(f"{'system':<24}{'samples/s':>11}{'CPU ms/sample':>15}{'wait share':>12}{'vs local':>10}")
    for name, r in rows.items():
        assert r["digests"] == base["digests"], f"{name}: batches differ from mmfeed.Loader's"
        share = "" if r["wait_share"] is None else f"{r['wait_share']:.0%}"
        print(f"{name:<24}{r['samples_per_s']:>11.1f}{r['cpu_ms_per_sample']:>15.0f}{share:>12}"
              f"{r['samples_per_s'] / base['samples_per_s']:>9.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "digests"}
                                               for k, v in rows.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
