"""transformers' torchvision Qwen2VLImageProcessor (the default AutoImageProcessor picks wherever
torchvision is installed), run in the torchvision environment (.venv-tv: PyPI's torchvision
needs its own torch build; scripts/setup.sh makes it) for test_torchvision_backend.py.

Usage: python torchvision_oracle.py JOBS.json OUT_DIR

Each job names image files and the processor's settings (patch_size, image_mean/std or null for
CLIP's, min_pixels, max_pixels). The files are opened as transformers' load_image opens them
(Pillow, EXIF orientation applied, convert("RGB")) and processed in one call. Writes
OUT_DIR/<i>.npz per job (pixel_values, image_grid_thw), or OUT_DIR/<i>.err with the error.
"""

import json
import sys
import traceback
from pathlib import Path

import numpy as np
from transformers.image_utils import load_image
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor


def main(jobs_path: str, out_dir: str) -> None:
    out = Path(out_dir)
    for i, job in enumerate(json.loads(Path(jobs_path).read_text())):
        kwargs = {
            "patch_size": job["patch_size"],
            "size": {"shortest_edge": job["min_pixels"], "longest_edge": job["max_pixels"]},
        }
        if job["image_mean"] is not None:
            kwargs.update(image_mean=job["image_mean"], image_std=job["image_std"])
        try:
            processor = Qwen2VLImageProcessor(**kwargs)
            images = [load_image(path) for path in job["paths"]]
            got = processor(images=images, return_tensors="np")
            np.savez(out / f"{i}.npz", pixel_values=got["pixel_values"], image_grid_thw=got["image_grid_thw"])
        except Exception:  # noqa: BLE001 - the test reads the reference's error
            (out / f"{i}.err").write_text(traceback.format_exc())


if __name__ == "__main__":
    main(*sys.argv[1:])
