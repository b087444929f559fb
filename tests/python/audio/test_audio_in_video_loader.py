"""Videos with their soundtracks in the Loader's batches (use_audio_in_video, issue 36),
model="qwen2.5-omni" (and "qwen3-omni" for the first test): each video's audio track read as qwen-omni-utils reads it (mmfeed.load_audio
soundtrack=True, against librosa + audioread in test_audio_load.py), its features against
WhisperFeatureExtractor in order of appearance beside the audio items', its tokens interleaved as
the processor's own replace_video_with_audio_token writes them, positions as the model's
get_rope_index(use_audio_in_video=True); a video without audio keeps its tokens alone (as
transformers' processor keeps it), and the sample's own "use_audio_in_video" overrides the
Loader's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from audio_clips import ffmpeg, make_clips
from omni_reference import DATA, audio_tokens_of, omni_model, reference, rope_index, soundtrack_ids
from test_audio_features import assert_close_to_reference
from test_audio_features import reference as extractor_features

import mmfeed


def user(*content):
    return {"role": "user", "content": list(content)}


def video(name, **keys):
    return {"type": "video", "video": name, **keys}


QWEN3 = DATA / "qwen3-tokenizer" / "tokenizer.json"
TEMPLATES = {"qwen2.5-omni": "qwen2.5-omni", "qwen3-omni": "qwen3-omni-thinking"}
REPLY = {"role": "assistant", "content": "A tone, rising."}

# id: (manifest line, the media in order as (kind, name, crop), whether its videos bring their
# soundtracks when the Loader's use_audio_in_video is on).
SAMPLES = {
    "heard": ({"messages": [user(video("talk.mp4"), {"type": "text", "text": "What is heard?"}), REPLY]}, True),
    "cropped-with-audio": (
        {
            "messages": [
                user(
                    {"type": "audio", "audio": "speech-22k.wav"},
                    video("talk.mp4", video_start=1.0, video_end=5.5),
                    {"type": "text", "text": "Same voice?"},
                ),
                REPLY,
            ]
        },
        True,
    ),
    "silent": ({"messages": [user(video("silent.mp4"), {"type": "text", "text": "And here?"}), REPLY]}, False),
    "declined": (
        {"use_audio_in_video": False, "messages": [user(video("talk.mp4"), {"type": "text", "text": "?"}), REPLY]},
        False,
    ),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = make_clips(tmp_path_factory.mktemp("soundtracks"))
    # 6 s: a 3-chunk soundtrack (150 audio tokens) beside 6 temporal groups at fps 2.
    ffmpeg(
        "-f", "lavfi", "-i", "testsrc2=size=96x64:rate=10:duration=6",
        "-f", "lavfi", "-i", "sine=frequency=300:beep_factor=3:duration=6:sample_rate=22050",
        "-c:v", "libx264", "-c:a", "aac", "-shortest", root / "talk.mp4",
    )  # fmt: skip
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10:duration=2", "-c:v", "libx264", root / "silent.mp4")
    with open(root / "soundtracks.jsonl", "w") as f:
        for sid, (line, _) in SAMPLES.items():
            f.write(json.dumps({"id": sid, **line}) + "\n")
    omni = omni_model("qwen2.5-omni")
    (root / "tokenizer.json").write_text(omni.json)
    (root / "qwen3-omni-tokenizer.json").write_text(omni_model(TEMPLATES["qwen3-omni"]).json)
    return root, omni


def load(root, manifest="soundtracks.jsonl", **options):
    options = {
        "shuffle": False,
        "batch_size": 1,
        "model": "qwen2.5-omni",
        "tokenizer": root / "tokenizer.json",
        **options,
    }
    with mmfeed.Loader(root / manifest, max_pixels=64 * 28 * 28, tensors="np", **options) as loader:
        return [dict(b) for b in loader], loader.errors()


def clips_of(root, messages, soundtracks):
    """The sample's clips in order of appearance: audio items, and videos' soundtracks if asked."""
    out = []
    for item in messages[0]["content"]:
        if item["type"] == "audio":
            out.append(mmfeed.load_audio(root / item["audio"]))
        elif item["type"] == "video" and soundtracks and item["video"] != "silent.mp4":
            start, end = item.get("video_start"), item.get("video_end")
            out.append(mmfeed.load_audio(root / item["video"], start=start, end=end, soundtrack=True))
    return out


@pytest.mark.parametrize("model", list(TEMPLATES))
def test_soundtracks_equal_the_processor_and_model(data, model):
    root, omni = data
    tokenizer = {"tokenizer": root / "qwen3-omni-tokenizer.json"} if model == "qwen3-omni" else {}
    omni = omni_model(TEMPLATES[model])
    batches, errors = load(root, use_audio_in_video=True, model=model, **tokenizer)
    assert errors == []
    assert [b["sample_ids"][0] for b in batches] == list(SAMPLES)
    interleaved = 0
    for b in batches:
        line, soundtracks = SAMPLES[b["sample_ids"][0]]
        messages = line["messages"]
        clips = clips_of(root, messages, soundtracks)
        grids = b["video_grid_thw"].tolist()
        seconds = b["video_second_per_grid"].tolist()
        frames = []
        if clips:
            want = extractor_features(clips, model)
            frames = want["attention_mask"].sum(-1).tolist()
            np.testing.assert_array_equal(b["feature_attention_mask"], want["attention_mask"])
            assert_close_to_reference(b["input_features"], want["input_features"])
        else:
            assert "input_features" not in b
        tokens = [audio_tokens_of(omni.template, f) for f in frames]
        has_audio_item = any(item["type"] == "audio" for item in messages[0]["content"])
        audio_tokens = tokens[:1] if has_audio_item else []
        track_tokens = tokens[len(audio_tokens) :]
        if soundtracks:
            videos = [soundtrack_ids(omni, g, s, n) for g, s, n in zip(grids, seconds, track_tokens)]
            interleaved += sum(ids.count(omni.ids["audio"]) > 50 for ids in videos)  # more than one chunk
        else:
            videos = [t * h * w // 4 for t, h, w in grids]
        _, ids, labels = reference(omni, messages, None, {"image": [], "video": videos, "audio": audio_tokens})
        np.testing.assert_array_equal(b["input_ids"][0], ids)
        np.testing.assert_array_equal(b["labels"][0], labels)
        types = np.select([b["input_ids"][0] == omni.ids[k] for k in ("image", "video", "audio")], [1, 2, 3], 0)
        np.testing.assert_array_equal(b["mm_token_type_ids"][0], types)
        want_positions = rope_index(omni, ids, [], grids, seconds, frames, use_audio_in_video=soundtracks)
        np.testing.assert_array_equal(b["position_ids"][:, 0], want_positions)
    assert interleaved == 2


def test_the_samples_own_flag_and_the_loaders_default(data):
    root, _ = data
    off, _ = load(root)
    on, _ = load(root, use_audio_in_video=True)
    by_id = {b["sample_ids"][0]: b for b in on}
    for b in off:  # without the option only the soundtrack-free samples are unchanged
        sid = b["sample_ids"][0]
        same = np.array_equal(b["input_ids"], by_id[sid]["input_ids"])
        assert same == (not SAMPLES[sid][1]), sid
    # A sample that asks for its soundtrack gets it without the Loader's option.
    (root / "asks.jsonl").write_text(json.dumps({"id": "asks", "use_audio_in_video": True, **SAMPLES["heard"][0]}))
    (asks,), _ = load(root, "asks.jsonl")
    np.testing.assert_array_equal(asks["input_ids"], by_id["heard"]["input_ids"])
    np.testing.assert_array_equal(asks["input_features"], by_id["heard"]["input_features"])


def test_batches_agree_however_made(data):
    root, _ = data
    single, _ = load(root, use_audio_in_video=True)
    clips = np.concatenate([b["input_features"] for b in single if "input_features" in b])
    for options in ({}, {"workers": 3}, {"mode": "serial"}, {"audio_padding": "longest"}):
        (b,), errors = load(root, use_audio_in_video=True, batch_size=4, **options)
        assert errors == []
        frames = b["input_features"].shape[-1]
        np.testing.assert_array_equal(b["input_features"], clips[..., :frames])


@pytest.mark.parametrize("layout", ["hf", "thd"])
def test_packed_rows_hold_each_sample_as_the_padded_batch(data, layout):
    """Packed (transformers' layout or Megatron's THD), each sample of the row has the ids and
    positions of its padded row, and the row's clips are its samples' in the row's order."""
    root, _ = data
    (padded,), _ = load(root, use_audio_in_video=True, batch_size=4)
    rows, errors = load(root, use_audio_in_video=True, token_budget=8192, packed_format=layout, pad_to_multiple_of=8)
    assert errors == [] and len(rows) == 1
    (row,) = rows
    positions = row["position_ids"][-3:, 0]  # hf: the text row first
    starts = row["cu_seq_lens_q"] if layout == "hf" else row["cu_seqlens_padded"]
    for k, sid in enumerate(row["sample_ids"]):
        i = padded["sample_ids"].index(sid)
        n = int(padded["attention_mask"][i].sum())
        at = int(starts[k])
        np.testing.assert_array_equal(row["input_ids"][0, at : at + n], padded["input_ids"][i, :n])
        np.testing.assert_array_equal(positions[:, at : at + n], padded["position_ids"][:, i, :n])
    single, _ = load(root, use_audio_in_video=True)
    none = np.zeros((0, 128, 30000), np.float32)
    clips = {b["sample_ids"][0]: b.get("input_features", none) for b in single}
    np.testing.assert_array_equal(row["input_features"], np.concatenate([clips[s] for s in row["sample_ids"]]))


def test_what_the_soundtracks_refuse(data):
    root, _ = data
    with mmfeed.Loader(
        root / "soundtracks.jsonl", tokenizer=root / "tokenizer.json", model="qwen2.5-vl", use_audio_in_video=True
    ) as loader:
        with pytest.raises(ValueError, match=r"use_audio_in_video.*needs a model with audio"):
            next(iter(loader))

    def errors_of(name, line, **options):  # beside a sample that loads, so the run goes on
        fine = {"id": "fine", "messages": [user({"type": "text", "text": "Hi"}), REPLY]}
        (root / name).write_text(json.dumps(fine) + "\n" + json.dumps(line) + "\n")
        batches, errors = load(root, name, max_error_fraction=1.0, **options)
        assert [b["sample_ids"][0] for b in batches] == ["fine"] and len(errors) == 1
        return errors[0]

    asks = errors_of(
        "asks-vl.jsonl",
        {"id": "asks", "use_audio_in_video": True, **SAMPLES["heard"][0]},
        model="qwen2.5-vl",
        tokenizer=QWEN3,
    )
    assert asks["stage"] == "manifest" and "use_audio_in_video" in asks["reason"]
    bad = errors_of("bad-flag.jsonl", {"id": "bad", "use_audio_in_video": "yes", **SAMPLES["heard"][0]})
    assert "use_audio_in_video must be true or false, got a string" in bad["reason"]
    # A soundtrack that does not decode is the sample's error, named.
    data_bytes = (root / "talk.mp4").read_bytes()
    (root / "cut.mp4").write_bytes(data_bytes[: len(data_bytes) // 3])
    cut = errors_of(
        "cut.jsonl",
        {"id": "cut", "messages": [user(video("cut.mp4"), {"type": "text", "text": "?"}), REPLY]},
        use_audio_in_video=True,
    )
    assert cut["sample_id"] == "cut" and cut["stage"] in ("audio", "video") and "cut.mp4" in cut["reason"], cut
