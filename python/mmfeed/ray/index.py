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
    """Builds `source`'s index with Ray tasks describing its parts; returns what it found.

    The options are `mmfeed index`'s (out, cache_dir, media_root, probe_media (--no-media),
    tokenizer, model, chat_template). `parts`: about how many tasks (default: 4 a CPU of the
    cluster); `task_options`: each task's Ray options (default num_cpus=1: a part's reads wait on
    I/O); `progress`: a line on stderr as parts end. The summary has the keys of `mmfeed index
    --json`, and `parts` and `seconds`. Raises ValueError naming the source or a part (one that
    cannot be read, a source replaced while indexed, a compressed manifest, shards or Parquet
    files: `mmfeed index` indexes those a file at a time).
    """
    if not ray.is_initialized():
        raise RuntimeError("mmfeed.ray.build_index needs Ray started: ray.init(...) first")
    start = time.perf_counter()
    wanted = parts if parts is not None else max(1, 4 * int(ray.cluster_resources().get("CPU", 1)))
    if wanted < 1:
        raise ValueError(f"parts must be at least 1, not {wanted}")
    ranges = _mmfeed.plan_index_parts(source, wanted)
    options = {"media_root": media_root, "probe_media": probe_media, "model": model, "chat_template": chat_template}
    token_bytes: ray.ObjectRef | None = None  # a reference the tasks are given, resolved to the bytes
    if tokenizer is not None:
        with open(tokenizer, "rb") as f:
            token_bytes = ray.put(f.read())
    task = ray.remote(_describe).options(**{"num_cpus": 1, "max_retries": 3, **(task_options or {})})
    pending = {task.remote(source, b, e, options, token_bytes): k for k, (b, e) in enumerate(ranges)}
    described: list[bytes] = [b""] * len(ranges)
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                described[pending.pop(ref)] = ray.get(ref)
            if progress:
                sys.stderr.write(f"\r  {len(ranges) - len(pending)} of {len(ranges)} parts described")
    except BaseException as e:
        for ref in pending:  # a part failed (named in its error), or the caller stopped: the rest are not needed
            ray.cancel(ref)
        if isinstance(e, ray.exceptions.RayTaskError) and isinstance(e.cause, ValueError):
            raise ValueError(str(e.cause)) from None  # the engine's message, naming the source
        raise
    if progress:
        sys.stderr.write("\n")
    summary = _mmfeed.build_index(
        source, {**options, "out": out, "cache_dir": cache_dir, "tokenizer": tokenizer}, described
    )
    summary.update(parts=len(ranges), seconds=round(time.perf_counter() - start, 3))
    return summary
