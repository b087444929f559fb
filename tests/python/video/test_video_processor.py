"""Videos (issue 20, second part): mmfeed.process_video against the reference pipelines given the
same decoded frames (video_oracle.py, run in .venv-tv: qwen-vl-utils + transformers'
Qwen2VLVideoProcessor for Qwen2/2.5-VL, transformers' Qwen3VLVideoProcessor for Qwen3-VL):
frames kept, grids, pixel_values_videos bit for bit, Qwen2.5-VL's second_per_grid_t and
Qwen3-VL's timestamps, and the same refusals. The test videos are made here with ffmpeg."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import make_test_video

import mmfeed
from mmfeed import _mmfeed

pytestmark = pytest.mark.skipif(
    not _mmfeed.video_libraries().startswith("libavformat"), reason="built without video (MMFEED_VIDEO=OFF)"
)

ROOT = Path(__file__).resolve().parents[3]
ORACLE_PYTHON = ROOT / ".venv-tv" / "bin" / "python"

# name: (size, rate, seconds, codec arguments)
VIDEOS = {
    "odd.mp4": ("318x182", 25, 3, ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "12"]),
    "vp9.webm": ("320x240", 30, 2, ["-c:v", "libvpx-vp9", "-b:v", "300k", "-deadline", "realtime"]),
    "hd.mp4": ("640x360", 30, 5, ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
    "long.mp4": ("64x36", 30, 40, ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "60"]),
    "tiny.mp4": ("24x20", 10, 2, ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
    "one-frame.mp4": ("64x36", 30, 1 / 30, ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
}

QWEN2_ITEMS = [
    {},
    {"fps": 1.0},
    {"nframes": 8},
    {"nframes": 6, "max_pixels": 50000},
    {"min_pixels": 4096, "max_pixels": 20000},
    {"video_start": 0.5, "video_end": 1.9},
    {"total_pixels": 2_000_000},
    {"fps": 3.0, "min_frames": 6, "max_frames": 10},
]
QWEN3_ITEMS = [{}, {"fps": 4}, {"nframes": 5}, {"max_pixels": 2_000_000}, {"min_pixels": 300_000}]

CASES = [
    (model, name, item)
    for model in ("qwen2-vl", "qwen2.5-vl")
    for name in VIDEOS
    for item in QWEN2_ITEMS
    if model == "qwen2-vl" or not item
] + [("qwen3-vl", name, item) for name in VIDEOS for item in QWEN3_ITEMS]
# The Omni models: qwen-omni-utils' recipe at their patch sizes, their processors' frame bounds.
# A max_pixels just over the processor's least frame rounds some frames under it, which the processor
# would resize a second time: refused by both.
CASES += [("qwen2.5-omni", name, item) for name in VIDEOS for item in ({}, {"max_pixels": 110000})] + [
    ("qwen3-omni", name, item) for name in VIDEOS for item in ({}, {"fps": 1.0}, {"nframes": 6, "max_pixels": 300000})
]


def case_id(case) -> str:
    model, name, item = case
    return f"{model}-{name}-" + ("-".join(f"{k}={v}" for k, v in item.items()) or "defaults")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Makes the videos, decodes every frame with mmfeed, runs the oracle once over every case."""
    if not ORACLE_PYTHON.exists():
        pytest.fail(f"{ORACLE_PYTHON} is missing: scripts/setup.sh makes the torchvision environment")
    work = tmp_path_factory.mktemp("video-processor")
    files, jobs = {}, []
    for name, (size, rate, seconds, codec) in VIDEOS.items():
        path = work / name
        make_test_video(path, size, rate, seconds, codec)
        data = path.read_bytes()
        info = mmfeed.probe_video(data)
        frames = mmfeed.decode_video(data, list(range(info["frames"])))
        np.save(work / f"{name}.npy", frames)
        files[name] = (data, info)
    for model, name, item in CASES:
        jobs.append({"frames": str(work / f"{name}.npy"), "fps": files[name][1]["fps"], "model": model, "item": item})
    (work / "jobs.json").write_text(json.dumps(jobs))
    out = work / "out"
    out.mkdir()
    run = subprocess.run(
        [str(ORACLE_PYTHON), str(Path(__file__).with_name("video_oracle.py")), str(work / "jobs.json"), str(out)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return files, out


@pytest.mark.parametrize("index", range(len(CASES)), ids=[case_id(c) for c in CASES])
def test_equals_the_reference_pipeline(reference, index):
    files, out = reference
    model, name, item = CASES[index]
    data, _ = files[name]
    err = out / f"{index}.err"
    if err.exists():  # the reference refuses: so must mmfeed
        with pytest.raises(ValueError):
            mmfeed.process_video(data, model=model, **item)
        return
    ref = np.load(out / f"{index}.npz")
    got = mmfeed.process_video(data, model=model, **item)
    np.testing.assert_array_equal(got["indices"], ref["indices"])
    assert got["video_grid_thw"] == ref["video_grid_thw"].tolist()
    assert got["pixel_values_videos"].shape == ref["pixel_values_videos"].shape
    np.testing.assert_array_equal(got["pixel_values_videos"], ref["pixel_values_videos"])
    if model == "qwen3-vl":
        assert got["timestamps"] == ref["timestamps"].tolist()
        return
    assert got["second_per_grid_t"] == float(ref["second_per_grid_t"])
    # qwen-vl-utils resizes with torchvision's v1 resize (a float32 interpolation, no rounding
    # between the passes, rounded to uint8 at the end), not the processor's uint8 one (int16
    # weights, a uint8 intermediate): measured here, 2-3% of the values differ at a mild resize, 7-16%
    # where a clip is enlarged 5-15x; about a tenth of those by more than a level (up to 25, at
    # overshoots clamped between the passes on one side only).
    clip_std = [0.26862954, 0.26130258, 0.27577711]
    std = np.array([0.5] * 3 if model == "qwen3-omni" else clip_std, np.float32) * np.float32(255)
    diff = np.abs(got["pixel_values_videos"] - ref["pixel_values_utils"]).reshape(
        len(got["pixel_values_videos"]), 3, -1
    )
    levels = np.rint(diff * std[None, :, None])
    print(
        f"{case_id(CASES[index])}: off {np.mean(levels > 0):.4f}, over one level {np.mean(levels > 1):.5f}, "
        f"max {levels.max():.0f}"
    )
    assert np.mean(levels > 0) < 0.2 and np.mean(levels > 1) < 0.03


def test_the_cases_cover_refusals_and_both_recipes(reference):
    _, out = reference
    refused = [case_id(CASES[i]) for i in range(len(CASES)) if (out / f"{i}.err").exists()]
    assert "qwen3-vl-one-frame.mp4-defaults" in refused
    assert len(refused) < len(CASES) // 4, refused


def test_bfloat16_and_uint8_outputs_follow_float32(reference):
    files, _ = reference
    data, _ = files["hd.mp4"]
    f32 = mmfeed.process_video(data, model="qwen2.5-vl")
    bf16 = mmfeed.process_video(data, model="qwen2.5-vl", output="bfloat16")
    expected = torch.from_numpy(f32["pixel_values_videos"]).to(torch.bfloat16).view(torch.uint16).numpy()
    np.testing.assert_array_equal(bf16["pixel_values_videos"], expected)
    u8 = mmfeed.process_video(data, model="qwen2.5-vl", output="uint8")["pixel_values_videos"].astype(np.float32)
    mean = np.array([0.48145466, 0.4578275, 0.40821073], np.float32) * np.float32(255)
    std = np.array([0.26862954, 0.26130258, 0.27577711], np.float32) * np.float32(255)
    normalized = (u8.reshape(len(u8), 3, -1) - mean[None, :, None]) / std[None, :, None]
    np.testing.assert_array_equal(normalized.reshape(u8.shape), f32["pixel_values_videos"])


def test_bad_input_is_refused_by_name(reference):
    files, _ = reference
    data, _ = files["hd.mp4"]
    with pytest.raises(ValueError, match="does not decode|damaged|ends after|not a container"):
        mmfeed.process_video(data[: len(data) // 3], model="qwen2-vl")
    with pytest.raises(ValueError, match="nframes"):
        mmfeed.process_video(data, model="qwen2-vl", nframes=4, fps=2.0)
    with pytest.raises(ValueError, match="video_start"):
        mmfeed.process_video(data, model="qwen3-vl", video_start=1.0)
    with pytest.raises(ValueError, match=r"unknown model 'llava' \(known: qwen2-vl, "):
        mmfeed.process_video(data, model="llava")
