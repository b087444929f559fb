"""Issue 36: the Omni models' batches as their thinkers train on them. A tiny randomly initialised
thinker (examples/tiny_models.py: width 64, a two-layer audio encoder, CPU) takes a default Loader
batch as it is and gives the loss it gives on transformers' own processor's batch of the same
samples (images, audio clips, text-only), whose positions the model computes itself: Qwen2.5-Omni
for the batch at once (padding the clips to the batch's longest gives the same loss), Qwen3-Omni
sample by sample (its processor pads a call's clips to their longest, which can move a clip's last
frame: mmfeed's call is the sample) and then the batch, whose loss is the samples' token-weighted
mean. Videos with their soundtracks: the positions the thinkers compute themselves."""

from __future__ import annotations

import json
from pathlib import Path

import librosa
import pytest
import tiny_vl
import torch
from audio_clips import ffmpeg, omni_set
from omni_reference import omni_model, omni_processor
from PIL import Image

import mmfeed

MAX_PIXELS = 64 * 28 * 28
QWEN3_MAX_PIXELS = 64 * 32 * 32
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
    root = tmp_path_factory.mktemp("omni-model")
    omni = omni_set(root, {sid: {"messages": messages} for sid, messages in MESSAGES.items()}, "qwen2.5-omni")
    (root / "qwen3-omni-tokenizer.json").write_text(omni_model("qwen3-omni-thinking").json)
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


def loader_batches(root, model="qwen2.5-omni", **options) -> list[mmfeed.Batch]:
    tokenizer = root / ("qwen3-omni-tokenizer.json" if model == "qwen3-omni" else "tokenizer.json")
    options = {"max_pixels": MAX_PIXELS, "batch_size": len(MESSAGES), **options}
    with mmfeed.Loader(root / "omni.jsonl", tokenizer=tokenizer, model=model, shuffle=False, **options) as loader:
        return list(loader)


def loader_batch(root, **options) -> mmfeed.Batch:
    (batch,) = loader_batches(root, **options)
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


def test_qwen3_omni_samples_train_as_the_processors(data):
    root, _ = data
    model = tiny_vl.tiny_model("qwen3-omni")
    processor = omni_processor(omni_model("qwen3-omni-thinking"), QWEN3_MAX_PIXELS)
    total, tokens = 0.0, 0
    for batch in loader_batches(root, "qwen3-omni", max_pixels=QWEN3_MAX_PIXELS, batch_size=1):
        ref = processor_batch(processor, root, batch["sample_ids"])
        assert torch.equal(batch["input_ids"], ref["input_ids"])
        for key in ("image_grid_thw", "feature_attention_mask"):
            assert (key in batch) == (key in ref) and (key not in ref or torch.equal(batch[key], ref[key]))
        if "input_features" in ref:
            assert (batch["input_features"] - ref["input_features"]).abs().max() < 1e-3  # float32 STFTs apart
        ours = tiny_vl.model_loss(model, batch)
        theirs = tiny_vl.model_loss(model, ref, labels=batch["labels"])
        assert torch.isfinite(ours)
        assert abs(ours - theirs) <= SAME * abs(theirs), batch["sample_ids"]
        n = int((batch["labels"][:, 1:] != -100).sum())
        total, tokens = total + float(ours) * n, tokens + n
    whole = loader_batch(root, model="qwen3-omni", max_pixels=QWEN3_MAX_PIXELS)
    assert whole["input_features"].shape[-1] == int(whole["feature_attention_mask"].sum(-1).max())
    assert abs(float(tiny_vl.model_loss(model, whole)) - total / tokens) <= 1e-5 * total / tokens


@pytest.mark.parametrize("family", ["qwen2.5-omni", "qwen3-omni"])
def test_videos_with_their_soundtracks_train_as_the_model_places_them(data, family):
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
    model = tiny_vl.tiny_model(family)
    with mmfeed.Loader(
        root / "soundtracks.jsonl",
        tokenizer=root / ("qwen3-omni-tokenizer.json" if family == "qwen3-omni" else "tokenizer.json"),
        model=family,
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
