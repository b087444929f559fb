"""The Python peers' per-sample code: one sample at a time, as users write it with Hugging Face's
processor and tokenizer (bench/pipeline.py runs it in each peer)."""

from __future__ import annotations

import json
from pathlib import Path

IMAGE_PAD = 151655
PAD = 151643


class HFSample:
    """One sample at a time: GET or read each image, HF's Qwen2-VL processor (`backend` "pil":
    Qwen2VLImageProcessorPil; "torchvision": Qwen2VLImageProcessor, which needs torchvision), HF
    tokenizer + chat template, image tokens expanded to the grid. `fetch` and `process` are
    separate so a pipeline can overlap them; `__getitem__` does both."""

    def __init__(
        self,
        manifest: Path,
        tokenizer: Path,
        template: Path,
        max_pixels: int,
        model: str = "qwen2-vl",
        backend: str = "pil",
    ):
        self.base = manifest.parent
        self.samples = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
        self.tokenizer, self.template, self.max_pixels, self.model = tokenizer, template, max_pixels, model
        self.backend = backend
        self._s3 = None

    def __len__(self) -> int:
        return len(self.samples)

    def _client(self):
        if self._s3 is None:
            import boto3
            from botocore.config import Config

            self._s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}, max_pool_connections=64))
        return self._s3

    def fetch(self, i: int) -> tuple[int, list[bytes]]:
        blobs = []
        for m in self.samples[i]["messages"]:
            for c in m["content"] if isinstance(m["content"], list) else []:
                if c["type"] == "image":
                    uri = c["image"]
                    if uri.startswith("s3://"):
                        bucket, key = uri[5:].split("/", 1)
                        blobs.append(self._client().get_object(Bucket=bucket, Key=key)["Body"].read())
                    else:
                        blobs.append((self.base / uri).read_bytes())
        return i, blobs

    def process(self, fetched: tuple[int, list[bytes]]) -> dict:
        import io

        import numpy as np
        from PIL import Image, ImageOps
        from transformers import PreTrainedTokenizerFast

        if not hasattr(self, "proc"):
            if self.backend == "torchvision":
                from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor as Processor
            else:
                from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
                    Qwen2VLImageProcessorPil as Processor,
                )
            # The hub's preprocessor configs: Qwen2/2.5-VL patch 14 with CLIP's mean and std,
            # Qwen3-VL patch 16 with mean and std 0.5 and a larger minimum; merge 2 for both.
            if self.model == "qwen3-vl":
                self.proc = Processor(
                    patch_size=16,
                    image_mean=[0.5] * 3,
                    image_std=[0.5] * 3,
                    size={"shortest_edge": 65536, "longest_edge": self.max_pixels},
                )
            else:
                self.proc = Processor(size={"shortest_edge": 3136, "longest_edge": self.max_pixels})
            self.tok = PreTrainedTokenizerFast(
                tokenizer_file=str(self.tokenizer), chat_template=self.template.read_text()
            )
        i, blobs = fetched
        images = [ImageOps.exif_transpose(Image.open(io.BytesIO(b))).convert("RGB") for b in blobs]
        vision = self.proc(images=images, return_tensors="np")
        ids = self.tok.apply_chat_template(self.samples[i]["messages"], tokenize=True)
        if not isinstance(ids, list):
            ids = ids["input_ids"]
        expanded, grids = [], iter(vision["image_grid_thw"])
        for t in ids:
            expanded += [t] * int(next(grids).prod() // 4) if t == IMAGE_PAD else [t]
        return {
            "input_ids": np.asarray(expanded),
            "pixel_values": vision["pixel_values"],
            "image_grid_thw": vision["image_grid_thw"],
        }

    def __getitem__(self, i: int) -> dict:
        return self.process(self.fetch(i))


def collate(items: list[dict]) -> dict:
    import numpy as np
    import torch

    length = max(len(x["input_ids"]) for x in items)
    ids = np.full((len(items), length), PAD, dtype=np.int64)
    mask = np.zeros((len(items), length), dtype=np.int64)
    for i, x in enumerate(items):
        ids[i, : len(x["input_ids"])] = x["input_ids"]
        mask[i, : len(x["input_ids"])] = 1
    return {
        "input_ids": torch.from_numpy(ids),
        "attention_mask": torch.from_numpy(mask),
        "labels": torch.from_numpy(np.where(mask == 1, ids, -100)),
        "pixel_values": torch.from_numpy(np.concatenate([x["pixel_values"] for x in items])),
        "image_grid_thw": torch.from_numpy(np.concatenate([x["image_grid_thw"] for x in items])),
    }
