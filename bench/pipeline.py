"""bench/pipeline: the talk's experiment on this machine. The demo data set is loaded into
batches of 8 by:

  - mmfeed, concurrent mode (fetches in flight, a CPU pool, batches prefetched);
  - mmfeed, serial mode (the same work one sample after another: the talk's baseline);
  - a PyTorch DataLoader with 2 worker processes running the Hugging Face processor (PIL
    backend) and tokenizer per sample (what training scripts run today);

first from local files, then from nginx on loopback adding a log-normal first-byte delay with
a 50 ms median per image (the object-store case). Reported: samples/s, CPU-seconds per sample
(all processes), and the share of time a simulated trainer (a fixed sleep per batch) waits for
data.

Usage: python bench/pipeline.py [--samples 64] [--step-ms 200]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def run_mmfeed(manifest: Path, mode: str, step_s: float) -> dict:
    start_cpu, start = cpu_seconds(), time.perf_counter()
    waited, samples = 0.0, 0
    with mmfeed.Loader(manifest, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, batch_size=BATCH, mode=mode,
                       workers=2, shuffle=False) as loader:
        while True:
            t = time.perf_counter()
            batch = next(loader, None)
            waited += time.perf_counter() - t
            if batch is None:
                break
            samples += len(batch["sample_ids"])
            time.sleep(step_s)  # the trainer's step
        assert not loader.errors(), loader.errors()[:2]
    total = time.perf_counter() - start
    return {"samples": samples, "seconds": total, "cpu": cpu_seconds() - start_cpu, "wait_share": waited / total}


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


def run_torch(manifest: Path, step_s: float) -> dict:
    from torch.utils.data import DataLoader

    start_cpu, start = cpu_seconds(), time.perf_counter()
    loader = DataLoader(HFDataset(manifest), batch_size=BATCH, num_workers=2, collate_fn=collate)
    waited, samples = 0.0, 0
    it = iter(loader)
    while True:
        t = time.perf_counter()
        batch = next(it, None)
        waited += time.perf_counter() - t
        if batch is None:
            break
        samples += len(batch["input_ids"])
        time.sleep(step_s)
    total = time.perf_counter() - start
    del it, loader  # join the worker processes now, so their CPU is counted here and not later
    import gc

    gc.collect()
    return {"samples": samples, "seconds": total, "cpu": cpu_seconds() - start_cpu, "wait_share": waited / total}


def remote_manifest(manifest: Path, url_base: str, out: Path) -> Path:
    lines = []
    for line in manifest.read_text().splitlines():
        s = json.loads(line)
        for m in s["messages"]:
            for c in m["content"] if isinstance(m["content"], list) else []:
                if c["type"] == "image":
                    c["image"] = f"{url_base}/{c['image']}"
        lines.append(json.dumps(s, ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--step-ms", type=float, default=200.0, help="simulated trainer step per batch")
    args = parser.parse_args()
    step = args.step_ms / 1000
    from servers import Nginx

    with tempfile.TemporaryDirectory(prefix="mmfeed-bench-pipeline-") as tmp:
        data = Path(tmp) / "data"
        summary = datagen.generate(data, samples=args.samples, seed=0, workers=os.cpu_count())
        manifest = data / "manifest.jsonl"
        server = Nginx(data, Path(tmp) / "nginx").start()
        try:
            remote = remote_manifest(manifest, f"http://127.0.0.1:{server.port}/slow", Path(tmp) / "remote.jsonl")
            rows = []
            for label, path in (("local files", manifest), ("HTTP, 50 ms first byte", remote)):
                rows.append((label, "mmfeed concurrent", run_mmfeed(path, "concurrent", step)))
                rows.append((label, "mmfeed serial", run_mmfeed(path, "serial", step)))
                rows.append((label, "torch DataLoader (2 workers) + HF", run_torch(path, step)))
        finally:
            server.stop()
    print(f"bench/pipeline: {summary['samples']} samples ({summary['images']} images, "
          f"{summary['bytes'] / 1e6:.0f} MB), batches of {BATCH}, max_pixels {MAX_PIXELS}, "
          f"trainer step {args.step_ms:.0f} ms, {os.cpu_count()} cores\n")
    header = f"{'source':<24}{'loader':<36}{'samples/s':>10}{'CPU s/sample':>14}{'data wait':>11}"
    print(header)
    print("-" * len(header))
    for source, label, r in rows:
        print(f"{source:<24}{label:<36}{r['samples'] / r['seconds']:>10.1f}{r['cpu'] / r['samples']:>14.3f}"
              f"{100 * r['wait_share']:>10.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
