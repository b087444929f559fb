"""bench/vision: single-thread milliseconds per image for Qwen2-VL preprocessing, same images,
same run: mmfeed (exact with the PIL backend), mmfeed's opt-in fast mode (DCT-domain JPEG
reduction, with its error against the exact output), the Hugging Face processor's PIL backend
(load_image route: Pillow open + EXIF transpose + convert, then Qwen2VLImageProcessorPil), its
torchvision backend (Qwen2VLImageProcessor, transformers' default wherever torchvision is
installed; timed in its own environment by bench/vision_torchvision.py), mmfeed's
image_backend="torchvision" beside it (with its largest difference from that backend's output:
0 when exact), and decoding alone (mmfeed's direct TurboJPEG
call, and Pillow's) as the physical reference. "ceiling" is the HF PIL time over mmfeed's
decode-alone time: the speedup an exact processor would reach if resizing and patchifying cost
nothing, since it must decode the same JPEG with the same libjpeg-turbo arithmetic.

Images: real photographs (the gnome-backgrounds wallpapers and scikit-image photos) cropped and
resized to 0.3-12 megapixels, JPEG quality 90, 4:2:0. max_pixels at the SFT budget
(1,003,520) and at the hub default (12,845,056).

Usage: python bench/vision.py [--repeat 5] [--torchvision-python .venv-tv/bin/python | none]
(the torchvision column needs `make bench-torchvision`'s environment; without it, it is skipped)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

import datagen  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image, ImageOps  # noqa: E402

import mmfeed  # noqa: E402

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


ROOT = Path(__file__).resolve().parent.parent
MAX_PIXELS = (1003520, 12845056)


def torchvision_times(python: str, images, repeat: int, folder: Path) -> dict | None:
    """Runs bench/vision_torchvision.py in the torchvision environment; None when it is absent."""
    if python == "none" or not Path(python).exists():
        print(f"torchvision backend: skipped ({python} not found; `make bench-torchvision` sets it up)\n")
        return None
    jobs = []
    for mp, data in images:
        (folder / f"{mp:.1f}.jpg").write_bytes(data)
        jobs += [[f"{mp:.1f}", m] for m in MAX_PIXELS]
    (folder / "jobs.json").write_text(json.dumps(jobs))
    out = subprocess.run(
        [python, str(ROOT / "bench" / "vision_torchvision.py"), str(folder), str(repeat)],
        check=True,
        capture_output=True,
        text=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"torchvision backend: torch {report['torch']}, one thread\n")
    return report["times"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--torchvision-python", default=str(ROOT / ".venv-tv" / "bin" / "python"))
    args = parser.parse_args()
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    images = make_images()
    print(
        f"bench/vision: Qwen2-VL preprocessing, one thread, best of {args.repeat}; SIMD target "
        f"{mmfeed.simd_target()}; ms per image\n"
    )
    tv_dir = tempfile.TemporaryDirectory()
    tv = torchvision_times(args.torchvision_python, images, args.repeat, Path(tv_dir.name))
    header = (
        f"{'MP':>5} {'max_pixels':>11} {'HF PIL':>8} {'mmfeed':>7} {'vs PIL':>7} {'HF tv':>7} {'mm tv':>6} "
        f"{'vs tv':>6} {'tv |d|':>6} {'decode':>7} {'Pillow dec':>10} {'/ decode':>9} {'ceiling':>8} "
        f"{'fast':>6} {'fast max|d|':>11} {'fast PSNR':>9} {'PIL-tv |d|':>10}"
    )
    print(header)
    print("-" * len(header))
    speedups, over_tv, over_decode = [], [], []
    for max_pixels in MAX_PIXELS:
        hf = Qwen2VLImageProcessorPil(size={"shortest_edge": 3136, "longest_edge": max_pixels})
        ours = mmfeed.ImageProcessor("qwen2-vl", max_pixels=max_pixels)
        ours_tv = mmfeed.ImageProcessor("qwen2-vl", max_pixels=max_pixels, backend="torchvision")
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
            t_ours_tv = best_ms(lambda: ours_tv([data]), args.repeat)
            max_d = float(np.abs(fast([data])["pixel_values"] - got["pixel_values"]).max())
            a = exact_u8([data])["pixel_values"].astype(np.float64)
            b = fast_u8([data])["pixel_values"].astype(np.float64)
            mse = float(((a - b) ** 2).mean())
            psnr = "exact" if mse == 0 else f"{10 * np.log10(255**2 / mse):.1f}"
            speedups.append(t_hf / t_ours)
            over_decode.append(t_ours / t_dec)
            t_tv = vs_tv = tv_d = pil_tv_d = "-"
            if tv is not None:
                key = f"{mp:.1f}-{max_pixels}"
                ms_tv = tv[key]
                over_tv.append(ms_tv / t_ours_tv)
                t_tv, vs_tv = f"{ms_tv:.1f}", f"{ms_tv / t_ours_tv:.1f}x"
                tv_grid = np.load(Path(tv_dir.name) / f"{key}-grid.npy")
                tv_pixels = np.load(Path(tv_dir.name) / f"{key}.npy")
                got_tv = ours_tv([data])
                if np.array_equal(tv_grid, got["image_grid_thw"]):
                    pil_tv_d = f"{float(np.abs(tv_pixels - got['pixel_values']).max()):.3f}"
                    tv_d = f"{float(np.abs(tv_pixels - got_tv['pixel_values']).max()):.3g}"
                else:
                    pil_tv_d = tv_d = "grid"
            print(
                f"{mp:>5.1f} {max_pixels:>11} {t_hf:>8.1f} {t_ours:>7.1f} {t_hf / t_ours:>6.1f}x {t_tv:>7} "
                f"{t_ours_tv:>6.1f} {vs_tv:>6} {tv_d:>6} {t_dec:>7.1f} {t_pil:>10.1f} {t_ours / t_dec:>8.2f}x "
                f"{t_hf / t_dec:>7.1f}x {t_fast:>6.1f} {max_d:>11.3f} {psnr:>9} {pil_tv_d:>10}"
            )
    print(
        f"\nspeedup over the HF PIL backend: median {statistics.median(speedups):.1f}x "
        f"(min {min(speedups):.1f}x); mmfeed time over decode-alone: median "
        f"{statistics.median(over_decode):.2f}x (max {max(over_decode):.2f}x)"
    )
    if over_tv:
        print(
            f"mmfeed's torchvision backend over HF's: median {statistics.median(over_tv):.1f}x "
            f"(min {min(over_tv):.1f}x); 'tv |d|' is the largest difference between their pixel_values, "
            f"'PIL-tv |d|' that between HF's two backends (what image_backend chooses between)"
        )
    print("outputs checked equal to HF PIL (grid identical, max abs diff <= 1e-6) for every row above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
