"""The peer pipeline bench/video.py times, in the torchvision environment (.venv-tv): PyAV
decoding as transformers does it (`read_video_pyav`: decode up to the last frame kept, convert
the kept ones to RGB), then transformers' video processor (Qwen2VLVideoProcessor or
Qwen3VLVideoProcessor with the hub config) resizing the frames to the size mmfeed planned,
normalizing and patchifying. One thread (torch's and the decoder's), best of REPEAT; the
frames kept are mmfeed's.

Usage (bench/video.py runs it): python bench/video_peer.py JOBS.json REPEAT
JOBS.json: [{"path", "model", "indices", "size": [h, w]}, ...]. Prints one JSON object:
{"torch": version, "results": [{"decode_ms", "process_ms", "grid"}, ...]}.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import av  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers.image_processing_backends import TorchvisionBackend  # noqa: E402
from transformers.image_utils import PILImageResampling, SizeDict  # noqa: E402
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor  # noqa: E402
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor  # noqa: E402
from transformers.video_utils import read_video_pyav  # noqa: E402

_open = av.open


def _open_one_thread(*args, **kwargs):
    """av.open with the video decoder on one thread (PyAV lets FFmpeg pick a thread per core),
    so that both sides decode with the same CPU."""
    container = _open(*args, **kwargs)
    for stream in container.streams.video:
        stream.thread_count = 1
    return container


av.open = _open_one_thread

PROCESSORS = {
    "qwen2-vl": lambda: Qwen2VLVideoProcessor(min_pixels=3136, max_pixels=12845056),
    "qwen2.5-vl": lambda: Qwen2VLVideoProcessor(min_pixels=3136, max_pixels=12845056),
    "qwen3-vl": lambda: Qwen3VLVideoProcessor(
        size={"shortest_edge": 4096, "longest_edge": 25165824}, patch_size=16, image_mean=[0.5] * 3, image_std=[0.5] * 3
    ),
}


def best_of(repeat: int, fn):
    out, best = fn(), float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return out, best * 1e3


def main() -> int:
    jobs, repeat = json.loads(open(sys.argv[1]).read()), int(sys.argv[2])
    torch.set_num_threads(1)
    results = []
    for job in jobs:
        processor = PROCESSORS[job["model"]]()
        indices = job["indices"]
        (video, _), decode_ms = best_of(repeat, lambda: read_video_pyav(job["path"], lambda metadata, **kw: indices))

        def process():
            frames = torch.from_numpy(video).permute(0, 3, 1, 2)
            size = SizeDict(height=job["size"][0], width=job["size"][1])
            resized = TorchvisionBackend.resize(processor, frames, size, resample=PILImageResampling.BICUBIC)
            return processor(videos=[resized], do_resize=False, do_sample_frames=False, return_tensors="np")

        out, process_ms = best_of(repeat, process)
        results.append(
            {"decode_ms": decode_ms, "process_ms": process_ms, "grid": np.asarray(out["video_grid_thw"][0]).tolist()}
        )
    print(json.dumps({"torch": torch.__version__, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
