"""Qwen-VL image preprocessing, bit-exact with Hugging Face's Qwen2VLImageProcessorPil
(backend="pil") or its torchvision Qwen2VLImageProcessor (backend="torchvision").

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

import functools
import os
from pathlib import Path
from typing import Literal

import numpy as np

from mmfeed import _mmfeed, _native


class ImageProcessor:
    """Decode, smart_resize, bicubic resize, rescale, normalize and patchify.

    model: "qwen2-vl", "qwen2.5-vl", "qwen3-vl", "qwen3.5", "qwen2.5-omni" or "qwen3-omni" (patch
    14/16, merge 2, temporal patch 2, mean/std and min/max pixels of the hub configs); every value
    can be overridden.
    backend: which of transformers' processors the output equals, bit for bit: "pil"
    (Qwen2VLImageProcessorPil: Pillow's bicubic, rescale then normalize) or "torchvision"
    (Qwen2VLImageProcessor, what AutoImageProcessor picks wherever torchvision is installed:
    torch's antialiased bicubic on uint8, rescale fused into normalize).
    exif: apply EXIF orientation to paths and bytes (HF's load_image does).
    alpha: what paths, bytes and RGBA arrays do with alpha: "drop" (HF's load_image),
    "paste" (qwen-vl-utils: RGBA pasted on white) or "white" (composited on white: HF given a PIL image).
    output: "float32" (HF's pixel_values), "bfloat16" (returned as uint16 words) or "uint8"
    (resized pixels per patch, rows of 3*P*P, for normalizing on the GPU).
    kernel: "auto" (the fastest this CPU runs), "portable" (the Highway kernels only) or
    "scalar" (the reference); all give the same bytes.
    threads: images processed in parallel (the GIL is released).
    fast: opt-in approximate mode - a JPEG is decoded at 1/2, 1/4 or 1/8 size in the DCT domain
    when the resize still shrinks it at least 1.5x after that (same grid, different pixel values;
    bench/vision.py reports the error).
    """

    def __init__(
        self,
        model: str = "qwen2-vl",
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        *,
        backend: Literal["pil", "torchvision"] = "pil",
        patch_size: int | None = None,
        merge_size: int | None = None,
        image_mean: list[float] | None = None,
        image_std: list[float] | None = None,
        exif: bool = True,
        alpha: str = "drop",
        output: str = "float32",
        kernel: str = "auto",
        threads: int = 1,
        fast: bool = False,
    ):
        self.alpha = alpha
        self._core = _mmfeed._ImageProcessor(
            model,
            backend,
            min_pixels,
            max_pixels,
            patch_size,
            merge_size,
            image_mean,
            image_std,
            exif,
            alpha,
            output,
            kernel,
            threads,
            fast,
        )
        _native.hold(self)

    def _release_native(self) -> None:
        self._core = None  # type: ignore[assignment]  # at interpreter exit (mmfeed._native), not used after

    def __call__(self, images) -> dict:
        if not isinstance(images, (list, tuple)):
            images = [images]
        items, alphas = [], []
        for img in images:
            alpha = self.alpha
            item: bytes | np.ndarray
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
                alpha = "white"
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


@functools.cache
def _table(model: str, video: bool, backend: str) -> tuple[np.ndarray, np.ndarray, int, int]:
    return _mmfeed.normalize_table(model, video, backend)


_device_tables: dict = {}  # (model, video, backend, dtype, device) -> the flat table there


def _expand(rows, model: str, video: bool, dtype: str, backend: str = "pil"):
    """Rows of uint8 (images: 3*P*P, videos: 3*T*P*P) -> the normalized rows of 3*T*P*P."""
    if str(rows.dtype) not in ("uint8", "torch.uint8"):
        raise TypeError(f"normalize_pixels takes uint8 rows (a batch of pixels='uint8'), not {rows.dtype}")
    floats, words, temporal, patch = _table(model, video, "torchvision" if video else backend)
    table = words if dtype == "bfloat16" else floats
    n, width = rows.shape
    per_channel = width // 3
    expected = 3 * (temporal if video else 1) * patch * patch
    if width != expected:
        name = "pixel_values_videos" if video else "pixel_values"
        raise ValueError(
            f"{name} has rows of {width} bytes, not the {expected} of {model}'s uint8 rows: is the batch "
            f"from a loader of pixels='uint8' with model={model!r}?"
        )
    if isinstance(rows, np.ndarray):
        out = table[np.arange(3)[None, :, None], rows.reshape(n, 3, per_channel)]
        if not video:
            out = np.broadcast_to(out[:, :, None, :], (n, 3, temporal, per_channel))
        return np.ascontiguousarray(out).reshape(n, 3 * (1 if video else temporal) * per_channel)
    import torch

    key = (model, video, backend, dtype, rows.device)
    flat = _device_tables.get(key)
    if flat is None:
        words = table.reshape(-1)  # bfloat16: the engine's words, as torch's bfloat16
        if dtype == "bfloat16":
            flat = torch.from_numpy(words.view(np.int16)).view(torch.bfloat16)
        else:
            flat = torch.from_numpy(words)
        flat = _device_tables[key] = flat.to(rows.device)
    index = rows.reshape(n, 3, per_channel).int()  # (int32: half the memory of int64 indices)
    index += torch.arange(0, 3 * 256, 256, dtype=torch.int32, device=rows.device).view(1, 3, 1)
    values = flat[index]
    if not video:
        values = values.unsqueeze(2).expand(n, 3, temporal, per_channel)
    return values.reshape(n, 3 * (1 if video else temporal) * per_channel)


def _dtype_name(dtype) -> str:
    name = getattr(dtype, "__name__", None) or str(dtype).removeprefix("torch.")
    if name not in ("float32", "bfloat16"):
        raise ValueError(f"dtype must be float32 or bfloat16 (a name, a torch or numpy dtype), not {dtype!r}")
    return name


def normalize_pixels(
    batch: dict, model: str = "qwen2-vl", dtype="float32", image_backend: Literal["pil", "torchvision"] = "pil"
) -> dict:
    """A batch of `pixels="uint8"` with its pixel rows normalized where they are.

        loader = mmfeed.Loader("train.jsonl", tokenizer="tokenizer.json", pixels="uint8", device="cuda")
        for batch in loader:
            batch = mmfeed.normalize_pixels(batch, model="qwen2-vl")   # on the GPU

    pixel_values (rows of 3*P*P bytes) become HF's rows of 3*T*P*P (each image repeated over the
    temporal patch), and pixel_values_videos' bytes their values: bit for bit the rows of
    pixels="float32" (dtype "float32") or pixels="bfloat16" (dtype "bfloat16" or torch.bfloat16;
    numpy arrays get the bfloat16 words as uint16). `model` and `image_backend` must be the
    loader's. Takes torch tensors
    (on any device) or numpy arrays; returns a new dict, the other entries shared.
    """
    dtype = _dtype_name(dtype)
    out = dict(batch)
    if "pixel_values" in batch:
        out["pixel_values"] = _expand(batch["pixel_values"], model, False, dtype, image_backend)
    if "pixel_values_videos" in batch:
        out["pixel_values_videos"] = _expand(batch["pixel_values_videos"], model, True, dtype)
    return out
