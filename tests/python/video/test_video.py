"""Videos (issue 20, first part): decoding with FFmpeg's libraries against PyAV, and the
Qwen2/2.5-VL frame sampling against qwen-vl-utils and torch. The test videos are made here with
the ffmpeg command (H.264, VP9, MPEG-4 in MP4, WebM, MKV and AVI; odd sizes, full range, BT.709,
4:4:4, rotation metadata, a variable frame rate, a very short and a longer clip) and damaged here
(truncated, garbage, no video stream, an unknown codec)."""

import sys
import types

import av
import numpy as np
import pytest
import torch
from conftest import ffmpeg, make_test_video

from mmfeed import _mmfeed

pytestmark = pytest.mark.skipif(
    not _mmfeed.video_libraries().startswith("libavformat"), reason="built without video (MMFEED_VIDEO=OFF)"
)

# name: ffmpeg arguments after the lavfi source (testsrc2 of the given size, rate, seconds)
VIDEOS = {
    "h264-odd.mp4": ("318x182", 25, 3, ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "12"]),
    "vp9.webm": ("320x240", 30, 2, ["-c:v", "libvpx-vp9", "-b:v", "300k", "-deadline", "realtime"]),
    "h264.mkv": ("200x120", 24, 2, ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
    "mpeg4.avi": ("128x72", 10, 1, ["-c:v", "mpeg4"]),
    "full-range.mp4": ("128x72", 30, 1, ["-c:v", "libx264", "-pix_fmt", "yuvj420p", "-color_range", "pc"]),
    "bt709.mp4": (
        "128x72",
        30,
        1,
        [
            "-c:v",
            "libx264",
            "-pix_fmt",
            "yuv420p",
            "-colorspace",
            "bt709",
            "-color_primaries",
            "bt709",
            "-color_trc",
            "bt709",
        ],
    ),
    "yuv444.mp4": ("128x72", 30, 1, ["-c:v", "libx264", "-pix_fmt", "yuv444p"]),
    "vfr.mp4": ("160x96", 30, 3, ["-vf", "setpts='if(lt(N,30),PTS,PTS*2)'", "-fps_mode", "vfr", "-c:v", "libx264"]),
    "two-frames.mp4": ("64x36", 30, 2 / 30, ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
    "long.mp4": ("64x36", 30, 40, ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "60"]),
}


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    out = tmp_path_factory.mktemp("videos")
    for name, (size, rate, seconds, codec) in VIDEOS.items():
        make_test_video(out / name, size, rate, seconds, codec)
    # Rotation metadata (a display matrix) survives a stream copy, not an encode.
    ffmpeg("-i", out / "h264-odd.mp4", "-c", "copy", "-metadata:s:v:0", "rotate=90", out / "rotated.mp4")
    # A stream copy cut between keyframes: an edit list, whose leading packets decode to no frame.
    ffmpeg("-ss", "3.7", "-i", out / "long.mp4", "-t", "4", "-c", "copy", out / "edit-list.mp4")
    return out


def pyav_frames(path) -> list[av.VideoFrame]:
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


@pytest.mark.parametrize("name", sorted(VIDEOS) + ["rotated.mp4", "edit-list.mp4"])
def test_probe_and_frames_equal_pyavs(videos, name):
    data = (videos / name).read_bytes()
    info = _mmfeed.probe_video(data)
    frames = pyav_frames(videos / name)
    with av.open(str(videos / name)) as container:
        stream = container.streams.video[0]
        assert (info["width"], info["height"]) == (stream.codec_context.width, stream.codec_context.height)
        assert info["codec"] == stream.codec_context.name
        assert info["fps"] == pytest.approx(float(stream.average_rate))
    assert info["frames"] == len(frames)
    assert info["duration_s"] == pytest.approx(len(frames) / info["fps"])
    assert info["rotation"] == frames[0].rotation == (90 if name == "rotated.mp4" else 0)  # reported, not applied
    indices = sorted({0, 1, len(frames) // 3, len(frames) // 2, len(frames) - 1})
    decoded = _mmfeed.decode_video(data, indices)
    assert decoded.shape == (len(indices), info["height"], info["width"], 3) and decoded.dtype == np.uint8
    for k, i in enumerate(indices):
        # Decoding is exact by the codecs' specifications; the RGB conversion is PyAV's own.
        np.testing.assert_array_equal(decoded[k], frames[i].to_ndarray(format="rgb24"), err_msg=f"{name} frame {i}")


@pytest.mark.parametrize("name", ["h264-odd.mp4", "edit-list.mp4", "vp9.webm", "vfr.mp4"])
def test_every_frame_and_sparse_frames_equal_pyavs(videos, name):
    # Frames nobody asked for that no frame refers to are not decoded (found by timestamp); what
    # comes out must still be frame i of PyAV's count, whether all are asked for or a few.
    data = (videos / name).read_bytes()
    frames = pyav_frames(videos / name)
    every = _mmfeed.decode_video(data, list(range(len(frames))))
    for i, frame in enumerate(frames):
        np.testing.assert_array_equal(every[i], frame.to_ndarray(format="rgb24"), err_msg=f"{name} frame {i}")
    sparse = list(range(1, len(frames), 7))
    picked = _mmfeed.decode_video(data, sparse)
    for k, i in enumerate(sparse):
        np.testing.assert_array_equal(picked[k], every[i], err_msg=f"{name} frame {i}")


@pytest.mark.parametrize("name, step", [("long.mp4", 97), ("long.mp4", 61), ("edit-list.mp4", 70), ("vp9.webm", 29)])
def test_frames_far_apart_skip_to_their_keyframe_and_equal_pyavs(videos, name, step):
    # Frames further apart than a keyframe interval (long.mp4: every 60th frame is one) are
    # decoded from the keyframe before each; the packets in between are not decoded at all.
    data = (videos / name).read_bytes()
    frames = pyav_frames(videos / name)
    sparse = list(range(step // 2, len(frames), step))
    picked = _mmfeed.decode_video(data, sparse)
    for k, i in enumerate(sparse):
        np.testing.assert_array_equal(picked[k], frames[i].to_ndarray(format="rgb24"), err_msg=f"{name} frame {i}")


def test_repeated_indices_give_the_frame_again(videos):
    data = (videos / "h264-odd.mp4").read_bytes()
    decoded = _mmfeed.decode_video(data, [3, 3, 4])
    np.testing.assert_array_equal(decoded[0], decoded[1])
    assert not np.array_equal(decoded[1], decoded[2])


def test_damaged_and_unsupported_videos_are_errors_naming_the_reason(videos, tmp_path):
    whole = (videos / "long.mp4").read_bytes()
    frames = _mmfeed.probe_video(whole)["frames"]
    # Truncated: the moov atom of an ffmpeg MP4 is at the end, so cut a "faststart" copy instead.
    fast = tmp_path / "fast.mp4"
    ffmpeg("-i", videos / "long.mp4", "-c", "copy", "-movflags", "+faststart", fast)
    cut = fast.read_bytes()[: len(fast.read_bytes()) // 2]
    # Its index declares every frame, so the lost tail is known: refused, not read as a shorter clip.
    for call in (lambda: _mmfeed.probe_video(cut), lambda: _mmfeed.decode_video(cut, [0, 5])):
        with pytest.raises(
            ValueError,
            match=rf"video: truncated: the container declares {frames} frames, "
            r"the file holds \d+",
        ):
            call()
    with pytest.raises(ValueError, match="video: not a container FFmpeg reads"):
        _mmfeed.probe_video(b"\x00garbage" * 100)
    with pytest.raises(ValueError, match="video: not a container FFmpeg reads"):
        _mmfeed.probe_video(whole[:40])  # cut inside the header
    audio = tmp_path / "tone.m4a"
    ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "aac", audio)
    with pytest.raises(ValueError, match="video: the file holds no video stream"):
        _mmfeed.probe_video(audio.read_bytes())
    # A Matroska file whose codec id no decoder knows.
    mkv = (videos / "h264.mkv").read_bytes()
    assert b"V_MPEG4/ISO/AVC" in mkv
    with pytest.raises(ValueError, match="video: no decoder for codec"):
        _mmfeed.probe_video(mkv.replace(b"V_MPEG4/ISO/AVC", b"V_MMFEED/NOPE/X"))
    with pytest.raises(
        ValueError, match=f"video: frame {frames + 10} asked for, but the stream ends after {frames} frames"
    ):
        _mmfeed.decode_video(whole, [0, frames + 10])
    with pytest.raises(ValueError, match="ascending"):
        _mmfeed.decode_video(whole, [5, 2])
    with pytest.raises(ValueError, match="no frames asked for"):
        _mmfeed.decode_video(whole, [])


def qwen_vl_utils(monkeypatch):
    """qwen-vl-utils' vision_process, whose sampling needs no torchvision: imported with its
    torchvision imports stubbed for the import only (PyPI's torchvision needs another torch than
    these tests')."""
    tv = types.ModuleType("torchvision")
    tv.__version__ = "0.0"
    tv.io = types.ModuleType("torchvision.io")
    tv.transforms = types.ModuleType("torchvision.transforms")
    tv.transforms.InterpolationMode = types.SimpleNamespace(BICUBIC=3)
    tv.transforms.functional = types.ModuleType("torchvision.transforms.functional")
    for name, module in {
        "torchvision": tv,
        "torchvision.io": tv.io,
        "torchvision.transforms": tv.transforms,
        "torchvision.transforms.functional": tv.transforms.functional,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "qwen_vl_utils.vision_process", raising=False)
    monkeypatch.delitem(sys.modules, "qwen_vl_utils", raising=False)
    import qwen_vl_utils.vision_process as vision_process

    return vision_process


REQUESTS = [
    {},
    {"fps": 1.0},
    {"fps": 4.0},
    {"fps": 0.5, "min_frames": 6},
    {"fps": 2.0, "max_frames": 64},
    {"nframes": 8},
    {"nframes": 17},
    {"nframes": 2},
    {"video_start": 0.7, "video_end": 3.3},
    {"video_start": 2.0},
    {"video_end": 1.0, "fps": 8.0},
    {"video_start": -1.0, "video_end": 1e9},
]


def test_frame_sampling_is_qwen_vl_utils(monkeypatch):
    # The reader qwen-vl-utils uses (decord, torchcodec): the range, smart_nframes over it, then
    # torch.linspace(first, last, n).round().
    vp = qwen_vl_utils(monkeypatch)
    checked = 0
    for total in [2, 3, 4, 5, 7, 16, 31, 75, 90, 299, 300, 451, 1799, 3600, 90001]:
        for fps in (1.0, 10.0, 23.976, 25.0, 29.97, 30.0, 60.0):
            for request in REQUESTS:
                try:
                    first, last, count = vp.calculate_video_frame_range(request, total, fps)
                    n = vp.smart_nframes(request, total_frames=count, video_fps=fps)
                except ValueError as e:
                    with pytest.raises(ValueError, match="video: "):
                        _mmfeed.plan_video_frames(total, fps, **request)
                    assert "nframes should in interval" in str(e) or "Invalid time range" in str(e)
                    continue
                plan = _mmfeed.plan_video_frames(total, fps, **request)
                assert (plan["first"], plan["last"]) == (first, last), (total, fps, request)
                assert plan["indices"] == torch.linspace(first, last, n).round().long().tolist(), (total, fps, request)
                assert plan["sample_fps"] == pytest.approx(n / max(count, 1e-6) * fps, rel=1e-12)
                checked += 1
    assert checked > 1000
    with pytest.raises(ValueError, match='either "nframes" or "fps"'):
        _mmfeed.plan_video_frames(100, 30.0, nframes=8, fps=2.0)


def test_linspace_rounding_is_torchs_over_a_sweep():
    # torch.linspace in float32, the first half counted up and the second down, rounded half to
    # even: every (first, last, n) here, n even (what sampling asks for).
    checked = 0
    for first in (0, 1, 7, 30):
        for last in range(first + 1, first + 400, 7):
            for n in range(2, min(last - first + 1, 64) + 1, 2):
                plan = _mmfeed.plan_video_frames(last + 1, 1.0, nframes=n, video_start=first)
                assert (plan["first"], plan["last"]) == (first, last)
                assert plan["indices"] == torch.linspace(first, last, n).round().long().tolist(), (first, last, n)
                checked += 1
    assert checked > 1000
