"""image_backend="torchvision" (issue 35): mmfeed's images against transformers' torchvision
Qwen2VLImageProcessor — what AutoImageProcessor picks for every Qwen-VL model wherever torchvision
is installed — run in .venv-tv (torchvision_oracle.py), on the demo set's every encoding, odd and
extreme sizes and real photographs, with each model's settings at two budgets; and whole batches
through the Loader.

Tolerance: none. The backend decodes as Pillow (load_image), resizes with torch's antialiased
bicubic on uint8 (the kernel mmfeed's video path already reproduces byte for byte) and
normalizes with the fused float32 arithmetic of torchvision's normalize: every value is
computed exactly as the reference computes it, so pixel_values are asserted equal."""

import json
import subprocess
from pathlib import Path

import datagen
import numpy as np
import pytest
from PIL import Image

import mmfeed

ROOT = Path(__file__).resolve().parents[3]
ORACLE_PYTHON = ROOT / ".venv-tv" / "bin" / "python"
TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"

PROFILES = {
    # name: (patch, mean/std or None for CLIP's, min_pixels, max_pixels) as the hub configs set them
    "qwen2-vl": (14, None, 3136, 12845056),
    "qwen2.5-vl": (14, None, 3136, 12845056),
    "qwen3-vl": (16, [0.5, 0.5, 0.5], 65536, 16777216),
}
BUDGETS = [None, 200_704]  # the hub default, and an SFT budget that shrinks most images
SIZES = [(1, 1), (3, 2), (27, 29), (28, 28), (57, 113), (2, 398), (398, 2), (1, 200), (1023, 767), (2000, 1500)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Writes the images, runs the oracle once per (model, budget) over all of them."""
    if not ORACLE_PYTHON.exists():
        pytest.fail(f"{ORACLE_PYTHON} is missing: scripts/setup.sh makes the torchvision environment")
    work = tmp_path_factory.mktemp("torchvision-backend")
    sources = datagen.source_photos()
    paths = []
    for i, kind in enumerate(sorted(datagen.KINDS)):
        spec = datagen.plan_image(i, 35, sources, max_megapixels=1.5, kind=kind)
        path = work / f"{i:02d}-{kind}.{datagen.KINDS[kind]}"
        path.write_bytes(datagen.encode_image(spec, 35))
        paths.append(path)
    with Image.open(sources[0]) as photo:
        photo = photo.convert("RGB")
        for w, h in SIZES:
            path = work / f"size-{w}x{h}.png"
            photo.resize((w, h), Image.Resampling.BILINEAR).save(path)
            paths.append(path)
    jobs = []
    for model, budget in [(m, b) for m in sorted(PROFILES) for b in BUDGETS]:
        patch, mean, lo, hi = PROFILES[model]
        jobs.append(
            {
                "model": model,
                "paths": [str(p) for p in paths],
                "patch_size": patch,
                "image_mean": mean,
                "image_std": mean,
                "min_pixels": lo,
                "max_pixels": budget or hi,
            }
        )
    (work / "jobs.json").write_text(json.dumps(jobs))
    out = work / "out"
    out.mkdir()
    run = subprocess.run(
        [str(ORACLE_PYTHON), str(Path(__file__).with_name("torchvision_oracle.py")), str(work / "jobs.json"), str(out)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return jobs, out


@pytest.mark.parametrize("index", range(len(PROFILES) * len(BUDGETS)))
def test_every_image_equals_the_torchvision_processor(reference, index):
    jobs, out = reference
    job = jobs[index]
    assert not (out / f"{index}.err").exists(), (out / f"{index}.err").read_text()
    ref = np.load(out / f"{index}.npz")
    ours = mmfeed.ImageProcessor(job["model"], max_pixels=job["max_pixels"], backend="torchvision", threads=2)(
        job["paths"]
    )
    np.testing.assert_array_equal(ours["image_grid_thw"], ref["image_grid_thw"])
    assert ours["pixel_values"].dtype == ref["pixel_values"].dtype == np.float32
    start = 0
    for path, (t, h, w) in zip(job["paths"], ref["image_grid_thw"]):
        rows = slice(start, start + t * h * w)
        np.testing.assert_array_equal(ours["pixel_values"][rows], ref["pixel_values"][rows], err_msg=Path(path).name)
        start += t * h * w
    # The PIL backend is another processor: it differs on most of these images (the reason for the option).
    pil = mmfeed.ImageProcessor(job["model"], max_pixels=job["max_pixels"])(job["paths"])
    assert np.any(pil["pixel_values"] != ours["pixel_values"])


def test_the_loader_delivers_the_torchvision_processors_rows(reference, tmp_path):
    """Whole batches: a Loader with image_backend="torchvision" carries, sample by sample, the rows
    the reference made for the same files (the first job: qwen2-vl at the hub budget), padded and
    in uint8 normalized on the trainer's side (mmfeed.normalize_pixels with the same backend)."""
    jobs, out = reference
    job = jobs[0]
    ref = np.load(out / "0.npz")
    offsets = np.concatenate([[0], np.cumsum(np.prod(ref["image_grid_thw"], axis=1))])
    manifest = tmp_path / "manifest.jsonl"
    with manifest.open("w") as f:
        for i, path in enumerate(job["paths"][:12]):
            content = [{"type": "image", "image": path}, {"type": "text", "text": f"Image {i}?"}]
            messages = [{"role": "user", "content": content}, {"role": "assistant", "content": "Seen."}]
            f.write(json.dumps({"id": str(i), "messages": messages}) + "\n")
    for pixels in ("float32", "uint8"):
        loader = mmfeed.Loader(
            manifest,
            tokenizer=TOKENIZER,
            image_backend="torchvision",
            pixels=pixels,
            batch_size=4,
            shuffle=False,
            tensors="np",
        )
        seen = 0
        with loader:
            for batch in loader:
                if pixels == "uint8":
                    batch = mmfeed.normalize_pixels(batch, model="qwen2-vl", image_backend="torchvision")
                want = np.concatenate(
                    [ref["pixel_values"][offsets[int(s)] : offsets[int(s) + 1]] for s in batch["sample_ids"]]
                )
                np.testing.assert_array_equal(batch["pixel_values"], want, err_msg=str(batch["sample_ids"]))
                seen += len(batch["sample_ids"])
        assert seen == 12
