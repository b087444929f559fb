"""The reference video pipelines, run in the torchvision environment (.venv-tv: PyPI's
torchvision needs its own torch build; scripts/setup.sh makes it) for test_video_processor.py.

Usage: python video_oracle.py JOBS.json OUT_DIR

Each job names an .npy file holding every frame of a video as mmfeed decoded it (n, h, w, 3),
the file's frame rate, the model and the content item's keys. The frames stand in for the
decoder, so that what is compared is what follows decoding:
  - qwen2-vl / qwen2.5-vl: qwen-vl-utils' fetch_video, reading through its decord route (a
    decord.VideoReader over the .npy: len, get_avg_fps, get_batch), so its own sampling and
    sizing run; then transformers' Qwen2VLVideoProcessor with the hub config, on the frames
    qwen-vl-utils resized (pixel_values_utils) and on the same frames resized to that size by the
    processor's own resize (pixel_values_videos);
  - qwen2.5-omni / qwen3-omni: the same, qwen-vl-utils sizing by the model's patch (14, 16; the
    vision_process of qwen-omni-utils 0.0.9, which the Omni models' cookbooks call, is qwen-vl-utils
    0.0.14's), the processor given the size the Omni processors pass it (their videos_kwargs: 128
    to 768 tokens' pixels a frame); a size that processor would resize again is an error here;
  - qwen3-vl: transformers' Qwen3VLVideoProcessor with the hub config, sampling the frames itself
    from the metadata, and Qwen3VLProcessor's timestamps.
Writes OUT_DIR/<i>.npz per job: pixel_values_videos, video_grid_thw, indices, and
second_per_grid_t (qwen-vl-utils) or timestamps (qwen3-vl); or OUT_DIR/<i>.err with the error.
"""

import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import torch

os.environ["FORCE_QWENVL_VIDEO_READER"] = "decord"


class _Batch:
    def __init__(self, frames):
        self._frames = frames

    def asnumpy(self):
        return self._frames


class _VideoReader:
    """decord's VideoReader over frames already decoded: what qwen-vl-utils' decord route calls."""

    fps: dict[str, float] = {}

    def __init__(self, path):
        self._frames = np.load(path, mmap_mode="r")
        self._fps = _VideoReader.fps[path]

    def __len__(self):
        return len(self._frames)

    def get_avg_fps(self):
        return self._fps

    def get_batch(self, indices):
        return _Batch(np.ascontiguousarray(self._frames[indices]))


sys.modules["decord"] = types.SimpleNamespace(VideoReader=_VideoReader, __spec__=None)

from qwen_vl_utils import vision_process  # noqa: E402
from transformers.image_processing_backends import TorchvisionBackend  # noqa: E402
from transformers.image_utils import PILImageResampling, SizeDict  # noqa: E402
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor  # noqa: E402
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor  # noqa: E402
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor  # noqa: E402
from transformers.video_utils import VideoMetadata  # noqa: E402

# The hub configs: Qwen2-VL's and Qwen2.5-VL's preprocessor_config.json (the video processor is
# made from it), Qwen3-VL's video_preprocessor_config.json.
QWEN2 = dict(min_pixels=3136, max_pixels=12845056, patch_size=14, temporal_patch_size=2, merge_size=2)
# The Omni processors' video settings: the checkpoints' preprocessor_config.json (Qwen3-Omni's at
# patch 16, mean and std 0.5), the size from the processor classes' videos_kwargs.
OMNI = {
    "qwen2.5-omni": dict(QWEN2, size={"shortest_edge": 128 * 28 * 28, "longest_edge": 768 * 28 * 28}),
    "qwen3-omni": dict(
        QWEN2,
        patch_size=16,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        size={"shortest_edge": 128 * 32 * 32, "longest_edge": 768 * 32 * 32},
    ),
}
QWEN3 = dict(
    size={"shortest_edge": 4096, "longest_edge": 25165824},
    patch_size=16,
    temporal_patch_size=2,
    merge_size=2,
    image_mean=[0.5, 0.5, 0.5],
    image_std=[0.5, 0.5, 0.5],
    fps=2,
    min_frames=4,
    max_frames=768,
    do_sample_frames=True,
)


def run(job: dict) -> dict:
    item = dict(job["item"])
    if job["model"] in ("qwen2-vl", "qwen2.5-vl", *OMNI):
        _VideoReader.fps[job["frames"]] = job["fps"]
        ele = {"type": "video", "video": job["frames"], **item}
        settings = OMNI.get(job["model"], QWEN2)
        (video, metadata), sample_fps = vision_process.fetch_video(
            ele, image_patch_size=settings["patch_size"], return_video_sample_fps=True, return_video_metadata=True
        )
        if job["model"] in OMNI:
            settings = {k: v for k, v in settings.items() if k not in ("min_pixels", "max_pixels")}
        processor = Qwen2VLVideoProcessor(**settings)
        kept = processor(videos=[video], do_sample_frames=False, do_resize=False, return_tensors="np")
        again = processor(videos=[video], do_sample_frames=False, return_tensors="np")
        if (kept["video_grid_thw"] != again["video_grid_thw"]).any():
            raise ValueError(f"the processor resizes {tuple(video.shape[2:])} frames again")
        # What qwen-vl-utils hands the processor: frames it resized with torchvision's v1 resize
        # (a float32 interpolation rounded to uint8), which the processor keeps at their size.
        utils = processor(videos=[video], do_sample_frames=False, cap_pixels_per_frame=False, return_tensors="np")
        # The same frames at the same size through the processor's own resize (torch's uint8
        # bicubic), then its normalize and patchify.
        indices = metadata["frames_indices"]
        frames = torch.from_numpy(np.load(job["frames"])[indices]).permute(0, 3, 1, 2)
        resized = TorchvisionBackend.resize(
            processor,
            frames,
            SizeDict(height=video.shape[2], width=video.shape[3]),
            resample=PILImageResampling.BICUBIC,
        )
        out = processor(videos=[resized], do_resize=False, do_sample_frames=False, return_tensors="np")
        return {
            "pixel_values_videos": out["pixel_values_videos"],
            "video_grid_thw": out["video_grid_thw"][0],
            "pixel_values_utils": utils["pixel_values_videos"],
            "indices": np.asarray(indices),
            # Qwen3OmniMoeProcessor: temporal_patch_size / the fps it is given (the item's, else
            # the rate qwen-omni-utils sampled at by default); the others: / the rate kept.
            "second_per_grid_t": np.asarray(2 / (item.get("fps", 2.0) if job["model"] == "qwen3-omni" else sample_fps)),
        }
    frames = torch.from_numpy(np.load(job["frames"])).permute(0, 3, 1, 2)
    metadata = VideoMetadata(
        total_num_frames=len(frames),
        fps=job["fps"],
        width=frames.shape[3],
        height=frames.shape[2],
        duration=len(frames) / job["fps"],
    )
    kwargs = {"num_frames": item.pop("nframes"), "fps": None} if "nframes" in item else {}
    size = dict(QWEN3["size"])
    if "min_pixels" in item:
        size["shortest_edge"] = item.pop("min_pixels")
    if "max_pixels" in item:
        size["longest_edge"] = item.pop("max_pixels")
    processor = Qwen3VLVideoProcessor(**{**QWEN3, "size": size})
    out = processor(
        videos=[frames],
        video_metadata=[metadata],
        return_metadata=True,
        cap_pixels_per_frame=False,
        return_tensors="np",
        **kwargs,
        **item,
    )
    indices = list(out["video_metadata"][0].frames_indices)
    timestamps = Qwen3VLProcessor._calculate_timestamps(None, list(indices), job["fps"], 2)
    return {
        "pixel_values_videos": out["pixel_values_videos"],
        "video_grid_thw": out["video_grid_thw"][0],
        "indices": np.asarray(indices),
        "timestamps": np.asarray(timestamps),
    }


def main(run_job=run) -> None:
    """Runs each job of JOBS.json (argv[1]) through `run_job`, writing OUT_DIR (argv[2])/<i>.npz or <i>.err."""
    jobs = json.loads(Path(sys.argv[1]).read_text())
    out_dir = Path(sys.argv[2])
    for i, job in enumerate(jobs):
        try:
            np.savez(out_dir / f"{i}.npz", **run_job(job))
        except Exception as e:  # the reference's refusal is an expected outcome: recorded, compared
            (out_dir / f"{i}.err").write_text(f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
