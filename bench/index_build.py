"""Building a manifest's dataset index where its time goes: the media's headers in an object store.
A JSONL manifest of N conversations (default 20,000), each naming its own image (a ~20 KB JPEG),
manifest and images served by the benchmark's nginx (/s3/: a 50 ms median first byte, 32 MB/s a
connection). Indexed, in one run on the same data and cores:

- by `mmfeed index URL --out FILE` on this machine (its cores, 512 ranged GETs of images' first
  bytes in flight among them);
- by mmfeed.ray.build_index (`mmfeed index --ray`) on a Ray instance started here, the text cut
  into P parts, each a Ray task (reading its byte range alone, describing its samples), the
  index written here: for P = 2 and 8, tasks reserving 1 CPU and 0.25 CPU each.

Each index is checked to be the same bytes as the first. On one machine the tasks share its cores:
what parts add here is requests in flight (and Ray's cost: its start, its tasks, the parts' trip
through the object store); on a cluster each task also brings its node's cores and network.

Usage:
    python bench/index_build.py [--samples 20000] [--out DIR]
Writes DIR/index_build.json (default: a temporary folder, removed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = Path(os.environ.get("MMFEED_CLI", ROOT / "build" / "mmfeed"))


def generate(out: Path, samples: int) -> Path:
    """N conversations, sample i naming images/i.jpg (hard links of one noisy 96 x 96 JPEG)."""
    import numpy as np
    from PIL import Image

    images = out / "images"
    images.mkdir(parents=True, exist_ok=True)
    noise = np.random.default_rng(0).integers(0, 256, (96, 96, 3), dtype=np.uint8)
    Image.fromarray(noise).save(out / "one.jpg", quality=95)
    words = "describe the scene in detail please, noting colours and shapes " * 4
    manifest = out / "manifest.jsonl"
    with manifest.open("w") as f:
        for i in range(samples):
            os.link(out / "one.jpg", images / f"{i}.jpg")
            content = [{"type": "image", "image": f"images/{i}.jpg"}, {"type": "text", "text": f"{i}: {words}"}]
            line = {"messages": [{"role": "user", "content": content}, {"role": "assistant", "content": "A."}]}
            f.write(json.dumps(line) + "\n")
    return manifest


def on_ray(url: str, out: Path, parts: int, cpus: float) -> dict:
    import mmfeed.ray

    t0 = time.perf_counter()
    s = mmfeed.ray.build_index(url, out=str(out), parts=parts, task_options={"num_cpus": cpus})
    return {"seconds": time.perf_counter() - t0, "parts": s["parts"], "images": s["images"], "index": out}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    import ray
    from objectstore import Nginx

    from mmfeed import _mmfeed

    work = args.out or Path(tempfile.mkdtemp(prefix="mmfeed-index-build-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        manifest = generate(work / "data", args.samples)
        with Nginx(work / "data", work / "nginx") as server:
            url = server.url("s3", manifest.name)
            t0 = time.perf_counter()
            one = subprocess.run(
                [str(CLI), "index", "--json", "--out", str(work / "one.mmidx"), url],
                capture_output=True,
                text=True,
                check=True,
            )
            seconds = time.perf_counter() - t0
            images = json.loads(one.stdout)["images"]
            rows.append({"how": "mmfeed index, this machine", "seconds": seconds, "parts": 1, "images": images})
            cpus = _mmfeed.usable_cpus()
            t0 = time.perf_counter()
            ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
            ray_start = time.perf_counter() - t0
            try:
                for parts, task_cpus in ((2, 1.0), (8, 1.0), (8, 0.25)):
                    r = on_ray(url, work / f"ray-{parts}-{task_cpus}.mmidx", parts, task_cpus)
                    same = r.pop("index").read_bytes() == (work / "one.mmidx").read_bytes()
                    rows.append({"how": f"Ray, {parts} parts, {task_cpus:g} CPU a task", **r, "same_bytes": same})
            finally:
                ray.shutdown()
        print(
            f"{args.samples:,} samples, each naming its own image, in nginx /s3/ (50 ms first byte); "
            f"{cpus} cores; Ray started in {ray_start:.1f} s (not counted below)"
        )
        print(f"  {'built by':<34}{'parts':>6}{'seconds':>9}{'images/s':>10}{'vs one machine':>16}  same bytes")
        for r in rows:
            print(
                f"  {r['how']:<34}{r['parts']:>6}{r['seconds']:>9.2f}{r['images'] / r['seconds']:>10.0f}"
                f"{rows[0]['seconds'] / r['seconds']:>15.2f}x  {r.get('same_bytes', '-')}"
            )
        (work / "index_build.json").write_text(json.dumps(rows, indent=1))
        print(f"written: {work / 'index_build.json'}")
    finally:
        if args.out is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
