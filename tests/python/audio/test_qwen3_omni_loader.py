"""Qwen3-Omni in the Loader (issue 36), model="qwen3-omni" (its Thinking template): each sample
equal to transformers' own Qwen3OmniMoeProcessor called on that sample (images at patch 16, clips
padded to the sample's longest, audio tokens by its chunked rule), labels as Qwen's SFT recipe,
positions as the model's get_rope_index; batches of several samples pad the clips to the batch's
longest (the frames past a clip's own are masked out); bad clips named."""

from __future__ import annotations

import json

import numpy as np
import pytest
from audio_clips import loaded_clip, omni_set
from conftest import ffmpeg
from omni_reference import audio_tokens_of, omni_processor, reference, rope_index
from PIL import Image
from test_audio_features import assert_close_to_reference
from test_audio_loader import audio, text, user
from test_audio_loader import load as load_omni

import mmfeed

MAX_PIXELS = 64 * 32 * 32
TEMPLATE = "qwen3-omni-thinking"


REPLY = {"role": "assistant", "content": "Noted."}
# id: (manifest line, the messages transformers' template takes (None: the line's), the clips as
# (name, start, end)). "pair" holds a short clip beside a longer one: padded to the longer, the
# short clip's last partial hop counts as a frame (ceil), where alone it would not (floor).
SAMPLES = {
    "said": ({"messages": [user(audio("speech-22k.wav"), text("What is said?")), REPLY]}, None, [("speech-22k.wav",)]),
    "pair": (
        {"messages": [user(audio("speech.mp3", audio_start=0.25, audio_end=1.3033), audio("noise-44k.m4a")), REPLY]},
        None,
        [("speech.mp3", 0.25, 1.3033), ("noise-44k.m4a",)],
    ),
    "with-image": (
        {"messages": [user({"type": "image", "image": "photo.png"}, audio("tones-44k-stereo.wav"), text("?")), REPLY]},
        None,
        [("tones-44k-stereo.wav",)],
    ),
    "llamafactory": (
        {
            "messages": [{"role": "user", "content": "<audio>Then <audio>."}, REPLY],
            "audios": ["speech.opus", "tones-16k-float.wav"],
        },
        [user(audio("speech.opus"), text("Then "), audio("tones-16k-float.wav"), text(".")), REPLY],
        [("speech.opus",), ("tones-16k-float.wav",)],
    ),
    "text-only": ({"messages": [user(text("Hi")), REPLY]}, None, []),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3-omni")
    return root, omni_set(root, {sid: line for sid, (line, _, _) in SAMPLES.items()}, TEMPLATE)


def load(root, manifest="omni.jsonl", **options):
    return load_omni(root, manifest, **{"model": "qwen3-omni", "max_pixels": MAX_PIXELS, **options})


def test_samples_equal_the_processor_and_model(data):
    root, omni = data
    batches, errors = load(root)
    assert errors == []
    assert [b["sample_ids"][0] for b in batches] == list(SAMPLES)
    processor = omni_processor(omni, MAX_PIXELS)
    for b in batches:
        line, messages, clips = SAMPLES[b["sample_ids"][0]]
        messages = messages or line["messages"]
        waves = [loaded_clip(root, *clip) for clip in clips]
        images = [Image.open(root / "photo.png").convert("RGB")] if b["sample_ids"][0] == "with-image" else None
        rendered = processor.apply_chat_template(messages, tokenize=False)
        want = processor(text=[rendered], images=images, audio=waves or None, return_tensors="np", padding=True)
        np.testing.assert_array_equal(b["input_ids"], want["input_ids"])
        grids = want["image_grid_thw"].tolist() if images else []
        if images:
            assert b["image_grid_thw"].tolist() == grids
            np.testing.assert_allclose(b["pixel_values"], want["pixel_values"], rtol=0, atol=1e-6)
        frames = []
        if waves:
            frames = want["feature_attention_mask"].sum(-1).tolist()
            np.testing.assert_array_equal(b["feature_attention_mask"], want["feature_attention_mask"])
            assert_close_to_reference(b["input_features"], want["input_features"])
            # mmfeed's own processor on the same clips: the same bytes
            np.testing.assert_array_equal(
                b["input_features"], mmfeed.AudioProcessor("qwen3-omni")(waves)["input_features"]
            )
        else:
            assert "input_features" not in b
        sizes = {"image": [t * h * w // 4 for t, h, w in grids], "video": [], "audio": []}
        sizes["audio"] = [audio_tokens_of(TEMPLATE, f) for f in frames]
        _, ids, labels = reference(omni, messages, None, sizes)
        np.testing.assert_array_equal(b["input_ids"][0], ids)
        np.testing.assert_array_equal(b["labels"][0], labels)
        np.testing.assert_array_equal(b["position_ids"][:, 0], rope_index(omni, ids, grids, [], [], frames))
    # The short clip of "pair" has one frame more beside the longer clip than alone.
    (pair,) = [b for b in batches if b["sample_ids"] == ["pair"]]
    short = loaded_clip(root, "speech.mp3", 0.25, 1.3033)
    assert len(short) % 160 != 0
    alone = processor.feature_extractor([short], return_attention_mask=True, padding=True, return_tensors="np")
    assert pair["feature_attention_mask"][0].sum() == alone["attention_mask"].sum() + 1


def test_batches_pad_to_the_longest_clip_and_agree_however_made(data):
    root, _ = data
    single, _ = load(root)
    by_id = {b["sample_ids"][0]: b for b in single}
    for options in ({}, {"workers": 3}, {"mode": "serial"}, {"token_budget": 4096}):
        (b,), errors = load(root, batch_size=5, **options)
        assert errors == []
        masks = [by_id[s]["feature_attention_mask"] for s in b["sample_ids"] if "input_features" in by_id[s]]
        frames = max(m.sum(-1).max() for m in masks)
        assert b["input_features"].shape[-1] == frames
        k = 0
        for s in b["sample_ids"]:
            mine = by_id[s]
            for clip, mask in zip(mine.get("input_features", []), mine.get("feature_attention_mask", [])):
                valid = int(mask.sum())
                np.testing.assert_array_equal(b["input_features"][k, :, :valid], clip[:, :valid])
                assert b["feature_attention_mask"][k].sum() == valid and b["feature_attention_mask"][k, :valid].all()
                k += 1
        assert k == len(b["input_features"])


def test_configuration_videos_and_bad_clips(data):
    root, omni = data
    for model, template, refusal in (
        ("qwen2.5-omni", TEMPLATE, 'Qwen3-Omni Thinking template needs model="qwen3-omni"'),
        ("qwen3-omni", "qwen2.5-omni", 'Qwen2.5-Omni template needs model="qwen2.5-omni"'),
    ):
        with mmfeed.Loader(
            root / "omni.jsonl", tokenizer=root / "tokenizer.json", model=model, chat_template=template
        ) as loader:
            with pytest.raises(ValueError, match=refusal):
                next(iter(loader))
    (root / "broken.wav").write_bytes((root / "speech-22k.wav").read_bytes()[:30])
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=12:duration=3", "-c:v", "libx264", root / "clip.mp4")
    lines = [
        {"id": "fine", **SAMPLES["said"][0]},
        {"id": "at-one-fps", "messages": [user({"type": "video", "video": "clip.mp4", "fps": 1.0}), REPLY]},
        {"id": "broken", "messages": [user(audio("speech.mp3"), audio("broken.wav")), REPLY]},
        # 2 / 3 s a group x 13 a second: the model's positions are not whole there
        {"id": "at-three-fps", "messages": [user({"type": "video", "video": "clip.mp4", "fps": 3.0}), REPLY]},
    ]
    (root / "bad.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    batches, errors = load(root, "bad.jsonl", max_error_fraction=1.0)
    assert [b["sample_ids"][0] for b in batches] == ["fine", "at-one-fps"]
    one_fps = batches[1]
    assert one_fps["video_second_per_grid"].tolist() == [2.0]  # 26 positions a group
    grids, ids = one_fps["video_grid_thw"].tolist(), one_fps["input_ids"][0].tolist()
    np.testing.assert_array_equal(one_fps["position_ids"][:, 0], rope_index(omni, ids, [], grids, [2.0], []))
    by_id = {e["sample_id"]: e for e in errors}
    assert set(by_id) == {"broken", "at-three-fps"}
    assert by_id["broken"]["stage"] == "audio" and "broken.wav" in by_id["broken"]["reason"]
    assert "not a whole number" in by_id["at-three-fps"]["reason"]
