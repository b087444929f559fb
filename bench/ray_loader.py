"""What Ray costs: mmfeed.ray.Loader against mmfeed.Loader at equal cores, on this machine.

The demo data set (written or reused), an infinitely fast trainer, the same options; mmfeed.Loader
with `cores` workers, mmfeed.ray.Loader with 1 actor of `cores` workers and with 2 actors of
cores / 2 (a local Ray instance of `cores` CPUs, actors on this machine); each with HF's float32
pixel_values and with pixels="uint8" (an eighth of the bytes through the object store, normalized
by the trainer on its GPU: a table lookup not counted here). The six run in turn, `--rounds` times
(this machine is noisy: each ratio is taken within a round, and the medians are printed). For
each: samples/s, CPU ms per sample (the trainer's process plus, for Ray, each actor process's),
the trainer's wait share, and the seconds the actors took to start (apart: a cost of a run's
beginning only); the batches are checked equal to mmfeed.Loader's with the same pixels option,
and each rate is also given against the float32 mmfeed.Loader's.

Usage: python bench/ray_loader.py [--samples 256] [--epochs 2] [--rounds 3] [--part-groups 16]
                                  [--source local|s3] [--json OUT]
(--source s3: the images from the object server of `mmfeed bench`, 50 ms median first byte.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

import datagen  # noqa: E402

import pipeline  # noqa: E402  (bench/pipeline.py: mmfeed bench's object server and Ray instance)
from mmfeed import _mmfeed  # noqa: E402


def run(loader) -> dict:
    started = time.perf_counter()
    if hasattr(loader, "wait_ready"):
        loader.wait_ready()
    start_s = time.perf_counter() - started
    t, cpu = time.perf_counter(), time.process_time()
    digests, samples = [], 0
    with loader:
        for b in loader:
            samples += len(b["sample_ids"])
            digests.append(
                (
                    tuple(b["sample_ids"]),
                    zlib.crc32(np.ascontiguousarray(b["input_ids"]).data),
                    zlib.crc32(np.ascontiguousarray(b.get("pixel_values", b"")).data),  # none without images
                )
            )
        metrics = loader.metrics()
    seconds = time.perf_counter() - t
    actor_cpu = sum(a.get("cpu_s", 0.0) for a in metrics.get("actors", []))
    return {
        "samples": samples,
        "seconds": seconds,
        "start_s": start_s,
        "samples_per_s": samples / seconds,
        "cpu_ms_per_sample": (time.process_time() - cpu + actor_cpu) / samples * 1e3,
        "wait_share": metrics.get("wait_share"),
        "digests": digests,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--part-groups", type=int, default=16, help="batches per part (mmfeed.ray's default 16)")
    parser.add_argument(
        "--source",
        choices=("local", "s3"),
        default="local",
        help="the images from local files, or from the latency-injecting object server",
    )
    parser.add_argument("--data", type=Path, default=ROOT / "bench-results" / "ray-data")
    parser.add_argument("--json")
    args = parser.parse_args()
    cores = _mmfeed.usable_cpus()
    datagen.generate(args.data, samples=args.samples, seed=0, max_megapixels=2.0, workers=os.cpu_count())
    options = dict(
        tokenizer=str(ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"),
        batch_size=8,
        max_pixels=1003520,
        epochs=args.epochs,
        tensors="np",
    )
    manifest = args.data / "manifest.jsonl"
    with contextlib.ExitStack() as stack:
        if args.source == "s3":
            from objectstore import Nginx, rewrite_images, s3_env

            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mmfeed-ray-bench-")))
            server = stack.enter_context(Nginx(args.data, tmp / "nginx"))
            manifest = rewrite_images(manifest, lambda ref: f"s3://{pipeline.BUCKET}/{ref}", tmp / "remote.jsonl")
            os.environ.clear()
            os.environ.update(s3_env(f"http://127.0.0.1:{server.port}", "bench", "bench"))
        return measure(args, manifest, options, cores)


def measure(args, manifest: Path, options: dict, cores: int) -> int:
    import ray

    import mmfeed.ray

    # Each system with the local loader it is compared with (the same pixels option).
    systems, local_of = {}, {}
    for pixels in ("float32", "uint8"):
        local = "mmfeed.Loader" + ("" if pixels == "float32" else f" {pixels}")
        systems[local] = lambda pixels=pixels: mmfeed.Loader(manifest, workers=cores, pixels=pixels, **options)
        local_of[local] = local
        for actors in (1, 2):
            name = f"mmfeed.ray.Loader x{actors}" + ("" if pixels == "float32" else f" {pixels}")
            systems[name] = lambda actors=actors, pixels=pixels: mmfeed.ray.Loader(
                manifest,
                num_actors=actors,
                actor_options={"num_cpus": cores / actors},
                part_groups=args.part_groups,
                workers=max(1, cores // actors),
                pixels=pixels,
                **options,
            )
            local_of[name] = local
    rounds = {name: [] for name in systems}
    pipeline.start_local_ray(cores)  # the actors get the object server's settings
    try:
        for _ in range(args.rounds):
            for name, make in systems.items():
                rounds[name].append(run(make()))
    finally:
        ray.shutdown()
    print(
        f"mmfeed.ray.Loader against mmfeed.Loader, {cores} cores, {args.samples} samples x {args.epochs} epochs "
        f"from {'the object server (s3)' if args.source == 's3' else 'local files'}, "
        f"batches of 8, parts of {args.part_groups} batches, an infinitely fast trainer; medians of {args.rounds} "
        f'rounds; uint8: pixels="uint8" (normalized by the trainer, on its GPU)\n'
    )
    print(
        f"{'system':<30}{'samples/s':>11}{'CPU ms/sample':>15}{'wait share':>12}{'start s':>9}{'vs local':>10}"
        f"{'vs float32 local':>18}"
    )
    summary = {}
    for name, runs in rounds.items():
        base, floats = rounds[local_of[name]], rounds["mmfeed.Loader"]
        for r, b in zip(runs, base):
            assert r["digests"] == b["digests"], f"{name}: batches differ from {local_of[name]}'s"
        median = {
            key: statistics.median(r[key] for r in runs) if runs[0][key] is not None else None
            for key in ("samples_per_s", "cpu_ms_per_sample", "wait_share", "start_s")
        }
        median["vs_local"] = statistics.median(r["samples_per_s"] / b["samples_per_s"] for r, b in zip(runs, base))
        median["vs_float32_local"] = statistics.median(
            r["samples_per_s"] / f["samples_per_s"] for r, f in zip(runs, floats)
        )
        summary[name] = median
        share = "" if median["wait_share"] is None else f"{median['wait_share']:.0%}"
        start = f"{median['start_s']:.2f}" if "ray" in name else ""
        print(
            f"{name:<30}{median['samples_per_s']:>11.1f}{median['cpu_ms_per_sample']:>15.0f}{share:>12}"
            f"{start:>9}{median['vs_local']:>9.2f}x{median['vs_float32_local']:>17.2f}x"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
