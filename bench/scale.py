"""Opening a data set at cluster scale: what rank 0 of 8 pays before its first batch, for a JSONL
manifest of N samples (10M: 12.8 GB, over max_manifest_bytes: refused read whole) (generated: one short image conversation a line, ~1.1 KB, every sample
naming one small shared image), read whole (today's default) and from its index (`mmfeed index`),
against Hugging Face `datasets` (its JSON loader: the Arrow conversion on first use, then its
memory-mapped cache, sharded 8 ways), in one run on the same data and cores.

Each figure comes from its own fresh process: the time to open (the Loader's constructor, or
`load_dataset`), to the first batch (4 samples, tokenized and their image decoded; `datasets`:
its first 4 rows of the shard), the peak RSS (ru_maxrss) and the RSS after the first batch, and
the bytes the process read from storage up to its first batch (/proc/self/io read_bytes: read()
and the pages its mappings faulted in alike), the data set's files (manifest, index, image,
`datasets`' cache) dropped from the page cache before each run (posix_fadvise DONTNEED), the
tokenizer and the libraries warm.
Then eight rank processes together, from the index: the slowest rank's first batch, and their
RSS summed (and PSS: pages the ranks share, the mapped index's, counted once between them).

Then Parquet files as Hugging Face datasets writes them (the conversations, each with a ~60 KB
image), read whole and from the index `mmfeed index` writes beside each file, local and in the
object store: the bytes read (local) and the images' bytes fetched (mmfeed's count).

Then the manifest in an object store (nginx with a first-byte delay and a per-connection rate,
as bench/pipeline.py's), read whole and from its index in the node cache: the manifest bytes
fetched before the first batch (mmfeed's own count of its ranged GETs).

Then WebDataset shards (the conversations, each with a ~100 KB image, in 20 shards written by
webdataset's TarWriter): read by a brace pattern (scanned: their headers found by reading them),
from the .tar.idx `mmfeed index` writes beside each shard (and the time it takes), and as an Energon
dataset (`energon prepare`'s own .tar.idx, and its time), rank 0 of 8 alike, and that dataset by
Energon's own loader (`get_train_dataset`, rank 0 of 8, its images decoded and JSON parsed, nothing
tokenized); and the same shards in the object store, scanned and from the .tar.idx beside them.

Usage:
    python bench/scale.py [--samples 200000,2000000,10000000] [--datasets-up-to 2000000] [--remote 200000]
                          [--shards 2000x20] [--parquet 2000x4] [--out DIR] [--keep]
Writes DIR/scale.json (default: a temporary folder, removed unless --keep).
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
TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
CLI = Path(os.environ.get("MMFEED_CLI", ROOT / "build" / "mmfeed"))
WORLD = 8

# One process's measurement: runs as `python bench/scale.py --child KIND MANIFEST RANK`.
CHILD = r"""
import json, os, resource, sys, time
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS"))
def pss():
    with open("/proc/self/smaps_rollup") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("Pss:"))
def storage():  # bytes this process had read from storage (page faults of its mappings included)
    with open("/proc/self/io") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("read_bytes"))
kind, manifest, rank, tokenizer = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
start_bytes, base_rss, base_pss = storage(), rss(), pss()
t0, imported = time.perf_counter(), 0.0
if kind == "warm":  # the libraries and the tokenizer into the page cache, before anything is measured
    import datasets, mmfeed, tokenizers
    tokenizers.Tokenizer.from_file(tokenizer)
    try:
        import megatron.energon
    except ImportError:
        pass
    print("{}")
    sys.exit(0)
elif kind == "energon":  # Energon's own loader: rank 0 of 8, its samples' images decoded, the JSON parsed
    from megatron.energon import Cooker, DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset, stateless
    imported = time.perf_counter() - t0  # torch and Energon: not counted as opening
    t0 += imported
    @stateless
    def cook(sample):
        return {"key": sample["__key__"], "conversation": sample["json"], "image": sample.get("0.jpg")}
    class Raw(DefaultTaskEncoder):
        cookers = [Cooker(cook)]
        def batch(self, samples):
            return samples
    config = WorkerConfig(rank=rank, world_size=8, num_workers=0)
    loader = get_loader(get_train_dataset(manifest, batch_size=4, shuffle_buffer_size=None,
                                          max_samples_per_sequence=None, worker_config=config, task_encoder=Raw()))
    t1 = time.perf_counter()
    batch = next(iter(loader))
elif kind == "datasets":
    import datasets
    datasets.disable_progress_bars()
    ds = datasets.load_dataset("json", data_files=manifest, split="train", cache_dir=os.environ["HF_CACHE"])
    t1 = time.perf_counter()
    shard = ds.shard(num_shards=8, index=rank)
    rows = [shard[i] for i in range(4)]
else:
    import mmfeed
    cache = {"cache_dir": os.environ["CACHE_DIR"]} if "CACHE_DIR" in os.environ else {}
    loader = mmfeed.Loader(manifest, tokenizer=tokenizer, rank=rank, world_size=8, batch_size=4, workers=1,
                           max_pixels=50_000, tensors="np", **cache)
    t1 = time.perf_counter()
    batch = next(loader)
t2 = time.perf_counter()
text = loader.metrics().get("gauges", {}) if kind == "mmfeed" else {}
fetched = loader.metrics().get("counters", {}).get("fetch.bytes", 0) if kind == "mmfeed" else 0
print(json.dumps({"import_s": imported, "fetch_bytes": fetched, "open_s": t1 - t0, "first_batch_s": t2 - t0, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base_rss,
                  "rss": rss() - base_rss, "pss": pss() - base_pss, "read_bytes": storage() - start_bytes,
                  "text_bytes": text.get("manifest.text_bytes", {}).get("value", 0),
                  "text_requests": text.get("manifest.text_requests", {}).get("value", 0)}))
"""


def generate(out: Path, samples: int, side: int = 0) -> Path:
    """N conversations naming one image, written in blocks: a flat 64 x 48 one, or with `side` a
    side x side one of noise (~100 KB at 256: a photograph's bytes)."""
    import numpy as np
    from PIL import Image

    (out / "images").mkdir(parents=True, exist_ok=True)
    if side:
        noise = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
        Image.fromarray(noise).save(out / "images" / "tiny.jpg", quality=90)
    else:
        Image.new("RGB", (64, 48), (120, 80, 40)).save(out / "images" / "tiny.jpg", quality=90)
    words = ("describe the scene in detail please, noting colours, shapes and what each object might be " * 9).strip()
    manifest = out / f"manifest-{samples}.jsonl"
    with manifest.open("w") as f:
        block = []
        for i in range(samples):
            line = {
                "id": f"s{i:09d}",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "image": "images/tiny.jpg"},
                            {"type": "text", "text": f"{i}: {words}"},
                        ],
                    },
                    {"role": "assistant", "content": [{"type": "text", "text": f"Sample {i}. " + words[:240]}]},
                ],
            }
            block.append(json.dumps(line))
            if len(block) == 10_000:
                f.write("\n".join(block) + "\n")
                block = []
        if block:
            f.write("\n".join(block) + "\n")
    return manifest


def child(kind: str, manifest: Path | str, rank: int = 0, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, str(manifest), str(rank), str(TOKENIZER)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def evict(work: Path) -> None:
    """The data set's files out of the page cache (written back first: only clean pages no process
    maps are dropped), so each run reads what it needs from storage."""
    for path in work.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def measure(kind: str, manifest: Path, env: dict | None = None, url: str | None = None) -> dict:
    evict(manifest if manifest.is_dir() else manifest.parent)
    p = child(kind, url or manifest, env=env)
    out, err = p.communicate(timeout=3600)
    if p.returncode != 0:
        raise SystemExit(f"{kind} on {manifest.name} failed:\n{err}")
    return json.loads(out)


def eight_ranks(manifest: Path) -> dict:
    evict(manifest.parent)
    procs = [child("mmfeed", manifest, rank) for rank in range(WORLD)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise SystemExit(f"a rank failed:\n{err}")
        results.append(json.loads(out))
    return {
        "slowest_first_batch_s": max(r["first_batch_s"] for r in results),
        "rss_sum": sum(r["rss"] for r in results),
        "pss_sum": sum(r["pss"] for r in results),
        "read_bytes_sum": sum(r["read_bytes"] for r in results),
    }


def shard_run(samples: int, shards: int, work: Path) -> dict:
    """The same conversations, each with a ~100 KB image, as WebDataset shards (webdataset's own
    TarWriter), read by a pattern (scanned) and, prepared by Energon's own `energon prepare`, as an
    Energon dataset (opened from its .tar.idx)."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    import datagen

    folder = work / f"shards-{samples}"
    manifest = generate(folder, samples, side=256)
    root = folder / "energon"
    written = datagen.write_shards(manifest, root, per_shard=samples // shards)
    manifest.unlink()
    width = max(3, len(str(len(written) - 1)))  # names of one width, for one brace pattern
    for i, path in enumerate(written):
        path.rename(root / f"shard-{i:0{width}d}.tar")
    parts = f"shard-{{{0:0{width}d}..{len(written) - 1:0{width}d}}}.tar"
    size = sum(p.stat().st_size for p in root.glob("*.tar"))
    row: dict = {"samples": samples, "shards": len(written), "shard_bytes": size}
    pattern = str(root / parts)
    measure("warm", Path(pattern), {"PYTHONPATH": str(ROOT / ".oracles" / "energon")})
    row["scanned"] = measure("mmfeed", Path(pattern))
    from objectstore import Nginx

    with Nginx(root, work / "nginx-shards") as server:  # the same shards in an object store
        url = server.url("s3", parts)
        row["remote_scanned"] = measure("mmfeed", Path(pattern), url=url)
        evict(root)
        start = time.perf_counter()
        subprocess.run([str(CLI), "index", "--json", pattern], capture_output=True, text=True, check=True)
        row["mmfeed_index_s"] = time.perf_counter() - start
        row["indexed"] = measure("mmfeed", Path(pattern))
        row["remote_indexed"] = measure("mmfeed", Path(pattern), url=url)
    for idx in root.glob("*.tar.idx"):  # energon prepare writes its own
        idx.unlink()
    evict(root)
    start = time.perf_counter()
    prepare = subprocess.run(
        [
            sys.executable,
            "-m",
            "megatron.energon.cli.main",
            "prepare",
            str(root),
            "--non-interactive",
            "--skip-dataset-yaml",
            "--split-parts",
            f"train:{parts}",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / ".oracles" / "energon")},
    )
    if prepare.returncode == 0:
        row["energon_prepare_s"] = time.perf_counter() - start
        row["energon"] = measure("mmfeed", root)
        # Energon's own loader needs the sample type: raw samples, each cooked to its decoded
        # image and parsed JSON (mmfeed reads no dataset.yaml).
        (root / ".nv-meta" / "dataset.yaml").write_text(
            "__module__: megatron.energon\n__class__: CrudeWebdataset\nsubflavors: {}\n"
        )
        row["energon_loader"] = measure("energon", root, {"PYTHONPATH": str(ROOT / ".oracles" / "energon")})
    else:
        print(
            f"(energon prepare is not installed here: scripts/setup.sh puts it in .oracles/energon)\n{prepare.stderr[-500:]}"
        )
    shutil.rmtree(folder, ignore_errors=True)
    return row


def shard_report(row: dict) -> None:
    print(
        f"\n{row['samples']:,} samples in {row['shards']} shards, {mb(row['shard_bytes'])} "
        f"(each sample a conversation and a ~100 KB image)"
    )
    print(f"  {'rank 0 of 8':<36}{'open':>9}{'1st batch':>11}{'peak RSS':>14}{'RSS after':>14}{'read':>14}")
    for key, label in (
        ("scanned", "shards by a pattern, scanned"),
        ("indexed", "the pattern, from mmfeed's .tar.idx"),
        ("energon", "Energon dataset, from its .tar.idx"),
        ("energon_loader", "Energon's own loader (no tokenizing)"),
    ):
        if key in row:
            r = row[key]
            print(
                f"  {label:<36}{r['open_s']:>8.2f}s{r['first_batch_s']:>10.2f}s{mb(r['peak_rss']):>14}"
                f"{mb(r['rss']):>14}{mb(r['read_bytes']):>14}"
            )
    if "energon_loader" in row:
        print(f"  (Energon's loader: importing it and torch took {row['energon_loader']['import_s']:.2f} s more)")
    s, i = row["scanned"], row["indexed"]
    print(
        f"  from mmfeed index's .tar.idx vs scanned: first batch {s['first_batch_s'] / i['first_batch_s']:.1f}x "
        f"sooner, bytes read {i['read_bytes'] / row['shard_bytes']:.2%} of the shards; "
        f"mmfeed index took {row['mmfeed_index_s']:.2f} s"
        + (f", energon prepare {row['energon_prepare_s']:.2f} s" if "energon_prepare_s" in row else "")
    )
    s, i = row["remote_scanned"], row["remote_indexed"]
    print(
        f"  in an object store (50 ms first byte, 32 MB/s a connection): scanned, first batch "
        f"{s['first_batch_s']:.2f} s (every shard's headers fetched); from the .tar.idx beside them "
        f"{i['first_batch_s']:.2f} s, {i['text_requests']} GETs of headers and .json, {mb(i['text_bytes'])} "
        f"({i['text_bytes'] / row['shard_bytes']:.2%} of the shards)"
    )
    if "energon" in row:
        s, e = row["scanned"], row["energon"]
        print(
            f"  from the .tar.idx vs scanned: first batch {s['first_batch_s'] / e['first_batch_s']:.1f}x sooner, "
            f"bytes read {e['read_bytes'] / row['shard_bytes']:.2%} of the shards (scanned: "
            f"{s['read_bytes'] / row['shard_bytes']:.0%})"
        )


def parquet_run(samples: int, files: int, work: Path) -> dict:
    """The conversations, each with a ~60 KB image, as Parquet files written by Hugging Face
    `datasets` (Image() bytes inline: uncompressed, PLAIN, a page index), rank 0 of 8: read whole
    (each file's footer, page index and text columns at open; each sample's image by its data
    page) and from the index `mmfeed index` writes beside each file (each image fetched alone);
    local, and in the object store (its index built from the URLs with --out, uploaded beside)."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    import datagen
    from objectstore import Nginx

    folder = work / f"parquet-{samples}"
    manifest = generate(folder, samples, side=256)
    root = folder / "parquet"
    written = datagen.write_parquet(manifest, root, per_file=samples // files)
    parts = f"train-{{00000..{len(written) - 1:05d}}}.parquet"
    pattern = root / parts
    row: dict = {"samples": samples, "files": len(written), "bytes": sum(p.stat().st_size for p in written)}
    measure("warm", pattern)
    row["whole"] = measure("mmfeed", pattern)
    with Nginx(root, work / "nginx-parquet") as server:
        url = server.url("s3", parts)
        row["remote_whole"] = measure("mmfeed", pattern, url=url)
        up = work / "parquet-up"
        start = time.perf_counter()
        subprocess.run([str(CLI), "index", "--json", "--out", str(up), url], capture_output=True, text=True, check=True)
        row["remote_index_s"] = time.perf_counter() - start
        for built in up.glob("*.mmidx"):
            shutil.copy(built, root / built.name)
        row["index_bytes"] = sum(p.stat().st_size for p in up.glob("*.mmidx"))
        row["remote_indexed"] = measure("mmfeed", pattern, url=url)
    for built in root.glob("*.mmidx"):  # bound to the server's ETags; the local files' own next
        built.unlink()
    evict(root)
    start = time.perf_counter()
    subprocess.run([str(CLI), "index", "--json", str(pattern)], capture_output=True, text=True, check=True)
    row["index_s"] = time.perf_counter() - start
    row["indexed"] = measure("mmfeed", pattern)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(work / "parquet-up", ignore_errors=True)
    return row


def parquet_report(row: dict) -> None:
    print(
        f"\n{row['samples']:,} samples in {row['files']} Parquet files written by datasets, {mb(row['bytes'])} "
        f"(each row a conversation and a ~60 KB image); index {mb(row['index_bytes'])}, built in "
        f"{row['index_s']:.2f} s (from the object store: {row['remote_index_s']:.2f} s)"
    )
    print(f"  {'rank 0 of 8':<40}{'open':>9}{'1st batch':>11}{'peak RSS':>14}{'read':>14}{'fetched':>14}")
    for key, label in (
        ("whole", "local files, read whole"),
        ("indexed", "local files, from their index"),
        ("remote_whole", "object store, read whole"),
        ("remote_indexed", "object store, from the index beside"),
    ):
        r = row[key]
        print(
            f"  {label:<40}{r['open_s']:>8.2f}s{r['first_batch_s']:>10.2f}s{mb(r['peak_rss']):>14}"
            f"{mb(r['read_bytes']):>14}{mb(r['fetch_bytes']):>14}"
        )
    w, i = row["remote_whole"], row["remote_indexed"]
    print(
        f"  from the index vs read whole, in the object store: first batch "
        f"{w['first_batch_s'] / i['first_batch_s']:.1f}x sooner, images' bytes fetched "
        f"{w['fetch_bytes'] / max(i['fetch_bytes'], 1):.1f}x fewer"
    )


def remote_run(samples: int, work: Path) -> dict:
    """The manifest in an object store (the benchmark's nginx, /s3/: a 50 ms median first byte,
    32 MB/s a connection), rank 0 of 8: read whole, and from its index in the node cache (filled
    ahead by `mmfeed index URL --cache-dir`, as a node's first rank would)."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from objectstore import Nginx

    folder = work / f"remote-{samples}"
    manifest = generate(folder, samples)
    row: dict = {"samples": samples, "manifest_bytes": manifest.stat().st_size}
    with Nginx(folder, work / "nginx") as server:
        url = server.url("s3", manifest.name)
        measure("warm", manifest)
        row["whole"] = measure("mmfeed", manifest, url=url)
        cache = work / "node-cache"
        t0 = time.perf_counter()
        built = subprocess.run(
            [str(CLI), "index", "--json", "--cache-dir", str(cache), url], capture_output=True, text=True, check=True
        )
        row["index_build_s"] = time.perf_counter() - t0
        row["index_bytes"] = json.loads(built.stdout)["index_bytes"]
        row["indexed"] = measure("mmfeed", manifest, {"CACHE_DIR": str(cache)}, url=url)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    return row


def remote_report(row: dict) -> None:
    n, size = row["samples"], row["manifest_bytes"]
    print(
        f"\n{n:,} samples, {mb(size)} of JSONL in an object store (50 ms first byte, 32 MB/s a connection); "
        f"index {mb(row['index_bytes'])} in the node cache, built in {row['index_build_s']:.1f} s"
    )
    print(f"  {'rank 0 of 8':<28}{'open':>9}{'1st batch':>11}{'peak RSS':>14}{'manifest fetched':>18}{'GETs':>7}")
    w, i = row["whole"], row["indexed"]
    for r, label, fetched, gets in (
        (w, "mmfeed, read whole", size, 1),
        (i, "mmfeed, from its index", i["text_bytes"], i["text_requests"]),
    ):
        print(
            f"  {label:<28}{r['open_s']:>8.2f}s{r['first_batch_s']:>10.2f}s{mb(r['peak_rss']):>14}"
            f"{mb(fetched):>18}{gets:>7}"
        )
    print(
        f"  from the index vs read whole: first batch {w['first_batch_s'] / i['first_batch_s']:.1f}x sooner, "
        f"peak RSS {w['peak_rss'] / max(i['peak_rss'], 1):.1f}x less, manifest bytes fetched "
        f"{i['text_bytes'] / size:.3%} of it"
    )


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def run(samples: int, work: Path, with_datasets: bool) -> dict:
    manifest = generate(work, samples)
    size = manifest.stat().st_size
    row: dict = {"samples": samples, "manifest_bytes": size}
    measure("warm", manifest)
    (manifest.parent / (manifest.name + ".mmidx")).unlink(missing_ok=True)
    try:
        row["whole"] = measure("mmfeed", manifest)
    except SystemExit as refused:  # over max_manifest_bytes: what a rank meets without an index
        row["whole_refused"] = str(refused).strip().splitlines()[-1]
    t0 = time.perf_counter()
    built = subprocess.run([str(CLI), "index", "--json", str(manifest)], capture_output=True, text=True, check=True)
    row["index_build_s"] = time.perf_counter() - t0
    row["index_bytes"] = json.loads(built.stdout)["index_bytes"]
    row["indexed"] = measure("mmfeed", manifest)
    row["indexed_8_ranks"] = eight_ranks(manifest)
    if with_datasets:
        hf_cache = work / "hf-cache"
        row["datasets_first"] = measure("datasets", manifest, {"HF_CACHE": str(hf_cache)})
        row["datasets_cached"] = measure("datasets", manifest, {"HF_CACHE": str(hf_cache)})
        shutil.rmtree(hf_cache, ignore_errors=True)
    manifest.unlink()
    return row


def report(row: dict) -> None:
    n, size = row["samples"], row["manifest_bytes"]
    print(
        f"\n{n:,} samples, {mb(size)} of JSONL; index {mb(row['index_bytes'])} "
        f"({row['index_bytes'] / n:.0f} bytes a sample), built in {row['index_build_s']:.1f} s"
    )
    print(f"  {'rank 0 of 8':<28}{'open':>9}{'1st batch':>11}{'peak RSS':>14}{'RSS after':>14}{'read':>14}")
    if "whole_refused" in row:
        print(f"  {'mmfeed, read whole':<28}refused: {row['whole_refused']}")
    for key, label in (
        ("whole", "mmfeed, read whole"),
        ("indexed", "mmfeed, from its index"),
        ("datasets_first", "datasets, first load"),
        ("datasets_cached", "datasets, cached"),
    ):
        if key not in row:
            continue
        r = row[key]
        print(
            f"  {label:<28}{r['open_s']:>8.2f}s{r['first_batch_s']:>10.2f}s{mb(r['peak_rss']):>14}"
            f"{mb(r['rss']):>14}{mb(r['read_bytes']):>14}"
        )
    i = row["indexed"]
    if "whole" in row:
        w = row["whole"]
        print(
            f"  from the index vs read whole: first batch {w['first_batch_s'] / i['first_batch_s']:.1f}x sooner, "
            f"peak RSS {w['peak_rss'] / max(i['peak_rss'], 1):.1f}x less, bytes read "
            f"{i['read_bytes'] / size:.2%} of the manifest"
        )
    if "datasets_cached" in row:
        d = row["datasets_cached"]
        print(
            f"  from the index vs datasets (cached): first batch {d['first_batch_s'] / i['first_batch_s']:.1f}x, "
            f"RSS after {d['rss'] / max(i['rss'], 1):.1f}x"
        )
    e = row["indexed_8_ranks"]
    print(
        f"  8 ranks together from the index: slowest first batch {e['slowest_first_batch_s']:.2f} s, "
        f"RSS summed {mb(e['rss_sum'])} (PSS, the shared index counted once: {mb(e['pss_sum'])}), "
        f"read summed {mb(e['read_bytes_sum'])}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", default="200000,2000000,10000000", help="comma-separated sizes")
    parser.add_argument(
        "--datasets-up-to",
        type=int,
        default=2_000_000,
        help="compare `datasets` on sizes up to this (its first load of 10M takes many minutes)",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--shards", default="2000x20", help="SAMPLESxSHARDS for the shard rows; 0: none")
    parser.add_argument("--remote", default="200000", help="samples of the object-store row; 0: none")
    parser.add_argument("--parquet", default="2000x4", help="SAMPLESxFILES for the Parquet rows; 0: none")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="mmfeed-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for n in (int(s) for s in args.samples.split(",") if s):
            rows.append(run(n, work, n <= args.datasets_up_to))
            report(rows[-1])
        if args.remote != "0":
            rows.append(remote_run(int(args.remote), work))
            remote_report(rows[-1])
        if args.shards != "0":
            samples, shards = (int(x) for x in args.shards.split("x"))
            rows.append(shard_run(samples, shards, work))
            shard_report(rows[-1])
        if args.parquet != "0":
            samples, files = (int(x) for x in args.parquet.split("x"))
            rows.append(parquet_run(samples, files, work))
            parquet_report(rows[-1])
        (work / "scale.json").write_text(json.dumps(rows, indent=1))
        print(f"\nwritten: {work / 'scale.json'}")
    finally:
        if not args.keep and args.out is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
