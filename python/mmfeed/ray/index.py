"""A manifest's dataset index built on a Ray cluster (`mmfeed index --ray ADDRESS SOURCE`).

    import ray
    import mmfeed.ray
    ray.init(address="auto")
    summary = mmfeed.ray.build_index("s3://bucket/train.jsonl", out="train.jsonl.mmidx",
                                     tokenizer="tokenizer.json")
    summary["samples"], summary["parts"]

What a build spends its time on is describing the samples: each medium's header read (a ranged
GET for a remote one), each text parsed and, with a tokenizer, its tokens counted. Here the
manifest's text is cut into byte ranges (about `parts`; by default four for each CPU of the
cluster, none under 1 MiB) and a Ray task describes each: it reads its range alone (a ranged GET
pinned to the object's ETag, where remote) and describes its samples on its node's cores. The
driver then takes the parts in order: it reads the text once (a local file mapped, a remote one
copied beside the index), checks each part against the text's own lines (the source's version,
the options, every sample's offset and length) and writes the index `mmfeed index` writes, the
same bytes, where `mmfeed index` would (`out`, `cache_dir`, else beside a local source). A JSON
array (its elements are no lines) is described by one task.

Every node must reach the source and its media: an object store's URLs, or paths on a file system
the nodes share; each node's S3 credentials come from its own environment, as the Loader's actors
take theirs. The tokenizer file is read here and sent to the tasks.

Shards and Parquet files (a pattern, a glob, a local wids descriptor) get an index each (a shard's
`.tar.idx`, a file's `.mmidx`), a Ray task a file: written beside each file by its task (on a file
system the nodes share), or, with `out`, sent back and written into that folder here (to upload
beside remote files).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import ray

from mmfeed import _mmfeed


def _describe(source: str, begin: int, end: int, options: dict, tokenizer: bytes | None) -> bytes:
    """One part's samples described (on a Ray worker), the tokenizer written where it reads it."""
    with tempfile.TemporaryDirectory(prefix="mmfeed-index-") as folder:
        if tokenizer is not None:
            path = os.path.join(folder, "tokenizer.json")
            with open(path, "wb") as f:
                f.write(tokenizer)
            options = {**options, "tokenizer": path}
        return _mmfeed.describe_index_part(source, begin, end, options)


def _index_file(file: str, out_here: bool) -> tuple[dict, str | None, bytes | None]:
    """One file of a shard or Parquet set indexed (on a Ray worker): beside it, or (`out_here`)
    into a folder of the worker's whose index comes back with its name."""
    if not out_here:
        return _mmfeed.build_index(file, {}), None, None
    with tempfile.TemporaryDirectory(prefix="mmfeed-index-") as folder:
        summary = _mmfeed.build_index(file, {"out": folder})
        written = os.listdir(folder)  # none where the file could not be indexed (named in the summary)
        if not written:
            return summary, None, None
        with open(os.path.join(folder, written[0]), "rb") as f:
            return summary, written[0], f.read()


def _gather(pending: dict, results: list, progress: bool, what: str) -> None:
    """Each task's result into `results` at its place, as they end; the rest cancelled where one fails."""
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                results[pending.pop(ref)] = ray.get(ref)
            if progress:
                sys.stderr.write(f"\r  {len(results) - len(pending)} of {len(results)} {what}")
    except BaseException as e:
        for ref in pending:  # a task failed (named in its error), or the caller stopped: the rest are not needed
            ray.cancel(ref)
        if isinstance(e, ray.exceptions.RayTaskError) and isinstance(e.cause, ValueError):
            raise ValueError(str(e.cause)) from None  # the engine's message, naming the source
        raise
    if progress:
        sys.stderr.write("\n")


def _index_set(source: str, kind: str, files: list[str], out: str | None, options: dict, progress: bool) -> dict:
    """A shard or Parquet set's files indexed a Ray task each; their indexes written beside them by
    the tasks, or into `out` here; the summaries summed."""
    task = ray.remote(_index_file).options(**options)
    pending = {task.remote(f, out is not None): k for k, f in enumerate(files)}
    results: list = [None] * len(files)
    _gather(pending, results, progress, "files indexed")
    counts = ("samples", "images", "index_bytes", "bad_count", "media_unreadable")
    summed = dict.fromkeys((*counts, "shards_indexed", "shards_kept", "shards_damaged"), 0)
    named: dict[str, list[str]] = {"bad": [], "unreadable": []}
    for summary, name, data in results:
        for key in summed:
            summed[key] += summary[key]
        for key, names in named.items():
            names += summary[key][: 100 - len(names)]
        if out is not None and data is not None:
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
    return {"index": out or source, "kind": kind, "files": len(files), **summed, **named}


def build_index(
    source: str,
    *,
    out: str | None = None,
    cache_dir: str | None = None,
    media_root: str | None = None,
    probe_media: bool = True,
    tokenizer: str | None = None,
    model: str = "qwen2-vl",
    chat_template: str | None = None,
    parts: int | None = None,
    task_options: dict | None = None,
    progress: bool = False,
) -> dict:
    """Builds `source`'s index with Ray tasks (a manifest's parts, or a set's files); returns what it found.

    The options are `mmfeed index`'s (out, cache_dir, media_root, probe_media (--no-media),
    tokenizer, model, chat_template). `parts`: about how many tasks (default: 4 a CPU of the
    cluster); `task_options`: each task's Ray options (default num_cpus=1: a part's reads wait on
    I/O); `progress`: a line on stderr as parts end. The summary has the keys of `mmfeed index
    --json`, and `parts` and `seconds` (a set's: its files summed, and `kind` and `files`). Raises ValueError naming the source or a part (one that
    cannot be read, a source replaced while indexed, a compressed manifest, shards or Parquet
    files: `mmfeed index` indexes those a file at a time).
    """
    if not ray.is_initialized():
        raise RuntimeError("mmfeed.ray.build_index needs Ray started: ray.init(...) first")
    start = time.perf_counter()
    kind, files = _mmfeed.index_files(source)
    task_options = {"num_cpus": 1, "max_retries": 3, **(task_options or {})}
    if kind != "manifest":
        summary = _index_set(source, kind, files, out, task_options, progress)
        summary.update(parts=len(files), seconds=round(time.perf_counter() - start, 3))
        return summary
    wanted = parts if parts is not None else max(1, 4 * int(ray.cluster_resources().get("CPU", 1)))
    if wanted < 1:
        raise ValueError(f"parts must be at least 1, not {wanted}")
    ranges = _mmfeed.plan_index_parts(source, wanted)
    options = {"media_root": media_root, "probe_media": probe_media, "model": model, "chat_template": chat_template}
    token_bytes: ray.ObjectRef | None = None  # a reference the tasks are given, resolved to the bytes
    if tokenizer is not None:
        with open(tokenizer, "rb") as f:
            token_bytes = ray.put(f.read())
    task = ray.remote(_describe).options(**task_options)
    pending = {task.remote(source, b, e, options, token_bytes): k for k, (b, e) in enumerate(ranges)}
    described: list[bytes] = [b""] * len(ranges)
    _gather(pending, described, progress, "parts described")
    summary = _mmfeed.build_index(
        source, {**options, "out": out, "cache_dir": cache_dir, "tokenizer": tokenizer}, described
    )
    summary.update(parts=len(ranges), seconds=round(time.perf_counter() - start, 3))
    return summary
