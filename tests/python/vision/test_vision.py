"""Vision parity: mmfeed's ImageProcessor against transformers' Qwen2VLImageProcessorPil (the PIL
backend, transformers and Pillow as pinned in requirements.txt).

Tolerance: pixel_values max abs difference <= 1e-6 and identical image_grid_thw; in practice the
values are bit-identical, which the tests assert where they can (exact equality)."""

import io
import json
import random
import re

import datagen
import numpy as np
import pytest
from PIL import Image, ImageOps
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

import mmfeed

PROFILES = {
    # name: (patch, mean/std or None for CLIP's, min_pixels, max_pixels) as the hub configs set them
    "qwen2-vl": (14, None, 3136, 12845056),
    "qwen2.5-vl": (14, None, 3136, 12845056),
    "qwen3-vl": (16, [0.5, 0.5, 0.5], 65536, 16777216),
}
TOLERANCE = 1e-6


def hf_processor(model, min_pixels=None, max_pixels=None):
    patch, mean, lo, hi = PROFILES[model]
    kwargs = {"patch_size": patch, "size": {"shortest_edge": min_pixels or lo, "longest_edge": max_pixels or hi}}
    if mean:
        kwargs.update(image_mean=mean, image_std=mean)
    return Qwen2VLImageProcessorPil(**kwargs)


def hf_from_path_bytes(data: bytes):
    """HF's load_image route: open, EXIF transpose, convert("RGB")."""
    return ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")


def assert_parity(ours, ref):
    assert ours["image_grid_thw"].dtype == np.int64
    np.testing.assert_array_equal(ours["image_grid_thw"], ref["image_grid_thw"])
    assert ours["pixel_values"].dtype == np.float32
    assert ours["pixel_values"].shape == ref["pixel_values"].shape
    diff = np.abs(ours["pixel_values"] - ref["pixel_values"]).max() if ref["pixel_values"].size else 0.0
    assert diff <= TOLERANCE, f"max abs diff {diff}"


def encode(img: Image.Image, fmt: str, **params) -> bytes:
    out = io.BytesIO()
    img.save(out, fmt, **params)
    return out.getvalue()


@pytest.fixture(scope="module")
def photo():
    """A real photograph (scikit-image's astronaut), RGB."""
    with Image.open(datagen.source_photos()[0]) as im:
        return im.convert("RGB")


@pytest.mark.parametrize("model", sorted(PROFILES))
@pytest.mark.parametrize("kind", sorted(datagen.KINDS))
def test_every_encoding_matches_hf_for_every_profile(model, kind):
    sources = datagen.source_photos()
    index = sorted(datagen.KINDS).index(kind) * 3 + sorted(PROFILES).index(model)
    spec = datagen.plan_image(index, 5, sources, max_megapixels=1.2, kind=kind)
    data = datagen.encode_image(spec, 5)
    ref = hf_processor(model)(images=[hf_from_path_bytes(data)], return_tensors="np")
    assert_parity(mmfeed.ImageProcessor(model)([data]), ref)


def test_demo_photos_at_the_sft_budget_and_the_hub_default(tmp_path):
    datagen.generate(tmp_path, samples=10, seed=21, max_megapixels=6, workers=2)
    paths = [tmp_path / r["path"] for r in json.loads((tmp_path / "dataset.json").read_text())["images"]]
    for max_pixels in (1003520, None):
        ours = mmfeed.ImageProcessor("qwen2-vl", max_pixels=max_pixels)([str(p) for p in paths])
        ref = hf_processor("qwen2-vl", max_pixels=max_pixels)(
            images=[hf_from_path_bytes(p.read_bytes()) for p in paths], return_tensors="np"
        )
        assert_parity(ours, ref)


@pytest.mark.parametrize(
    "size", [(1, 1), (3, 2), (27, 29), (28, 28), (57, 113), (2, 398), (398, 2), (1, 200), (4000, 3000), (1023, 767)]
)
def test_edge_sizes(size, photo):
    img = photo.resize(size, Image.Resampling.BILINEAR)
    data = encode(img, "PNG")
    for model in ("qwen2-vl", "qwen3-vl"):
        ref = hf_processor(model, max_pixels=1003520)(images=[hf_from_path_bytes(data)], return_tensors="np")
        assert_parity(mmfeed.ImageProcessor(model, max_pixels=1003520)([data]), ref)


def test_aspect_ratio_over_200_is_refused_like_hf(photo):
    data = encode(photo.resize((402, 2)), "PNG")
    with pytest.raises(ValueError, match="absolute aspect ratio must be smaller than 200"):
        hf_processor("qwen2-vl")(images=[hf_from_path_bytes(data)], return_tensors="np")
    with pytest.raises(ValueError, match="image 0: absolute aspect ratio must be smaller than 200"):
        mmfeed.ImageProcessor("qwen2-vl")([data])


@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_exif_orientation(orientation, photo):
    exif = Image.Exif()
    exif[0x0112] = orientation
    small = photo.resize((300, 200))
    for fmt, params in (("JPEG", {"quality": 90}), ("PNG", {}), ("WEBP", {"lossless": True})):
        data = encode(small, fmt, exif=exif.tobytes(), **params)
        ref = hf_processor("qwen2-vl")(images=[hf_from_path_bytes(data)], return_tensors="np")
        assert_parity(mmfeed.ImageProcessor("qwen2-vl")([data]), ref)
        # exif=False is HF given the PIL image as stored
        stored = Image.open(io.BytesIO(data)).convert("RGB")
        ref_stored = hf_processor("qwen2-vl")(images=[stored], return_tensors="np")
        assert_parity(mmfeed.ImageProcessor("qwen2-vl", exif=False)([data]), ref_stored)


def test_png_bit_depths_and_transparency_variants(photo):
    rng = np.random.default_rng(3)
    small = photo.resize((97, 61))
    gray = small.convert("L")
    cases = {
        "gray16": Image.fromarray(np.asarray(gray, dtype=np.uint16) * 200),  # clipped at 255 by Pillow
        "rgb+trns": None,
        "gray+trns": None,
        "1bit": gray.convert("1"),
        "4bit-palette": small.quantize(16),
        "la": Image.merge("LA", (gray, gray.point(lambda v: 255 - v))),
        "rgba16": None,
    }
    datas = {k: encode(v, "PNG") for k, v in cases.items() if v is not None}
    datas["rgb+trns"] = encode(small, "PNG", transparency=small.getpixel((5, 5)))
    datas["gray+trns"] = encode(gray, "PNG", transparency=gray.getpixel((7, 7)))
    datas["4bit-palette"] = encode(cases["4bit-palette"], "PNG", bits=4)
    rgba16 = rng.integers(0, 65536, (61, 97, 4), dtype=np.uint16)
    datas["rgba16"] = _png16_rgba(rgba16)
    for name, data in datas.items():
        ref = hf_processor("qwen2-vl")(images=[hf_from_path_bytes(data)], return_tensors="np")
        assert_parity(mmfeed.ImageProcessor("qwen2-vl")([data]), ref), name


def _png16_rgba(arr: np.ndarray) -> bytes:
    """A 16-bit RGBA PNG written by hand (Pillow cannot write one)."""
    import struct
    import zlib

    h, w, _ = arr.shape
    raw = b"".join(b"\x00" + arr[y].astype(">u2").tobytes() for y in range(h))

    def chunk(tag, body):
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 6, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def test_pil_images_and_arrays_follow_hf_routes(photo):
    small = photo.resize((211, 157))
    rgba = small.copy()
    rgba.putalpha(Image.linear_gradient("L").resize(small.size))
    palette = small.quantize(64)
    palette.info["transparency"] = 3
    inputs = [small, rgba, palette, np.asarray(small), np.asarray(small.convert("L"))]
    ref = hf_processor("qwen2-vl")(
        images=inputs[:3] + [np.asarray(small), np.asarray(small.convert("L"))[..., None]], return_tensors="np"
    )
    assert_parity(mmfeed.ImageProcessor("qwen2-vl")(inputs), ref)


def test_alpha_policies_are_bit_exact_over_every_colour_and_alpha():
    # pixel (y=a, x=c) = (c, 255 - c, c // 2, alpha a); 256 x 256 is a multiple of 32: no resize
    a, c = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    rgba = np.stack([c, 255 - c, c // 2, a], axis=-1).astype(np.uint8)
    image = Image.fromarray(rgba, "RGBA")
    white = Image.new("RGBA", image.size, (255, 255, 255, 255))
    expected = {
        "white": np.asarray(Image.alpha_composite(white, image).convert("RGB")),
        "paste": _pasted(image),
        "drop": rgba[..., :3],
    }
    for policy, want in expected.items():
        proc = mmfeed.ImageProcessor("qwen3-vl", alpha=policy, output="uint8")
        got = unpatchify_u8(proc([rgba]), patch=16)
        np.testing.assert_array_equal(got, want, err_msg=policy)


def _pasted(image):
    """qwen-vl-utils' to_rgb: paste an RGBA image on white through its alpha channel."""
    background = Image.new("RGB", image.size, (255, 255, 255))
    background.paste(image, mask=image.split()[3])
    return np.asarray(background)


def unpatchify_u8(out, patch, merge=2):
    t, gh, gw = out["image_grid_thw"][0]
    rows = out["pixel_values"].reshape(gh // merge, gw // merge, merge, merge, 3, patch, patch)
    # (bh, bw, mh, mw, c, ph, pw) -> (bh, mh, ph, bw, mw, pw, c)
    return rows.transpose(0, 2, 5, 1, 3, 6, 4).reshape(gh * patch, gw * patch, 3)


def test_uint8_and_bfloat16_outputs_agree_with_float32(photo):
    data = encode(photo.resize((640, 480)), "JPEG", quality=90)
    f32 = mmfeed.ImageProcessor("qwen2-vl")([data])["pixel_values"]
    bf16 = mmfeed.ImageProcessor("qwen2-vl", output="bfloat16")([data])["pixel_values"]
    assert bf16.dtype == np.uint16 and bf16.shape == f32.shape
    as_f32 = (bf16.astype(np.uint32) << 16).view(np.float32)
    assert np.abs(as_f32 - f32).max() <= np.abs(f32).max() * 2**-8
    u8 = mmfeed.ImageProcessor("qwen2-vl", output="uint8")([data])
    assert u8["pixel_values"].shape == (f32.shape[0], 3 * 14 * 14)
    mean = np.array([0.48145466, 0.4578275, 0.40821073], np.float32)
    std = np.array([0.26862954, 0.26130258, 0.27577711], np.float32)
    x = (u8["pixel_values"].reshape(-1, 3, 14 * 14).astype(np.float64) * (1 / 255)).astype(np.float32)
    normalized = (x - mean[None, :, None]) / std[None, :, None]
    repeated = np.repeat(normalized[:, :, None, :], 2, axis=2).reshape(f32.shape)
    np.testing.assert_array_equal(repeated, f32)


@pytest.mark.parametrize("filter_name", ["bicubic", "bilinear", "lanczos", "box", "hamming"])
def test_resize_is_pillow_exact_on_random_sizes(filter_name):
    rng = random.Random(hash(filter_name) & 0xFFFF)
    pil_filter = getattr(Image.Resampling, filter_name.upper())
    for _ in range(25):
        h, w = rng.randint(1, 300), rng.randint(1, 300)
        oh, ow = rng.randint(1, 300), rng.randint(1, 300)
        channels = rng.choice([1, 3, 4])
        arr = np.random.default_rng(rng.randint(0, 1 << 30)).integers(0, 256, (h, w, channels), dtype=np.uint8)
        mode = {1: "L", 3: "RGB", 4: "RGBA"}[channels]
        src = Image.fromarray(arr[..., 0] if channels == 1 else arr, mode)
        if mode == "RGBA":  # Pillow premultiplies RGBA around resize; compare on RGBX (no alpha math)
            src = Image.frombytes("RGBX", src.size, src.tobytes())
        ref = np.asarray(src.resize((ow, oh), pil_filter)).reshape(oh, ow, -1)
        for kernel in ("scalar", "portable", "auto"):
            got = mmfeed.resize(arr, ow, oh, filter_name, kernel)
            np.testing.assert_array_equal(got, ref, err_msg=f"{(h, w)}->{(oh, ow)} x{channels} {kernel}")


def test_torch_bicubic_is_torchs_uint8_interpolate_byte_for_byte():
    """The resize transformers' video processors run (torchvision's resize of a uint8 tensor, i.e.
    F.interpolate(mode="bicubic", antialias=True)): shrinking, enlarging, one axis, tall and wide,
    1, 3 and 4 channels. It differs from Pillow's bicubic, so the test also shows that it does."""
    import torch
    import torch.nn.functional as F

    rng = random.Random(20)
    shapes = [
        (360, 640, 336, 588),
        (1080, 1920, 448, 812),
        (57, 91, 28, 56),
        (240, 320, 448, 588),
        (33, 1000, 64, 980),
        (1000, 20, 28, 28),
        (90, 160, 90, 56),
        (90, 160, 280, 160),
    ]
    shapes += [(rng.randint(1, 400), rng.randint(1, 400), rng.randint(1, 400), rng.randint(1, 400)) for _ in range(16)]
    differs_from_pillow = 0
    for i, (h, w, oh, ow) in enumerate(shapes):
        channels = [3, 1, 4][i % 3]
        arr = np.random.default_rng(i).integers(0, 256, (h, w, channels), dtype=np.uint8)
        tensor = torch.from_numpy(arr).permute(2, 0, 1)[None].contiguous()
        ref = F.interpolate(tensor, size=(oh, ow), mode="bicubic", antialias=True, align_corners=False)
        ref = ref[0].permute(1, 2, 0).numpy()
        for kernel in ("scalar", "portable", "auto"):
            got = mmfeed.resize(arr, ow, oh, "bicubic-torch", kernel)
            np.testing.assert_array_equal(got, ref, err_msg=f"{(h, w)}->{(oh, ow)} x{channels} {kernel}")
        differs_from_pillow += int(np.any(mmfeed.resize(arr, ow, oh, "bicubic") != ref))
    assert differs_from_pillow >= len(shapes) // 2


def test_simd_and_scalar_processors_are_identical_on_large_images(photo):
    big = photo.resize((3001, 1999), Image.Resampling.BILINEAR)
    data = encode(big, "JPEG", quality=85)
    scalar = mmfeed.ImageProcessor("qwen2-vl", kernel="scalar")([data])["pixel_values"]
    for kernel in ("simd", "portable"):
        got = mmfeed.ImageProcessor("qwen2-vl", kernel=kernel)([data])["pixel_values"]
        np.testing.assert_array_equal(got, scalar, err_msg=kernel)
    with pytest.raises(ValueError, match="kernel must be"):
        mmfeed.ImageProcessor("qwen2-vl", kernel="avx")


def test_threads_give_the_same_rows(photo):
    datas = [encode(photo.resize((300 + 37 * i, 200 + 11 * i)), "JPEG", quality=80) for i in range(8)]
    one = mmfeed.ImageProcessor("qwen2-vl")(datas)
    four = mmfeed.ImageProcessor("qwen2-vl", threads=4)(datas)
    np.testing.assert_array_equal(one["pixel_values"], four["pixel_values"])
    np.testing.assert_array_equal(one["image_grid_thw"], four["image_grid_thw"])


def test_plan_matches_the_spec_examples():
    assert mmfeed.ImageProcessor("qwen2-vl").plan(768, 1024) == (1, 54, 74)
    assert mmfeed.ImageProcessor("qwen3-vl").plan(768, 1024) == (1, 48, 64)


BROKEN = {
    "empty": (b"", "empty image (0 bytes)"),
    "wrong magic": (b"<html>" + b"\0" * 100, "not a JPEG, PNG or WebP image: unrecognised signature (106 bytes)"),
    "truncated jpeg": (None, "JPEG data of"),
    "truncated png": (None, "PNG data of"),
    "corrupt webp": (None, "WebP"),
    "huge declared png": (None, "pixels exceeds the limit"),
}


def test_broken_files_give_clear_errors(photo):
    jpeg = encode(photo.resize((200, 150)), "JPEG", quality=90)
    png = encode(photo.resize((200, 150)), "PNG")
    webp = encode(photo.resize((200, 150)), "WEBP", quality=80)
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
    huge = (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + b"IHDR"
        + ihdr
        + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr) & 0xFFFFFFFF)
    )
    cases = dict(BROKEN)
    cases["truncated jpeg"] = (jpeg[: len(jpeg) // 2], f"JPEG data of {len(jpeg) // 2} bytes is corrupt or truncated")
    cases["truncated png"] = (png[: len(png) // 2], f"PNG data of {len(png) // 2} bytes is corrupt or truncated")
    cases["corrupt webp"] = (webp[:40] + b"\xff" * 200, "WebP")
    cases["huge declared png"] = (huge, "image of 100000x100000 = 10000000000 pixels exceeds the limit")
    proc = mmfeed.ImageProcessor("qwen2-vl")
    for data, message in cases.values():
        with pytest.raises(ValueError, match=re.escape("image 1: " + message)):
            proc([jpeg, data])


def test_formats_it_does_not_decode_are_named(photo):
    # Issue 15: real files of each format were all "unknown signature".
    small = photo.resize((32, 24))
    files = {
        "GIF image": encode(small, "GIF"),
        "TIFF image (little-endian)": encode(small, "TIFF"),
        "TIFF image (big-endian)": encode(small.convert("L").convert("I;16B"), "TIFF"),
        "BMP image": encode(small, "BMP"),
        "ICO image": encode(small, "ICO"),
        "AVIF image": encode(small, "AVIF"),
        "PDF document": encode(small, "PDF"),
        "SVG image": b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="32" height="24"/>',
    }
    jpeg = encode(small, "JPEG")
    proc = mmfeed.ImageProcessor("qwen2-vl")
    for name, data in files.items():
        message = (
            f"image 1: {name}: format not supported (mmfeed decodes JPEG, PNG and WebP); convert it to one of those"
        )
        with pytest.raises(ValueError, match=re.escape(message)):
            proc([jpeg, data])


def test_fast_mode_keeps_the_grid_and_bounds_its_error(photo):
    big = photo.resize((3000, 2250), Image.Resampling.BILINEAR)
    data = encode(big, "JPEG", quality=90)
    exact = mmfeed.ImageProcessor("qwen2-vl", max_pixels=200_000, output="uint8")([data])
    fast = mmfeed.ImageProcessor("qwen2-vl", max_pixels=200_000, output="uint8", fast=True)([data])
    np.testing.assert_array_equal(exact["image_grid_thw"], fast["image_grid_thw"])
    diff = exact["pixel_values"].astype(np.float64) - fast["pixel_values"]
    assert np.any(diff != 0), "a 3000x2250 JPEG shrunk to 0.2 MP must take the reduced decode"
    psnr = 10 * np.log10(255**2 / (diff**2).mean())
    assert psnr > 30, psnr
    # Nothing to gain (PNG, or too little shrinking): the fast mode is the exact mode.
    small = encode(photo.resize((640, 480)), "JPEG", quality=90)
    for item in (small, encode(big, "PNG")):
        np.testing.assert_array_equal(
            mmfeed.ImageProcessor("qwen2-vl", max_pixels=200_000, fast=True)([item])["pixel_values"],
            mmfeed.ImageProcessor("qwen2-vl", max_pixels=200_000)([item])["pixel_values"],
        )
