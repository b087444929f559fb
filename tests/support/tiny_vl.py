"""Tiny randomly initialised Qwen-VL models and transformers' own processors, for tests of what a
batch trains: the models of examples/tiny_models.py (Qwen2-VL, Qwen2.5-VL and Qwen3-VL at width 64),
and the family's processor (the PIL image backend, the project's tokenizer and chat template) to
make the reference batches.

    model = tiny_model("qwen2-vl", attn="sdpa")          # the same weights for the same seed
    processor = hf_processor("qwen2-vl", max_pixels=100_000)
    batch = processor_batch(processor, [sample, ...], manifest_dir)   # transformers' padded batch
    loss = model(**batch, labels=...).loss
"""

from __future__ import annotations

import io
from pathlib import Path
from unittest import mock

import torch
from PIL import Image, ImageOps
from tiny_models import FAMILIES, tiny_config, tiny_model  # noqa: F401  (examples/tiny_models.py)

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
TEMPLATES = ROOT / "src" / "text" / "templates"
_converted: dict[str, Path] = {}


def tokenizer_of(family: str) -> Path:
    """The family's tokenizer.json: the project's Qwen3 one, or (qwen3.5) the Qwen3.5 vocabulary
    converted by scripts/qwen3_5_tokenizer.py, once per process into a directory removed at exit."""
    if family != "qwen3.5":
        return TOKENIZER
    if family not in _converted:
        import atexit
        import shutil
        import sys
        import tempfile

        sys.path.insert(0, str(ROOT / "scripts"))
        import qwen3_5_tokenizer

        folder = Path(tempfile.mkdtemp(prefix="mmfeed-qwen3.5-"))
        atexit.register(shutil.rmtree, folder, True)
        qwen3_5_tokenizer.main(str(folder / "tokenizer.json"))
        _converted[family] = folder / "tokenizer.json"
    return _converted[family]


def hf_processor(family: str, max_pixels: int):
    """transformers' processor for `family`: the PIL image processor at the family's patch size,
    mean and std, the project's tokenizer, and the family's chat template."""
    from transformers import Qwen2TokenizerFast
    from transformers.models.qwen2_5_vl.processing_qwen2_5_vl import Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
    from transformers.processing_utils import ProcessorMixin

    tok = Qwen2TokenizerFast(tokenizer_file=str(tokenizer_of(family)), pad_token="<|endoftext|>", padding_side="right")
    if family in ("qwen3-vl", "qwen3.5"):
        images = Qwen2VLImageProcessorPil(
            patch_size=16,
            merge_size=2,
            temporal_patch_size=2,
            image_mean=[0.5] * 3,
            image_std=[0.5] * 3,
            size={"shortest_edge": 65536, "longest_edge": max_pixels},
        )
        cls, template = Qwen3VLProcessor, "qwen3_vl.jinja" if family == "qwen3-vl" else "qwen3_5.jinja"
    else:
        images = Qwen2VLImageProcessorPil(size={"shortest_edge": 56 * 56, "longest_edge": max_pixels})
        cls = Qwen2VLProcessor if family == "qwen2-vl" else Qwen2_5_VLProcessor
        template = "qwen2_vl.jinja"
    # The processors check their image and video processor classes by name among the
    # torchvision-backed ones, which this environment lacks; the PIL image processor is the
    # reference mmfeed matches (test_vision.py), and these batches hold no video.
    with mock.patch.object(ProcessorMixin, "check_argument_for_proper_class", lambda self, name, arg: None):
        return cls(
            image_processor=images,
            tokenizer=tok,
            video_processor=None,
            chat_template=(TEMPLATES / template).read_text(),
        )


def hf_messages(sample: dict, base: Path) -> list:
    """The sample's messages with each image opened as transformers' load_image does."""
    out = []
    for m in sample["messages"]:
        if isinstance(m["content"], list):
            content = []
            for c in m["content"]:
                if c["type"] == "image":
                    with Image.open(io.BytesIO((base / c["image"]).read_bytes())) as im:
                        c = {"type": "image", "image": ImageOps.exif_transpose(im).convert("RGB")}
                content.append(c)
            m = {**m, "content": content}
        out.append(m)
    return out


def processor_batch(processor, samples: list[dict], base: Path) -> dict:
    """transformers' padded batch of `samples` (right padding): input_ids, attention_mask,
    mm_token_type_ids, pixel_values, image_grid_thw, as torch tensors."""
    conversations = [hf_messages(s, base) for s in samples]
    out = processor.apply_chat_template(
        conversations, tokenize=True, return_dict=True, return_tensors="pt", processor_kwargs={"padding": True}
    )
    return dict(out)


def model_loss(model, batch: dict, labels: torch.Tensor | None = None) -> torch.Tensor:
    """The model's loss on `batch` (an mmfeed.Batch, or a processor's batch given `labels`),
    without gradients."""
    inputs = batch.model_inputs() if hasattr(batch, "model_inputs") else {**batch, "use_cache": False}
    if labels is not None:
        inputs["labels"] = labels
    with torch.no_grad():
        return model(**inputs).loss


def conversations_manifest(directory: Path, count: int, seed: int) -> Path:
    """`count` generated conversations over the images of a datagen set in `directory`: system
    prompts present and absent, zero to two images per user turn, one to three turns, string and
    list contents. Returns the manifest's path."""
    import json
    import random

    images = sorted(p.relative_to(directory).as_posix() for p in (directory / "images").iterdir())
    rng = random.Random(seed)
    lines = []
    for i in range(count):
        messages = (
            [{"role": "system", "content": rng.choice(["You are terse.", "Describe precisely."])}]
            if rng.random() < 0.5
            else []
        )
        for _ in range(rng.randint(1, 3)):
            content = [{"type": "image", "image": rng.choice(images)} for _ in range(rng.randint(0, 2))]
            content.insert(
                rng.randint(0, len(content)),
                {"type": "text", "text": rng.choice(["What is shown?", "Compare them.", "Zähle die Dinge. 数一数。"])},
            )
            if len(content) == 1 and rng.random() < 0.5:
                content = content[0]["text"]
            messages.append({"role": "user", "content": content})
            messages.append(
                {
                    "role": "assistant",
                    "content": rng.choice(["A cat.", "Two, left and right.", "第一张更亮。", "Yes.\n\nNo."]),
                }
            )
        lines.append(json.dumps({"id": f"conv-{i}", "messages": messages}, ensure_ascii=False))
    manifest = directory / f"conversations-{seed}.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest
