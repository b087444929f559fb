"""bench/fetch: mmfeed's fetch engine against boto3 with a thread pool, same objects, same
server, same run.

The server is nginx on loopback with a log-normal first-byte delay (median 50 ms, see
tests/support/servers/nginx.conf.in, location /slow/), serving objects of 100 KB to 2 MB through the S3
protocol (path-style: bucket "slow"). Both clients sign every request with SigV4. Reported per
client: objects/s, MB/s, CPU-seconds per 1,000 objects (the client's own process), and the
physical bound min(bandwidth, in-flight / latency) for the in-flight count used.

Usage: python bench/fetch.py [--objects 300] [--repeat 5] [--threads 32,64] [--inflight 64,256]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from objectstore import Nginx  # noqa: E402

MEDIAN_FIRST_BYTE_S = 0.05
SIGMA = 0.35


def make_objects(root: Path, n: int, seed: int = 1) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = int(math.exp(rng.uniform(math.log(100_000), math.log(2_000_000))))
        name = f"obj-{i:04d}.bin"
        (root / name).write_bytes(os.urandom(size))
        out.append((name, size))
    return out


def run_mmfeed(cli: Path, endpoint: str, names: list[str], repeat: int, inflight: int) -> dict:
    env = dict(
        os.environ,
        AWS_ACCESS_KEY_ID="AKIDBENCH",
        AWS_SECRET_ACCESS_KEY="benchsecret",
        AWS_REGION="us-east-1",
        AWS_CONFIG_FILE="/nonexistent",
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
    )
    args = [
        str(cli),
        "fetch",
        "--json",
        "--endpoint",
        endpoint,
        "--path-style",
        "--inflight",
        str(inflight),
        "--repeat",
        str(repeat),
    ] + [f"s3://slow/{n}" for n in names]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = json.loads(proc.stdout)
    if report["failed"]:
        raise RuntimeError(f"mmfeed failures: {report['failures'][:3]}")
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    return {
        "objects": report["objects"],
        "bytes": report["bytes"],
        "seconds": report["seconds"],
        "wall": wall,
        "user": user,
        "sys": system,
        "p50_ms": report["latency_ms"]["p50"],
        "p99_ms": report["latency_ms"]["p99"],
    }


def run_boto3(endpoint: str, names: list[str], repeat: int, threads: int) -> dict:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="AKIDBENCH",
        aws_secret_access_key="benchsecret",
        config=Config(
            max_pool_connections=threads,
            s3={"addressing_style": "path"},
            retries={"max_attempts": 5, "mode": "standard"},
        ),
    )
    client.get_object(Bucket="slow", Key=names[0])["Body"].read()  # warm the client (endpoint resolution)
    keys = names * repeat
    latencies = []

    def get(key):
        t = time.perf_counter()
        body = client.get_object(Bucket="slow", Key=key)["Body"].read()
        latencies.append(time.perf_counter() - t)
        return len(body)

    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        total = sum(pool.map(get, keys))
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    latencies.sort()
    return {
        "objects": len(keys),
        "bytes": total,
        "seconds": seconds,
        "wall": seconds,
        "user": after.ru_utime - before.ru_utime,
        "sys": after.ru_stime - before.ru_stime,
        "p50_ms": latencies[len(latencies) // 2] * 1e3,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1e3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", default="32,64", help="boto3 thread-pool sizes")
    parser.add_argument("--inflight", default="64,256", help="mmfeed requests in flight")
    parser.add_argument("--cli", type=Path, default=ROOT / "build" / "mmfeed")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mmfeed-bench-fetch-") as tmp:
        root = Path(tmp) / "objects"
        root.mkdir()
        objects = make_objects(root, args.objects)
        names = [n for n, _ in objects]
        mean_size = sum(s for _, s in objects) / len(objects)
        server = Nginx(root, Path(tmp) / "nginx").start()
        endpoint = f"http://127.0.0.1:{server.port}"
        try:
            rows = []
            for inflight in [int(x) for x in args.inflight.split(",")]:
                rows.append(
                    (
                        f"mmfeed, {inflight} in flight",
                        inflight,
                        run_mmfeed(args.cli, endpoint, names, args.repeat, inflight),
                    )
                )
            for threads in [int(x) for x in args.threads.split(",")]:
                rows.append((f"boto3, {threads} threads", threads, run_boto3(endpoint, names, args.repeat, threads)))
        finally:
            server.stop()

    mean_latency = MEDIAN_FIRST_BYTE_S * math.exp(SIGMA**2 / 2)
    print(
        f"bench/fetch: {args.objects} objects x {args.repeat}, {mean_size / 1e6:.2f} MB mean "
        f"(100 KB - 2 MB), first byte median {MEDIAN_FIRST_BYTE_S * 1e3:.0f} ms, nginx on loopback, "
        f"{os.cpu_count()} cores shared by client and server\n"
    )
    header = (
        f"{'client':<24}{'objects/s':>10}{'MB/s':>9}{'p50 ms':>8}{'p99 ms':>8}{'CPU s/1k obj':>14}"
        f"{'user':>7}{'sys':>7}{'% of bound':>12}"
    )
    print(header)
    print("-" * len(header))
    results = {}
    for label, concurrency, r in rows:
        ops = r["objects"] / r["seconds"]
        mbps = r["bytes"] / 1e6 / r["seconds"]
        cpu_per_k = (r["user"] + r["sys"]) / r["objects"] * 1000
        bound = concurrency / mean_latency
        results[label] = (ops, cpu_per_k, r["user"] / r["objects"] * 1000)
        print(
            f"{label:<24}{ops:>10.0f}{mbps:>9.0f}{r['p50_ms']:>8.1f}{r['p99_ms']:>8.1f}{cpu_per_k:>14.2f}"
            f"{r['user'] / r['objects'] * 1000:>7.2f}{r['sys'] / r['objects'] * 1000:>7.2f}"
            f"{100 * ops / bound:>11.0f}%"
        )
    print("\nbound = in-flight / mean first-byte latency (loopback bandwidth is not the limit here)")
    mm = [v for k, v in results.items() if k.startswith("mmfeed")]
    bt = [v for k, v in results.items() if k.startswith("boto3")]
    if mm and bt:
        best_boto_eff = max(1000 / c for _, c, _ in bt)
        mm_eff = 1000 / mm[0][1]
        user_ratio = min(u for _, _, u in bt) / mm[0][2]
        print(
            f"objects per CPU-second: mmfeed {mm_eff:.0f}, best boto3 {best_boto_eff:.0f} "
            f"-> {mm_eff / best_boto_eff:.1f}x (user space alone: {user_ratio:.1f}x)"
        )
        best_boto_ops = max(o for o, _, _ in bt)
        print(
            f"objects/s: mmfeed ({[k for k in results if k.startswith('mmfeed')][0]}) "
            f"{mm[0][0]:.0f} vs best boto3 {best_boto_ops:.0f} -> {mm[0][0] / best_boto_ops:.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
