"""bench/pipeline: the talk's experiment on this machine. The demo data set is loaded into
batches of 8 by each system, side by side in one invocation:

  - naive: a Python loop, one sample at a time: read or GET, the Hugging Face Qwen2-VL
    processor (PIL backend), apply_chat_template + tokenizer (the talk's baseline);
  - torch-dataloader: a PyTorch DataLoader with 2 worker processes running the same code;
  - mmfeed-serial: mmfeed doing the same work one sample after another on one thread;
  - mmfeed: concurrent mode (fetches in flight, a CPU pool, batches prefetched);

first from local files, then from nginx on loopback adding a log-normal first-byte delay with
a 50 ms median per image (the object-store case). A trainer stand-in sleeps a fixed step per
batch. Each system runs in its own process, so its CPU time and peak RSS are its own.
Reported per system: GPU utilisation (step time / wall: what a GPU would be busy), the
data-wait share, samples/s, CPU-seconds per sample (the process and its workers), peak RSS
(the process plus its largest worker), time to first batch.

Usage: python bench/pipeline.py [--samples 64] [--step-ms 200] [--json PATH] [--trace PATH]
                                [--systems naive,torch-dataloader,mmfeed-serial,mmfeed]
                                [--sources local,http]
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
sys.path.insert(0, str(ROOT / "tests" / "python"))

import mmfeed  # noqa: E402
from mmfeed import datagen  # noqa: E402

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
TEMPLATE = ROOT / "tests" / "data" / "chat-templates" / "qwen2_vl.jinja"
MAX_PIXELS = 1003520
BATCH = 8


def cpu_seconds() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def train(batches, step_s: float) -> dict:
    """The trainer stand-in: takes batches, sleeps step_s for each, times its waits."""
    start_cpu, start = cpu_seconds(), time.perf_counter()
    waited, computed, samples, first = 0.0, 0.0, 0, None
    it = iter(batches)
    while True:
        t = time.perf_counter()
        batch = next(it, None)
        waited += time.perf_counter() - t
        if batch is None:
            break
        if first is None:
            first = time.perf_counter() - start
        samples += len(batch["input_ids"])
        t = time.perf_counter()
        time.sleep(step_s)
        computed += time.perf_counter() - t
    total = time.perf_counter() - start
    del it
    import gc

    gc.collect()  # join worker processes now, so their CPU is counted here
    return {"samples": samples, "seconds": total, "cpu": cpu_seconds() - start_cpu, "waited": waited,
            "computed": computed, "first_batch": first or total}


def mmfeed_batches(manifest: Path, mode: str, trace: str = ""):
    with mmfeed.Loader(manifest, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, batch_size=BATCH, mode=mode,
                       workers=2, shuffle=False, trace_path=trace) as loader:
        yield from loader
        assert not loader.errors(), loader.errors()[:2]


class HFDataset:
    """One sample at a time: HF load_image route, HF processor, HF tokenizer + chat template."""

    def __init__(self, manifest: Path):
        self.base = manifest.parent
        self.samples = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        import io
        import urllib.request

        import numpy as np
        from PIL import Image, ImageOps
        from transformers import PreTrainedTokenizerFast
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        if not hasattr(self, "proc"):
            self.proc = Qwen2VLImageProcessorPil(size={"shortest_edge": 3136, "longest_edge": MAX_PIXELS})
            self.tok = PreTrainedTokenizerFast(tokenizer_file=str(TOKENIZER), chat_template=TEMPLATE.read_text())
        sample = self.samples[i]
        images = []
        for m in sample["messages"]:
            for c in m["content"] if isinstance(m["content"], list) else []:
                if c["type"] == "image":
                    uri = c["image"]
                    data = (urllib.request.urlopen(uri).read() if uri.startswith("http")
                            else (self.base / uri).read_bytes())
                    images.append(ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB"))
        vision = self.proc(images=images, return_tensors="np")
        ids = self.tok.apply_chat_template(sample["messages"], tokenize=True)
        if not isinstance(ids, list):
            ids = ids["input_ids"]
        expanded = []
        grids = iter(vision["image_grid_thw"])
        for t in ids:
            if t == 151655:
                g = next(grids)
                expanded += [t] * int(g.prod() // 4)
            else:
                expanded.append(t)
        return {"input_ids": np.asarray(expanded), "pixel_values": vision["pixel_values"],
                "image_grid_thw": vision["image_grid_thw"]}


def collate(items):
    import numpy as np
    import torch

    length = max(len(x["input_ids"]) for x in items)
    ids = np.full((len(items), length), 151643, dtype=np.int64)
    for i, x in enumerate(items):
        ids[i, :len(x["input_ids"])] = x["input_ids"]
    return {"input_ids": torch.from_numpy(ids),
            "pixel_values": torch.from_numpy(np.concatenate([x["pixel_values"] for x in items])),
            "image_grid_thw": torch.from_numpy(np.concatenate([x["image_grid_thw"] for x in items]))}


def naive_batches(manifest: Path):
    dataset = HFDataset(manifest)
    for start in range(0, len(dataset), BATCH):
        yield collate([dataset[i] for i in range(start, min(start + BATCH, len(dataset)))])


def torch_batches(manifest: Path):
    from torch.utils.data import DataLoader

    yield from DataLoader(HFDataset(manifest), batch_size=BATCH, num_workers=2, collate_fn=collate)


SYSTEMS = {
    "naive": lambda m, trace: naive_batches(m),
    "torch-dataloader": lambda m, trace: torch_batches(m),
    "mmfeed-serial": lambda m, trace: mmfeed_batches(m, "serial"),
    "mmfeed": lambda m, trace: mmfeed_batches(m, "concurrent", trace),
}


def run_one(system: str, manifest: Path, step_s: float, trace: str = "") -> dict:
    """Runs one system in this process and returns its figures. Every system's process imports
    torch and transformers first, as a training process has: imports are not timed."""
    import torch  # noqa: F401
    from transformers.models.qwen2_vl import image_processing_pil_qwen2_vl  # noqa: F401

    r = train(SYSTEMS[system](manifest, trace), step_s)
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"name": system, "samples": r["samples"], "gpu_utilization": r["computed"] / r["seconds"],
            "data_wait_share": r["waited"] / r["seconds"], "samples_per_s": r["samples"] / r["seconds"],
            "cpu_s_per_sample": r["cpu"] / max(r["samples"], 1),
            "peak_rss_mb": (own.ru_maxrss + workers.ru_maxrss) / 1024, "time_to_first_batch_s": r["first_batch"],
            "seconds": r["seconds"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--step-ms", type=float, default=200.0, help="simulated trainer step per batch")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--sources", default="local,http")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--trace", type=Path, help="write mmfeed's Perfetto timeline for each source here "
                        "(NAME-local.json, NAME-http.json)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one system, print JSON
    parser.add_argument("--manifest", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    step = args.step_ms / 1000
    if args.one:
        print(json.dumps(run_one(args.one, args.manifest, step, str(args.trace or ""))))
        return 0
    systems = args.systems.split(",")
    sources = args.sources.split(",")
    unknown = [s for s in systems if s not in SYSTEMS] + [s for s in sources if s not in ("local", "http")]
    if unknown:
        parser.error(f"unknown systems or sources: {', '.join(unknown)}")
    from servers import Nginx, rewrite_images

    results, traces = [], []
    with tempfile.TemporaryDirectory(prefix="mmfeed-bench-pipeline-") as tmp:
        data = Path(tmp) / "data"
        summary = datagen.generate(data, samples=args.samples, seed=0, workers=os.cpu_count())
        manifest = data / "manifest.jsonl"
        server = Nginx(data, Path(tmp) / "nginx").start()
        try:
            remote = rewrite_images(manifest, lambda ref: server.url("slow", ref), Path(tmp) / "remote.jsonl")
            paths = {"local": manifest, "http": remote}
            for source in sources:
                for system in systems:
                    print(f"  running {system} on {source} ...", file=sys.stderr, flush=True)
                    command = [sys.executable, __file__, "--one", system, "--manifest", paths[source],
                               "--step-ms", str(args.step_ms)]
                    if args.trace and system == "mmfeed":
                        trace = args.trace.with_name(f"{args.trace.stem}-{source}{args.trace.suffix or '.json'}")
                        command += ["--trace", trace]
                        traces.append(trace)
                    out = subprocess.run(command, check=True, capture_output=True, text=True)
                    results.append({"source": source, **json.loads(out.stdout.splitlines()[-1])})
        finally:
            server.stop()
    config = {"samples": summary["samples"], "images": summary["images"], "bytes": summary["bytes"],
              "batch_size": BATCH, "max_pixels": MAX_PIXELS, "step_ms": args.step_ms, "cores": os.cpu_count(),
              "http_first_byte_median_ms": 50}
    print(f"bench/pipeline: {summary['samples']} samples ({summary['images']} images, "
          f"{summary['bytes'] / 1e6:.0f} MB), batches of {BATCH}, max_pixels {MAX_PIXELS}, "
          f"trainer step {args.step_ms:.0f} ms, {os.cpu_count()} cores\n")
    header = (f"{'source':<8}{'system':<18}{'GPU util':>9}{'data wait':>10}{'samples/s':>10}{'CPU s/sample':>13}"
              f"{'peak RSS MB':>12}{'1st batch s':>12}")
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['source']:<8}{r['name']:<18}{100 * r['gpu_utilization']:>8.0f}%{100 * r['data_wait_share']:>9.0f}%"
              f"{r['samples_per_s']:>10.1f}{r['cpu_s_per_sample']:>13.3f}{r['peak_rss_mb']:>12.0f}"
              f"{r['time_to_first_batch_s']:>12.2f}")
    for source in sources:
        by = {r["name"]: r for r in results if r["source"] == source}
        peers = [by[n]["samples_per_s"] for n in ("naive", "torch-dataloader") if n in by]
        if "mmfeed" in by and peers:
            print(f"{source}: mmfeed {by['mmfeed']['samples_per_s'] / max(peers):.1f}x the best Python peer's samples/s")
    for trace in traces:
        print(f"mmfeed's timeline: {trace} (open in ui.perfetto.dev)")
    if args.json:
        args.json.write_text(json.dumps({"config": config, "systems": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
