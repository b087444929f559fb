"""Times the Hugging Face Qwen2-VL processor's torchvision backend (`Qwen2VLImageProcessor` in
transformers 5) for bench/vision.py, in its own environment: PyPI's torchvision needs its own
torch build (torch 2.14.1 + torchvision 0.29.1, `make bench-torchvision` sets up .venv-tv), which
cannot share a process with the CPU torch the project's tests use.

Usage (bench/vision.py runs it): python bench/vision_torchvision.py DIR REPEAT
DIR holds NAME.jpg files and jobs.json ([[name, max_pixels], ...]); for each job the script
writes NAME-MAX_PIXELS.npy (pixel_values) and prints one JSON object: {"NAME-MAX_PIXELS": ms}.
One thread, best of REPEAT, the same route as the PIL column (Pillow open + EXIF transpose +
convert to RGB, then the processor).
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image, ImageOps  # noqa: E402
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor  # noqa: E402


def main() -> int:
    folder, repeat = Path(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(1)
    jobs = json.loads((folder / "jobs.json").read_text())
    times = {}
    for name, max_pixels in jobs:
        data = (folder / f"{name}.jpg").read_bytes()
        proc = Qwen2VLImageProcessor(size={"shortest_edge": 3136, "longest_edge": max_pixels})

        def run():
            img = ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")
            return proc(images=[img], return_tensors="np")

        out = run()
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - t)
        key = f"{name}-{max_pixels}"
        np.save(folder / f"{key}.npy", out["pixel_values"])
        np.save(folder / f"{key}-grid.npy", out["image_grid_thw"])
        times[key] = best * 1e3
    print(json.dumps({"torch": torch.__version__, "times": times}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
