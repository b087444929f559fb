"""bench/vision: single-thread milliseconds per image for Qwen2-VL preprocessing, same images,
same run: mmfeed (exact), mmfeed's opt-in fast mode (DCT-domain JPEG reduction, with its error
against the exact output), the Hugging Face processor's PIL backend (load_image route: Pillow
open + EXIF transpose + convert, then Qwen2VLImageProcessorPil), and decoding alone (mmfeed's
direct TurboJPEG call, and Pillow's) as the physical reference.

Images: real photographs (the gnome-backgrounds wallpapers and scikit-image photos) cropped and
resized to 0.3-12 megapixels, JPEG quality 90, 4:2:0. max_pixels at the SFT budget
(1,003,520) and at the hub default (12,845,056).

Usage: python bench/vision.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from PIL import Image, ImageOps  # noqa: E402

import mmfeed  # noqa: E402
from mmfeed import datagen  # noqa: E402

MEGAPIXELS = [0.3, 1.0, 3.0, 6.0, 12.0]


def make_images() -> list[tuple[float, bytes]]:
    sources = [p for p in datagen.source_photos() if p.suffix == ".webp"] or datagen.source_photos()
    out = []
    for i, mp in enumerate(MEGAPIXELS):
        with Image.open(sources[i % len(sources)]) as im:
            src = im.convert("RGB")
        w = int((mp * 1e6 * 4 / 3) ** 0.5)
        h = int(mp * 1e6 / w)
        img = src.resize((w, h), Image.Resampling.LANCZOS)
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=90, subsampling="4:2:0")
        out.append((w * h / 1e6, buf.getvalue()))
    return out


def best_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    images = make_images()
    print(f"bench/vision: Qwen2-VL preprocessing, one thread, best of {args.repeat}; SIMD target "
          f"{mmfeed.simd_target()}; ms per image\n")
    header = (f"{'MP':>5} {'max_pixels':>11} {'HF PIL':>9} {'mmfeed':>8} {'speedup':>8} "
              f"{'decode (mmfeed)':>16} {'decode (Pillow)':>16} {'mmfeed / decode':>16} "
              f"{'fast':>6} {'fast max|d|':>12} {'fast PSNR dB':>13}")
    print(header)
    print("-" * len(header))
    speedups, over_decode = [], []
    for max_pixels in (1003520, 12845056):
        hf = Qwen2VLImageProcessorPil(size={"shortest_edge": 3136, "longest_edge": max_pixels})
        ours = mmfeed.ImageProcessor("qwen2-vl", max_pixels=max_pixels)
        fast = mmfeed.ImageProcessor("qwen2-vl", max_pixels=max_pixels, fast=True)
        exact_u8 = mmfeed.ImageProcessor("qwen2-vl", max_pixels=max_pixels, output="uint8")
        fast_u8 = mmfeed.ImageProcessor("qwen2-vl", max_pixels=max_pixels, output="uint8", fast=True)
        for mp, data in images:
            def run_hf():
                img = ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")
                return hf(images=[img], return_tensors="np")

            ref = run_hf()
            got = ours([data])
            assert np.array_equal(ref["image_grid_thw"], got["image_grid_thw"])
            assert np.abs(ref["pixel_values"] - got["pixel_values"]).max() <= 1e-6
            t_hf = best_ms(run_hf, args.repeat)
            t_ours = best_ms(lambda: ours([data]), args.repeat)
            t_dec = best_ms(lambda: mmfeed.decode(data), args.repeat)
            t_pil = best_ms(lambda: Image.open(io.BytesIO(data)).convert("RGB"), args.repeat)
            t_fast = best_ms(lambda: fast([data]), args.repeat)
            max_d = float(np.abs(fast([data])["pixel_values"] - got["pixel_values"]).max())
            a = exact_u8([data])["pixel_values"].astype(np.float64)
            b = fast_u8([data])["pixel_values"].astype(np.float64)
            mse = float(((a - b) ** 2).mean())
            psnr = "exact" if mse == 0 else f"{10 * np.log10(255 ** 2 / mse):.1f}"
            speedups.append(t_hf / t_ours)
            over_decode.append(t_ours / t_dec)
            print(f"{mp:>5.1f} {max_pixels:>11} {t_hf:>9.1f} {t_ours:>8.1f} {t_hf / t_ours:>7.1f}x "
                  f"{t_dec:>16.1f} {t_pil:>16.1f} {t_ours / t_dec:>15.2f}x "
                  f"{t_fast:>6.1f} {max_d:>12.3f} {psnr:>13}")
    print(f"\nspeedup over the HF PIL backend: median {statistics.median(speedups):.1f}x "
          f"(min {min(speedups):.1f}x); mmfeed time over decode-alone: median "
          f"{statistics.median(over_decode):.2f}x (max {max(over_decode):.2f}x)")
    print("outputs checked equal to HF (grid identical, max abs diff <= 1e-6) for every row above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
