"""`mmfeed index --ray ADDRESS`: manifests' dataset indexes built by Ray tasks (mmfeed.ray.build_index).

The CLI hands its arguments here:

    python -m mmfeed.ray_index --address ADDRESS [--parts N] [--task-cpus C] [--out FILE | --cache-dir DIR]
                               [--media-root DIR] [--no-media] [--tokenizer FILE [--model NAME]
                               [--chat-template NAME]] [--json] SOURCE...

ADDRESS is a cluster's (HOST:PORT, or "auto" for the one this machine belongs to), or "local" for
a Ray instance started here with the usable cores. It prints what `mmfeed index` prints, and the
parts; exit status 1 when a source could not be indexed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys


def print_summary(s: dict) -> None:
    """The summary as `mmfeed index` prints a manifest's, or a set's."""
    if "kind" in s:
        noun = "shards" if s["kind"] == "shards" else "files"
        print(
            f"{s['index']}: {s['samples']} samples in {s['files']} {noun} ({s['shards_indexed']} indexed now, "
            f"{s['shards_kept']} kept), {s['index_bytes']} bytes of index, {s['seconds']:.2f} s, a Ray task a file"
        )
        if s["shards_damaged"]:
            print(f"  {s['shards_damaged']} {noun} given no index:")
        for name in s["bad"]:
            print(f"    {name}")
        return
    print(
        f"{s['index']}: {s['samples']} samples ({s['images']} images, {s['videos']} videos, {s['audio']} audio "
        f"clips, {s['text_bytes']} bytes of text), {s['index_bytes']} bytes of index, {s['seconds']:.2f} s"
    )
    print(f"  described in {s['parts']} parts by Ray tasks")
    if s["text_tokens"]:
        print(f"  {s['text_tokens']} text tokens")
    for count, names, what in (
        ("bad_count", "bad", "samples are no conversation"),
        ("media_unreadable", "unreadable", "media could not be read"),
    ):
        if s[count]:
            print(f"  {s[count]} {what}:")
            for name in s[names]:
                print(f"    {name}")
    if s["media_not_probed"]:
        print(f"  {s['media_not_probed']} media not read (--no-media: their facts unknown)")


def main(argv: list[str] | None = None) -> int:
    """`mmfeed index --ray`: each source's index built on Ray; the exit status."""
    parser = argparse.ArgumentParser(prog="mmfeed index --ray", description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--parts", type=int, default=None, help="about how many parts (default: 4 a cluster CPU)")
    parser.add_argument("--task-cpus", type=float, default=1.0, help="CPUs Ray reserves for each part's task")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out")
    where.add_argument("--cache-dir")
    parser.add_argument("--media-root")
    parser.add_argument("--no-media", action="store_true")
    parser.add_argument("--tokenizer")
    parser.add_argument("--model", default="qwen2-vl")
    parser.add_argument("--chat-template")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("sources", nargs="+", metavar="SOURCE")
    args = parser.parse_args(argv)
    if args.out and len(args.sources) > 1:
        parser.error("--out names one index: give one SOURCE")
    import ray

    import mmfeed.ray
    from mmfeed import _mmfeed

    if args.address == "local":
        ray.init(num_cpus=_mmfeed.usable_cpus(), include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=args.address, log_to_driver=False)
    status = 0
    try:
        for source in args.sources:
            try:
                summary = mmfeed.ray.build_index(
                    source,
                    out=args.out,
                    cache_dir=args.cache_dir,
                    media_root=args.media_root,
                    probe_media=not args.no_media,
                    tokenizer=args.tokenizer,
                    model=args.model,
                    chat_template=args.chat_template,
                    parts=args.parts,
                    task_options={"num_cpus": args.task_cpus},
                    progress=not args.json and sys.stderr.isatty(),
                )
            except (ValueError, OSError) as e:
                print(f"mmfeed index: {e}", file=sys.stderr)
                status = 1
                continue
            if args.json:
                print(json.dumps(summary))
            else:
                print_summary(summary)
    finally:
        ray.shutdown()
    return status


if __name__ == "__main__":
    sys.exit(main())
