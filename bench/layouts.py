"""The cost of each data layout, side by side: the same samples as a JSONL manifest with one object
per image, as WebDataset tar shards (its images members of the shards, fetched as byte ranges) and
as Parquet files written by Hugging Face datasets (the images' bytes inline, each sample's data page
fetched as a byte range) and, on local disk, as `datasets.save_to_disk`'s folder of Arrow files (the
images byte ranges of the memory-mapped files), read by mmfeed's Loader from the latency-injecting S3 server (tests/support/objectstore.py: 50 ms
median first byte, 200 ms p99, 32 MB/s per connection) and from local disk, in one run.

Usage:
    mmfeed bench --layouts [--samples N] [--per-shard K] [--out DIR]   (K: samples per shard and per file)
    python bench/layouts.py ...   (the same)

Each layout runs in its own process with the same options (workers, fetch_inflight, batch size,
max_pixels, no shuffle: one epoch in manifest order) and an infinitely fast trainer: reported are
the time to the first batch (for shards: their headers indexed first; for Parquet: the files'
footers, page indexes and text columns read first), samples/s after it, the
CPU-seconds per sample of the process, and the GETs and bytes the Loader fetched. Written to
--out: layouts.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))
TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
BUCKET = "s3"  # the object server's S3 location doubles as the bucket name


def run_one(source: str, workers: int, batch: int, max_pixels: int) -> dict:
    """One layout, in this process: the figures of a pass over it."""
    import mmfeed

    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    samples, first = 0, None
    with mmfeed.Loader(
        source,
        tokenizer=TOKENIZER,
        max_pixels=max_pixels,
        batch_size=batch,
        workers=workers,
        shuffle=False,
        tensors="np",
    ) as loader:
        for b in loader:
            if first is None:
                first = time.perf_counter() - start
            samples += len(b["sample_ids"])
        errors = loader.errors()
        counters = loader.metrics()["counters"]
    wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "samples": samples,
        "errors": len(errors),
        "first_batch_s": first,
        "wall_s": wall,
        "samples_per_s": (samples - batch) / max(wall - first, 1e-9) if samples > batch else None,
        "cpu_s_per_sample": cpu / max(samples, 1),
        "gets": counters.get("fetch.requests", 0),
        "bytes": counters.get("fetch.bytes", 0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mmfeed bench --layouts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=128, help="samples in the data set (default 128)")
    parser.add_argument("--per-shard", type=int, default=32, help="samples per tar shard and Parquet file (default 32)")
    parser.add_argument("--max-megapixels", type=float, default=4.0, help="largest image written (default 4)")
    parser.add_argument("--max-pixels", type=int, default=1003520)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", type=int, default=0, help="the Loader's workers (default 0: auto)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="where layouts.json goes")
    parser.add_argument("--data", type=Path, help="the data set's directory (default OUT/layouts-data; reused)")
    parser.add_argument("--one", nargs=2, metavar=("LAYOUT", "SOURCE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args.one[1], args.workers, args.batch_size, args.max_pixels)))
        return 0

    import datagen
    from objectstore import Nginx, rewrite_images, s3_env

    args.out.mkdir(parents=True, exist_ok=True)
    data = (args.data or args.out / "layouts-data").resolve()
    datagen.generate(data, samples=args.samples, seed=0, max_megapixels=args.max_megapixels, workers=os.cpu_count())
    manifest = data / "manifest.jsonl"
    shards = datagen.write_shards(manifest, data / "wds", per_shard=args.per_shard)
    pattern = f"wds/shard-{{000..{len(shards) - 1:03d}}}.tar"
    files = datagen.write_parquet(manifest, data / "parquet", per_file=args.per_shard)
    parquet = f"parquet/train-{{00000..{len(files) - 1:05d}}}.parquet"
    saved = data / "saved"
    if not (saved / "state.json").exists():
        import datasets

        datasets.disable_progress_bars()
        rows = datasets.concatenate_datasets([datasets.Dataset.from_parquet(str(p)) for p in files])
        rows.save_to_disk(str(saved), num_shards=len(files))
    report = {
        "config": {
            "samples": args.samples,
            "per_shard": args.per_shard,
            "shards": len(shards),
            "max_pixels": args.max_pixels,
            "batch_size": args.batch_size,
            "workers": args.workers,
            "cores": os.cpu_count(),
            "bytes_objects": sum(p.stat().st_size for p in (data / "images").iterdir()),
            "bytes_shards": sum(p.stat().st_size for p in shards),
            "bytes_parquet": sum(p.stat().st_size for p in files),
            "bytes_arrow": sum(p.stat().st_size for p in saved.glob("*.arrow")),
            "object_store": {"first_byte_median_ms": 50, "first_byte_p99_ms": 200, "per_connection_mb_s": 32},
        },
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="mmfeed-layouts-") as tmp, Nginx(data, Path(tmp) / "nginx") as server:
        remote = rewrite_images(manifest, lambda ref: f"s3://{BUCKET}/{ref}", Path(tmp) / "remote.jsonl")
        env = s3_env(f"http://127.0.0.1:{server.port}", "bench", "bench")  # nginx does not check signatures
        runs = [
            ("s3", "jsonl + objects", str(remote)),
            ("s3", "webdataset shards", f"s3://{BUCKET}/{pattern}"),
            ("s3", "parquet (datasets)", f"s3://{BUCKET}/{parquet}"),
            ("local", "jsonl + objects", str(manifest)),
            ("local", "webdataset shards", str(data / pattern)),
            ("local", "parquet (datasets)", str(data / parquet)),
            ("local", "save_to_disk (arrow)", str(saved)),
        ]
        for where, layout, source in runs:
            print(f"mmfeed bench --layouts: {where}: {layout}", file=sys.stderr, flush=True)
            cmd = [
                sys.executable,
                __file__,
                "--one",
                layout,
                source,
                "--workers",
                str(args.workers),
                "--batch-size",
                str(args.batch_size),
                "--max-pixels",
                str(args.max_pixels),
            ]
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            report["runs"].append({"source": where, "layout": layout, **json.loads(done.stdout.splitlines()[-1])})
    (args.out / "layouts.json").write_text(json.dumps(report, indent=1) + "\n")
    print(table(report))
    return 0


def table(report: dict) -> str:
    rows = [
        "| source | layout | first batch s | samples/s | CPU s/sample | GETs | MB fetched |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    base = {}
    for r in report["runs"]:
        rate = r["samples_per_s"]
        if r["layout"].startswith("jsonl"):
            base[r["source"]] = rate
        ratio = (
            f" ({rate / base[r['source']]:.2f}x)"
            if rate and base.get(r["source"]) and not r["layout"].startswith("jsonl")
            else ""
        )
        rows.append(
            f"| {r['source']} | {r['layout']} | {r['first_batch_s']:.2f} | {rate:.1f}{ratio} | "
            f"{r['cpu_s_per_sample']:.4f} | {r['gets']} | {r['bytes'] / 1e6:.1f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
