"""`mmfeed run --ray ADDRESS`: the CLI's run over mmfeed.ray.Loader, its summary as `mmfeed run`'s.

The CLI parses and checks the loader options (flags, --config) itself and hands them here as
JSON, with the Ray settings:

    python -m mmfeed.ray_run --address ADDRESS [--actors N] [--actor-cpus C] [--store-bytes B]
                             [--step-ms MS] [--json]
                             --options '{"manifests": [...], "tokenizer": ..., ...}'

ADDRESS is a cluster's (HOST:PORT, or "auto" for the one this machine belongs to), or "local" for
a Ray instance started here with the usable cores. The summary adds each actor's throughput.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from mmfeed.batch import sample_tokens


def summarize(loader, step_ms: float, live: bool) -> dict:
    """Iterates `loader` (simulating a trainer step of step_ms) and counts what it delivered."""
    counts = dict(batches=0, samples=0, tokens=0, images=0, videos=0, video_frames=0)
    waited, start = 0.0, time.perf_counter()
    it = iter(loader)
    while True:
        t = time.perf_counter()
        batch = next(it, None)
        waited += time.perf_counter() - t
        if batch is None:
            break
        counts["batches"] += 1
        counts["samples"] += len(batch["sample_ids"])
        counts["tokens"] += sample_tokens(batch)
        counts["images"] += len(batch.get("image_grid_thw", ()))
        if "video_grid_thw" in batch:  # frames: temporal groups x temporal_patch_size (2)
            grids = np.asarray(batch["video_grid_thw"])
            counts["videos"] += len(grids)
            counts["video_frames"] += int(2 * grids[:, 0].sum())
        if live:
            elapsed = time.perf_counter() - start
            sys.stderr.write(
                f"\r  epoch {batch['epoch']}  batches {counts['batches']}  samples {counts['samples']}  "
                f"{counts['samples'] / elapsed:.1f} samples/s  waiting {100 * waited / elapsed:.0f}%   "
            )
        if step_ms > 0:
            time.sleep(step_ms / 1000)
    if live:
        sys.stderr.write("\n")
    seconds = time.perf_counter() - start
    return {
        **counts,
        "seconds": round(seconds, 3),
        "samples_per_s": round(counts["samples"] / seconds, 2),
        "wait_share": round(waited / seconds, 4),
    }


def main(argv: list[str] | None = None) -> int:
    """`mmfeed run --ray`: the run on Ray actors with the CLI's options; its exit status."""
    parser = argparse.ArgumentParser(prog="mmfeed run --ray", description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--actors", type=int, default=1)
    parser.add_argument("--actor-cpus", type=float, default=1.0)
    parser.add_argument("--store-bytes", type=int, default=0, help="mmfeed.ray.Loader's store_bytes (0: none)")
    parser.add_argument("--step-ms", type=float, default=0.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--options", required=True, help="the loader options, a JSON object")
    args = parser.parse_args(argv)
    import ray

    import mmfeed.ray
    from mmfeed import _mmfeed

    options = json.loads(args.options)
    if args.address == "local":
        ray.init(num_cpus=_mmfeed.usable_cpus(), include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=args.address, log_to_driver=False)
    try:
        try:
            loader = mmfeed.ray.Loader(
                num_actors=args.actors,
                actor_options={"num_cpus": args.actor_cpus},
                store_bytes=args.store_bytes or None,
                tensors="np",
                **options,
            )
        except (ValueError, TypeError) as e:
            print(f"mmfeed run: {e}", file=sys.stderr)
            return 2
        with loader:
            try:
                summary = summarize(loader, args.step_ms, live=not args.json and sys.stderr.isatty())
            except ValueError as e:  # the engine's error, or the error budget: as mmfeed run says it
                print(f"\nmmfeed run: {e}", file=sys.stderr)
                return 1
            errors, metrics = loader.errors(), loader.metrics()
    finally:
        ray.shutdown()
    summary.update(
        skipped=len(errors),
        errors=[{k: e[k] for k in ("sample_id", "stage", "reason")} for e in errors],
        metrics=metrics,
    )
    if args.json:
        print(json.dumps(summary))
        return 0
    media = f"{summary['images']} images"
    if summary["videos"]:
        media += f", {summary['videos']} videos of {summary['video_frames']} frames"
    print(
        f"loaded {summary['samples']} samples in {summary['batches']} batches ({summary['tokens']} tokens, {media}) "
        f"in {summary['seconds']:.2f} s: {summary['samples_per_s']:.1f} samples/s"
    )
    step = " (with the simulated trainer step)" if args.step_ms > 0 else " (no trainer step: it only waits)"
    print(f"the consumer waited {100 * summary['wait_share']:.0f}% of the run{step}")
    print(f"on Ray ({args.address}): {metrics['actors_started']} actors started, {metrics['actors_died']} died")
    for a in metrics["actors"]:
        print(f"  actor {a['actor']}: {a['parts']} parts, {a['samples']} samples, {a['samples_per_s']} samples/s")
    if "hint" in metrics:
        print(f"hint: {metrics['hint']}")
    print(f"skipped {len(errors)} samples")
    for err in errors[:10]:
        print(f"  {err['sample_id']} [{err['stage']}] {err['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
