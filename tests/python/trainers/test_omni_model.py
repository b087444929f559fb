"""Issue 36: Qwen2.5-Omni batches as its thinker trains on them. A tiny randomly initialised
Qwen2.5-Omni thinker (examples/tiny_models.py: width 64, a two-layer audio encoder, CPU) takes a
default Loader batch (model="qwen2.5-omni") as it is and gives the loss it gives on transformers'
own Qwen2_5OmniProcessor batch of the same samples (images, audio clips, text-only), whose
positions the model computes itself; padding the clips to the batch's longest gives the same loss."""

from __future__ import annotations

import json
from pathlib import Path

import librosa
import numpy as np
import pytest
import tiny_vl
import torch
from audio_clips import ffmpeg, make_clips
from omni_reference import omni_model, omni_processor
from PIL import Image

import mmfeed

MAX_PIXELS = 64 * 28 * 28
SAME = 1e-6  # the same tokens, positions and pixels; features within float32 rounding of the extractor's


def user(*content):
    return {"role": "user", "content": list(content)}


MESSAGES = {
    "speech": [
        user({"type": "audio", "audio": "speech-22k.wav"}, {"type": "text", "text": "What is said?"}),
        {"role": "assistant", "content": "That data is needed."},
    ],
    "picture-and-tone": [
        user(
            {"type": "image", "image": "photo.png"},
            {"type": "audio", "audio": "tones-16k-float.wav"},
            {"type": "text", "text": "Do they match?"},
        ),
        {"role": "assistant", "content": "No."},
        user({"type": "text", "text": "And this?"}, {"type": "audio", "audio": "tones-44k-stereo.wav"}),
        {"role": "assistant", "content": "Two tones."},
    ],
    "text": [user({"type": "text", "text": "Hi"}), {"role": "assistant", "content": "Hello."}],
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = make_clips(tmp_path_factory.mktemp("omni-model"))
    rng = np.random.default_rng(36)
    Image.fromarray(rng.integers(0, 256, (90, 120, 3), dtype=np.uint8)).save(root / "photo.png")
    with open(root / "omni.jsonl", "w") as f:
        for sid, messages in MESSAGES.items():
            f.write(json.dumps({"id": sid, "messages": messages}) + "\n")
    omni = omni_model("qwen2.5-omni")
    (root / "tokenizer.json").write_text(omni.json)
    return root, omni


def processor_batch(processor, root: Path, ids: list[str]) -> dict:
    texts, images, clips = [], [], []
    for sid in ids:
        texts.append(processor.apply_chat_template(MESSAGES[sid], tokenize=False))
        for m in MESSAGES[sid]:
            for c in m["content"] if isinstance(m["content"], list) else []:
                if c["type"] == "image":
                    images.append(Image.open(root / c["image"]).convert("RGB"))
                elif c["type"] == "audio":
                    clips.append(librosa.load(root / c["audio"], sr=16000)[0])  # qwen-omni-utils' loader
    return dict(processor(text=texts, images=images or None, audio=clips or None, return_tensors="pt", padding=True))


def loader_batch(root, **options) -> mmfeed.Batch:
    with mmfeed.Loader(
        root / "omni.jsonl",
        tokenizer=root / "tokenizer.json",
        model="qwen2.5-omni",
        max_pixels=MAX_PIXELS,
        batch_size=len(MESSAGES),
        shuffle=False,
        **options,
    ) as loader:
        (batch,) = list(loader)
    return batch


def test_a_default_batch_trains_as_the_processors_batch(data):
    root, omni = data
    model = tiny_vl.tiny_model("qwen2.5-omni")
    batch = loader_batch(root)
    assert batch["sample_ids"] == list(MESSAGES)
    ref = processor_batch(omni_processor(omni, MAX_PIXELS), root, batch["sample_ids"])
    assert torch.equal(batch["input_ids"], ref["input_ids"])
    assert torch.equal(batch["attention_mask"], ref["attention_mask"])
    assert torch.equal(batch["feature_attention_mask"], ref["feature_attention_mask"])
    assert torch.equal(batch["image_grid_thw"], ref["image_grid_thw"])
    assert batch["input_features"].shape == ref["input_features"].shape
    assert (batch["input_features"] - ref["input_features"]).abs().max() < 1e-3  # float32 STFTs apart
    ours = tiny_vl.model_loss(model, batch)
    theirs = tiny_vl.model_loss(model, ref, labels=batch["labels"])
    assert torch.isfinite(ours)
    assert abs(ours - theirs) <= SAME * abs(theirs)
    longest = loader_batch(root, audio_padding="longest")
    assert longest["input_features"].shape[-1] == int(batch["feature_attention_mask"].sum(-1).max())
    assert abs(tiny_vl.model_loss(model, longest) - ours) <= SAME * abs(ours)


def test_videos_with_their_soundtracks_train_as_the_model_places_them(data):
    """use_audio_in_video: the Loader's positions for videos interleaved with their soundtracks are
    the ones the thinker computes itself (get_rope_index(use_audio_in_video=True) from the batch's
    feature lengths and video_second_per_grid), so the loss is the same with or without them."""
    root, _ = data
    ffmpeg(
        "-f", "lavfi", "-i", "testsrc2=size=96x64:rate=10:duration=5",
        "-f", "lavfi", "-i", "sine=frequency=300:beep_factor=3:duration=5",
        "-c:v", "libx264", "-c:a", "aac", "-shortest", root / "talk.mp4",
    )  # fmt: skip
    lines = [
        {"id": "heard", "messages": [user({"type": "video", "video": "talk.mp4"}), MESSAGES["text"][1]]},
        {
            "id": "with-clip",
            "messages": [
                user(
                    {"type": "audio", "audio": "speech-22k.wav"},
                    {"type": "video", "video": "talk.mp4", "video_start": 0.5, "video_end": 4.0},
                    {"type": "text", "text": "Same?"},
                ),
                {"role": "assistant", "content": "No."},
            ],
        },
    ]
    (root / "soundtracks.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    model = tiny_vl.tiny_model("qwen2.5-omni")
    with mmfeed.Loader(
        root / "soundtracks.jsonl",
        tokenizer=root / "tokenizer.json",
        model="qwen2.5-omni",
        max_pixels=MAX_PIXELS,
        batch_size=2,
        shuffle=False,
        use_audio_in_video=True,
    ) as loader:
        (batch,) = list(loader)
    assert batch["input_features"].shape[0] == 3  # the clip and two soundtracks
    ours = tiny_vl.model_loss(model, batch)
    inputs = batch.model_inputs()
    del inputs["position_ids"]
    with torch.no_grad():
        theirs = model(**inputs, use_audio_in_video=True).loss
    assert torch.isfinite(ours)
    assert abs(ours - theirs) <= SAME * abs(theirs)
