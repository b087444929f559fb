"""Qwen-VL image preprocessing, bit-exact with Hugging Face's Qwen2VLImageProcessorPil.

    proc = mmfeed.ImageProcessor("qwen2-vl", max_pixels=1003520)
    out = proc(["cat.jpg", open("dog.png", "rb").read(), numpy_rgb_array, pil_image])
    out["pixel_values"]   # float32 [sum of rows, 3 * 2 * 14 * 14]
    out["image_grid_thw"] # int64 [n_images, 3]

Inputs follow HF's routes: a path or encoded bytes is decoded as HF's load_image does (EXIF
orientation applied, alpha dropped by convert("RGB")); a PIL image is taken as HF takes it (no
EXIF transpose; anything with alpha or transparency alpha-composited over white); a uint8 array
(H, W), (H, W, 3) or (H, W, 4) is used as is (RGBA per `alpha`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from mmfeed import _mmfeed


class ImageProcessor:
    """Decode, smart_resize, Pillow-exact bicubic resize, rescale, normalize and patchify.

    model: "qwen2-vl", "qwen2.5-vl" or "qwen3-vl" (patch 14/16, merge 2, temporal patch 2,
    mean/std and min/max pixels of the hub configs); every value can be overridden.
    exif: apply EXIF orientation to paths and bytes (HF's load_image does).
    alpha: what paths, bytes and RGBA arrays do with alpha: "drop" (HF's load_image),
    "paste" (qwen-vl-utils: RGBA pasted on white) or "composite" (HF given a PIL image).
    output: "float32" (HF's pixel_values), "bfloat16" (returned as uint16 words) or "uint8"
    (resized pixels per patch, rows of 3*P*P, for normalizing on the GPU).
    kernel: "auto" (the fastest this CPU runs), "portable" (the Highway kernels only) or
    "scalar" (the reference); all give the same bytes.
    threads: images processed in parallel (the GIL is released).
    fast: opt-in approximate mode - a JPEG is decoded at 1/2, 1/4 or 1/8 size in the DCT domain
    when the resize still shrinks it at least 1.5x after that (same grid, different pixel values;
    bench/vision.py reports the error).
    """

    def __init__(self, model: str = "qwen2-vl", min_pixels: int | None = None, max_pixels: int | None = None, *,
                 patch_size: int | None = None, merge_size: int | None = None,
                 image_mean: list[float] | None = None, image_std: list[float] | None = None,
                 exif: bool = True, alpha: str = "drop", output: str = "float32", kernel: str = "auto",
                 threads: int = 1, fast: bool = False):
        self.alpha = alpha
        self._core = _mmfeed._ImageProcessor(model, min_pixels, max_pixels, patch_size, merge_size, image_mean,
                                             image_std, exif, alpha, output, kernel, threads, fast)

    def __call__(self, images) -> dict:
        if not isinstance(images, (list, tuple)):
            images = [images]
        items, alphas = [], []
        for img in images:
            alpha = self.alpha
            if isinstance(img, (bytes, bytearray, memoryview)):
                item = bytes(img)
            elif isinstance(img, (str, os.PathLike)):
                item = Path(img).read_bytes()
            elif isinstance(img, np.ndarray):
                if img.dtype != np.uint8:
                    raise TypeError(f"pixel arrays must be uint8, not {img.dtype}")
                item = np.ascontiguousarray(img)
            elif _is_pil(img):
                has_alpha = "A" in img.getbands() or img.info.get("transparency") is not None
                item = np.asarray(img.convert("RGBA" if has_alpha else "RGB"))
                alpha = "composite"
            else:
                raise TypeError(f"unsupported image type {type(img).__name__}")
            items.append(item)
            alphas.append(alpha)
        pixel_values, grids = self._core.process(items, alphas)
        return {"pixel_values": pixel_values, "image_grid_thw": grids}

    def plan(self, height: int, width: int) -> tuple[int, int, int]:
        """The (t, h, w) grid an image of this upright size gets."""
        return self._core.plan(height, width)


def _is_pil(obj) -> bool:
    try:
        from PIL import Image
    except ImportError:
        return False
    return isinstance(obj, Image.Image)
