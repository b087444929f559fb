"""Whole video samples as transformers' processors make them, run in the torchvision environment
(.venv-tv) for test_video_loader.py.

Usage: python video_sample_oracle.py JOBS.json OUT_DIR

Each job is one sample: its model, chat template, tokenizer.json and messages, each video item's
"video" an .npy file holding every frame of the video as mmfeed decoded it (the job's "fps" maps
it to the file's frame rate), each image item's "image" a file. The processor renders the
messages with the template, samples and sizes each video as the model's recipe does (video_oracle.py:
qwen-vl-utils' fetch_video, then the processor's own resize, for Qwen2/2.5-VL; Qwen3VLVideoProcessor
with the sample's video keys for Qwen3-VL), processes the images with the PIL image processor,
expands the video and image tokens (Qwen3-VL's timestamps included) and tokenizes.
Writes OUT_DIR/<i>.npz: input_ids, mm_token_type_ids, pixel_values_videos, video_grid_thw,
pixel_values, image_grid_thw and (Qwen2.5-VL) second_per_grid_ts; or OUT_DIR/<i>.err.
"""

from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps
from transformers import Qwen2TokenizerFast
from transformers.image_processing_backends import TorchvisionBackend
from transformers.image_utils import PILImageResampling, SizeDict
from transformers.models.qwen2_5_vl.processing_qwen2_5_vl import Qwen2_5_VLProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
from transformers.processing_utils import ProcessorMixin
from transformers.video_utils import VideoMetadata
from video_oracle import (  # the decord stand-in, the hub configs, the job loop
    QWEN2,
    QWEN3,
    _VideoReader,
    main,
    vision_process,
)

# The PIL image processor is the one mmfeed matches; the processor's class check only knows the
# torchvision-backed image processors by name.
ProcessorMixin.check_argument_for_proper_class = lambda self, name, arg: None


def items(messages, kind):
    return [c for m in messages if isinstance(m["content"], list) for c in m["content"] if c["type"] == kind]


def load_image(path):
    with Image.open(path) as im:
        return ImageOps.exif_transpose(im).convert("RGB")


def qwen2_videos(job, video_processor):
    """qwen-vl-utils' frame choice and size per video item, the frames resized by the processor."""
    videos, metadata = [], []
    for item in items(job["messages"], "video"):
        _VideoReader.fps[item["video"]] = job["fps"][item["video"]]
        (video, meta), _ = vision_process.fetch_video(
            dict(item), return_video_sample_fps=True, return_video_metadata=True
        )
        frames = torch.from_numpy(np.load(item["video"])[meta["frames_indices"]]).permute(0, 3, 1, 2)
        videos.append(
            TorchvisionBackend.resize(
                video_processor,
                frames,
                SizeDict(height=video.shape[2], width=video.shape[3]),
                resample=PILImageResampling.BICUBIC,
            )
        )
        metadata.append(
            VideoMetadata(
                total_num_frames=meta["total_num_frames"], fps=meta["fps"], frames_indices=list(meta["frames_indices"])
            )
        )
    return videos, metadata, {"do_resize": False, "do_sample_frames": False}


def qwen3_videos(job, keys):
    """Every frame of each video with its metadata; the video processor samples them itself."""
    videos, metadata = [], []
    for item in items(job["messages"], "video"):
        frames = torch.from_numpy(np.load(item["video"])).permute(0, 3, 1, 2)
        fps = job["fps"][item["video"]]
        videos.append(frames)
        metadata.append(
            VideoMetadata(
                total_num_frames=len(frames),
                fps=fps,
                width=frames.shape[3],
                height=frames.shape[2],
                duration=len(frames) / fps,
            )
        )
    kwargs = {"do_sample_frames": True, "cap_pixels_per_frame": False, "return_metadata": True}
    if "nframes" in keys:
        kwargs.update(num_frames=keys["nframes"], fps=None)
    if "fps" in keys:
        kwargs["fps"] = keys["fps"]
    return videos, metadata, kwargs


def run(job: dict) -> dict:
    tok = Qwen2TokenizerFast(tokenizer_file=job["tokenizer"])
    template = Path(job["template"]).read_text()
    model = job["model"]
    if model in ("qwen3-vl", "qwen3.5"):  # Qwen3.5 is served by Qwen3VLProcessor
        # Every video of a sample gets the same keys (one processor call): the first item's.
        keys = {k: v for k, v in (items(job["messages"], "video") or [{}])[0].items() if k not in ("type", "video")}
        size = dict(QWEN3["size"])
        size["shortest_edge"] = keys.get("min_pixels", size["shortest_edge"])
        size["longest_edge"] = keys.get("max_pixels", size["longest_edge"])
        video_processor = Qwen3VLVideoProcessor(**{**QWEN3, "size": size})
        image_processor = Qwen2VLImageProcessorPil(
            patch_size=16,
            merge_size=2,
            temporal_patch_size=2,
            image_mean=[0.5] * 3,
            image_std=[0.5] * 3,
            size={"shortest_edge": 65536, "longest_edge": job["max_pixels"]},
        )
        processor = Qwen3VLProcessor(
            image_processor=image_processor, tokenizer=tok, video_processor=video_processor, chat_template=template
        )
        videos, metadata, videos_kwargs = qwen3_videos(job, keys)
    else:
        video_processor = Qwen2VLVideoProcessor(**QWEN2)
        image_processor = Qwen2VLImageProcessorPil(
            min_pixels=3136, max_pixels=job["max_pixels"], patch_size=14, temporal_patch_size=2, merge_size=2
        )
        cls = Qwen2_5_VLProcessor if model == "qwen2.5-vl" else Qwen2VLProcessor
        processor = cls(
            image_processor=image_processor, tokenizer=tok, video_processor=video_processor, chat_template=template
        )
        videos, metadata, videos_kwargs = qwen2_videos(job, video_processor)
    text = processor.apply_chat_template(job["messages"], tokenize=False)
    images = [load_image(c["image"]) for c in items(job["messages"], "image")]
    out = processor(
        text=[text],
        images=images or None,
        videos=videos or None,
        video_metadata=metadata or None,
        videos_kwargs=videos_kwargs,
        return_tensors="np",
        return_mm_token_type_ids=True,
    )
    result = {
        "input_ids": out["input_ids"][0],
        "mm_token_type_ids": out["mm_token_type_ids"][0],
        "pixel_values_videos": out.get("pixel_values_videos", np.zeros((0, 1), np.float32)),
        "video_grid_thw": out.get("video_grid_thw", np.zeros((0, 3), np.int64)),
        "pixel_values": out.get("pixel_values", np.zeros((0, 1), np.float32)),
        "image_grid_thw": out.get("image_grid_thw", np.zeros((0, 3), np.int64)),
    }
    if "second_per_grid_ts" in out:
        result["second_per_grid_ts"] = np.asarray(out["second_per_grid_ts"], np.float64)
    return result


if __name__ == "__main__":
    main(run)
