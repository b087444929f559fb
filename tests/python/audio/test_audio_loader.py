"""Audio in the Loader's batches (issue 36), model="qwen2.5-omni": samples with audio items (and
LLaMA-Factory's <audio> + audios, crops, images beside them) give the input_ids, labels and
mm_token_type_ids of the processor's text expansion (tests/support/omni_reference.py, audio token
counts by transformers' own formula from the extractor's mask), the model's get_rope_index
positions, input_features equal to mmfeed.AudioProcessor's (tested against WhisperFeatureExtractor
in test_audio_features.py; here also against it within that file's tolerance) and its
feature_attention_mask, whichever way the batch is made; bad clips are named and the rest
delivered."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from audio_clips import loaded_clip, omni_set
from omni_reference import DATA, reference, rope_index
from PIL import Image
from test_audio_features import assert_close_to_reference
from test_audio_features import reference as extractor_features
from transformers import Qwen2VLImageProcessorPil
from transformers.models.qwen2_5_omni.processing_qwen2_5_omni import _get_feat_extract_output_lengths

import mmfeed

MAX_PIXELS = 64 * 28 * 28


def user(*content):
    return {"role": "user", "content": list(content)}


def audio(name, **crop):
    return {"type": "audio", "audio": name, **crop}


def text(t):
    return {"type": "text", "text": t}


# id: (manifest line, the messages transformers' template takes, the clips as (name, start, end)).
SAMPLES = {
    "said": (
        {"messages": [user(audio("speech-22k.wav"), text("What is said?")), {"role": "assistant", "content": "Data."}]},
        None,
        [("speech-22k.wav", None, None)],
    ),
    "cropped": (
        {
            "messages": [
                user(audio("speech.mp3", audio_start=0.5, audio_end=2.0), text("And here?")),
                {"role": "assistant", "content": "A model."},
            ]
        },
        None,
        [("speech.mp3", 0.5, 2.0)],
    ),
    "with-image": (
        {
            "messages": [
                user({"type": "image", "image": "photo.png"}, audio("tones-44k-stereo.wav"), text("Match?")),
                {"role": "assistant", "content": "No."},
            ]
        },
        None,
        [("tones-44k-stereo.wav", None, None)],
    ),
    "llamafactory": (
        {
            "messages": [
                {"role": "user", "content": "<audio>Describe, then compare with <audio>."},
                {"role": "assistant", "content": "Noise, then speech."},
            ],
            "audios": ["noise-44k.m4a", "speech.opus"],
        },
        [
            user(audio("noise-44k.m4a"), text("Describe, then compare with "), audio("speech.opus"), text(".")),
            {"role": "assistant", "content": "Noise, then speech."},
        ],
        [("noise-44k.m4a", None, None), ("speech.opus", None, None)],
    ),
    "text-only": ({"messages": [user(text("Hi")), {"role": "assistant", "content": "Hello."}]}, None, []),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("omni")
    return root, omni_set(root, {sid: line for sid, (line, _, _) in SAMPLES.items()}, "qwen2.5-omni")


def load(root, manifest="omni.jsonl", **options):
    """The Loader's batches of `manifest` and its errors (the Qwen3-Omni tests pass model and max_pixels)."""
    options = {"shuffle": False, "batch_size": 1, "model": "qwen2.5-omni", "max_pixels": MAX_PIXELS, **options}
    with mmfeed.Loader(root / manifest, tokenizer=root / "tokenizer.json", tensors="np", **options) as loader:
        return [dict(b) for b in loader], loader.errors()


def test_samples_equal_the_processor_and_model(data):
    root, omni = data
    batches, errors = load(root)
    assert errors == []
    assert [b["sample_ids"][0] for b in batches] == list(SAMPLES)
    images = Qwen2VLImageProcessorPil(max_pixels=MAX_PIXELS)
    for b in batches:
        line, messages, clips = SAMPLES[b["sample_ids"][0]]
        messages = messages or line["messages"]
        samples = [loaded_clip(root, *clip) for clip in clips]
        grids = []
        if b["sample_ids"][0] == "with-image":
            pil = images(Image.open(root / "photo.png").convert("RGB"), return_tensors="np")
            grids = [tuple(pil["image_grid_thw"][0])]
            np.testing.assert_allclose(b["pixel_values"], pil["pixel_values"], rtol=0, atol=1e-6)
        frames, tokens = [], []
        if samples:
            want = extractor_features(samples, "qwen2.5-omni")
            frames = want["attention_mask"].sum(-1).tolist()
            tokens = [int(_get_feat_extract_output_lengths(torch.tensor(f))) for f in frames]
            np.testing.assert_array_equal(b["feature_attention_mask"], want["attention_mask"])
            assert_close_to_reference(b["input_features"], want["input_features"])
            # mmfeed's own processor on the same clips: the same bytes
            mine = mmfeed.AudioProcessor("qwen2.5-omni")(samples)
            np.testing.assert_array_equal(b["input_features"], mine["input_features"])
        else:
            assert "input_features" not in b and "feature_attention_mask" not in b
        sizes = {"image": [t * h * w // 4 for t, h, w in grids], "video": [], "audio": tokens}
        _, ids, labels = reference(omni, messages, None, sizes)
        np.testing.assert_array_equal(b["input_ids"][0], ids)
        np.testing.assert_array_equal(b["labels"][0], labels)
        types = np.select([b["input_ids"][0] == omni.ids[k] for k in ("image", "video", "audio")], [1, 2, 3], 0)
        np.testing.assert_array_equal(b["mm_token_type_ids"][0], types)
        np.testing.assert_array_equal(b["position_ids"][:, 0], rope_index(omni, ids, grids, [], [], frames))


def test_longest_padding_keeps_the_values_and_batches_agree(data):
    root, _ = data
    single, _ = load(root)
    by_id = {b["sample_ids"][0]: b for b in single}

    def expected(ids, key):
        return np.concatenate([by_id[s][key] for s in ids if "input_features" in by_id[s]])

    for options in ({}, {"workers": 3}, {"mode": "serial"}, {"audio_padding": "longest"}, {"token_budget": 4096}):
        batches, errors = load(root, batch_size=5, **options)
        assert errors == [] and len(batches) == 1
        (b,) = batches
        features, masks = (
            expected(b["sample_ids"], "input_features"),
            expected(b["sample_ids"], "feature_attention_mask"),
        )
        frames = masks.sum(-1).max() if options.get("audio_padding") == "longest" else masks.shape[-1]
        assert b["input_features"].shape == (5, 128, frames)
        np.testing.assert_array_equal(b["input_features"], features[..., :frames])
        np.testing.assert_array_equal(b["feature_attention_mask"], masks[:, :frames])


def test_bad_clips_are_named_and_the_rest_delivered(data, tmp_path):
    root, _ = data
    (root / "broken.wav").write_bytes((root / "speech-22k.wav").read_bytes()[:30])
    lines = [
        {"id": "fine", **SAMPLES["said"][0]},
        {"id": "broken", "messages": [user(audio("broken.wav"), text("?")), {"role": "assistant", "content": "."}]},
        {"id": "missing", "messages": [user(audio("nowhere.wav"), text("?")), {"role": "assistant", "content": "."}]},
        {
            "id": "backwards",
            "messages": [
                user(audio("speech.mp3", audio_start=2.0, audio_end=1.0), text("?")),
                {"role": "assistant", "content": "."},
            ],
        },
    ]
    (root / "bad.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    batches, errors = load(root, "bad.jsonl", max_error_fraction=1.0)
    assert [b["sample_ids"][0] for b in batches] == ["fine"]
    by_id = {e["sample_id"]: e for e in errors}
    assert set(by_id) == {"broken", "missing", "backwards"}
    assert by_id["broken"]["stage"] == "audio" and "broken.wav" in by_id["broken"]["reason"]
    assert by_id["missing"]["stage"] == "fetch" and "nowhere.wav" in by_id["missing"]["reason"]
    assert by_id["backwards"]["stage"] == "audio" and "audio_start" in by_id["backwards"]["reason"]


def test_what_the_loader_refuses(data):
    root, _ = data
    for template, refusal in (
        ("qwen3-omni-thinking", 'needs model="qwen3-omni"'),
        ("qwen2.5-omni", 'needs model="qwen2.5-omni"'),
    ):
        with mmfeed.Loader(root / "omni.jsonl", tokenizer=root / "tokenizer.json", chat_template=template) as loader:
            with pytest.raises(ValueError, match=refusal):
                next(iter(loader))  # the engine checks its configuration when it starts
    with mmfeed.Loader(
        root / "omni.jsonl",
        tokenizer=DATA / "qwen3-tokenizer" / "tokenizer.json",
        model="qwen2.5-vl",
        shuffle=False,
        max_error_fraction=1.0,
    ) as loader:
        delivered = [b["sample_ids"][0] for b in loader]
        errors = loader.errors()
    assert delivered == ["text-only"]
    assert {e["sample_id"] for e in errors} == {"said", "cropped", "with-image", "llamafactory"}
    assert all("takes none of" in e["reason"] and e["stage"] == "manifest" for e in errors)
