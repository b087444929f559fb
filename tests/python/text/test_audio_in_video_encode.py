"""Qwen2.5-Omni's audio of videos (use_audio_in_video, issue 36) in SFT encoding: each video that
brings its soundtrack is written as transformers' Qwen2_5OmniProcessor writes it (its own
replace_video_with_audio_token: <|audio_bos|>, the video's tokens and the soundtrack's interleaved
in 2-second chunks, <|audio_eos|>, inside the video's vision bounds), and positioned as the model's
get_rope_index(use_audio_in_video=True) numbers it. Tokenizer and reference:
tests/support/omni_reference.py."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from chat_samples import generated
from omni_reference import omni_model, reference, rope_index, soundtrack_ids
from transformers.models.qwen2_5_omni.processing_qwen2_5_omni import _get_feat_extract_output_lengths

import mmfeed

CONVERSATIONS = 150
# Seconds per temporal group (temporal_patch_size / fps): the processor's default fps 2, others,
# and fps 0.5, whose groups lie 100 positions apart: chunks of one token inside a group.
STEPS = [1.0, 0.5, 2 / 3, 0.4, 1.2, 2 / 7, 4.0]


@pytest.fixture(scope="module")
def omni():
    return omni_model("qwen2.5-omni")


def media_kinds(msgs):
    kinds = []
    for m in msgs:
        for item in m.get("content") if isinstance(m.get("content"), list) else []:
            if "image" in item or "image_url" in item:
                kinds.append("image")
            elif "video" in item:
                kinds.append("video")
            elif "audio" in item or "audio_url" in item:
                kinds.append("audio")
    return kinds


def tokens_of(frames):
    return int(_get_feat_extract_output_lengths(torch.tensor(frames)))


def test_videos_with_their_soundtracks_encode_as_the_processor_and_model(omni):
    rng = random.Random(363)
    encoded = with_soundtrack = 0
    for msgs, tools in generated(CONVERSATIONS, seed=364, audio=True):
        kinds = media_kinds(msgs)
        if "video" not in kinds:
            continue
        images = [(1, 2 * rng.randint(1, 4), 2 * rng.randint(1, 5)) for k in kinds if k == "image"]
        videos = [(rng.randint(1, 9), 2 * rng.randint(1, 3), 2 * rng.randint(1, 3)) for k in kinds if k == "video"]
        seconds = [rng.choice(STEPS) for _ in videos]
        # Feature frames of each audio item and each video's soundtrack, in order of appearance
        # (the model's audio_seqlens): up to 80 s, 40 chunks.
        frames = [rng.randint(8, 8000) for k in kinds if k in ("audio", "video")]
        audio_frames = [f for f, k in zip(frames, [k for k in kinds if k != "image"]) if k == "audio"]
        track_frames = [f for f, k in zip(frames, [k for k in kinds if k != "image"]) if k == "video"]
        sizes = {
            "image": [t * h * w // 4 for t, h, w in images],
            "audio": [tokens_of(f) for f in audio_frames],
            "video": [soundtrack_ids(omni, g, s, tokens_of(f)) for g, s, f in zip(videos, seconds, track_frames)],
        }
        kwargs = dict(
            video_grids=videos,
            second_per_grid_ts=seconds,
            audio_tokens=sizes["audio"],
            video_audio_tokens=[tokens_of(f) for f in track_frames],
            template="qwen2.5-omni",
            tools=tools,
            mrope=True,
        )
        text, ids, labels = reference(omni, msgs, tools, sizes)
        if any(text.count(t) != kinds.count(k) for k, t in (("image", "<|IMAGE|>"), ("video", "<|VIDEO|>"))):
            continue  # media where the template prints none (test_omni_encode.py checks the refusal)
        out = mmfeed.encode_conversation(msgs, images, omni.tok, **kwargs)
        assert out["input_ids"].tolist() == ids, msgs
        assert out["labels"].tolist() == labels, msgs
        want = rope_index(omni, ids, images, videos, seconds, frames, use_audio_in_video=True)
        np.testing.assert_array_equal(out["position_ids"], want.astype(np.int64))
        encoded += 1
        with_soundtrack += len(videos)
    assert encoded > 20 and with_soundtrack > 30


CHAT = [
    {
        "role": "user",
        "content": [
            {"type": "video", "video": "a.mp4"},
            {"type": "text", "text": "What is said here, and there?"},
            {"type": "video", "video": "b.mp4"},
        ],
    },
    {"role": "assistant", "content": "Rain, then a train."},
]


def test_a_silent_video_keeps_its_own_tokens(omni):
    """The processor writes a video without a soundtrack (None in its video_to_audio_indices) as
    plain video tokens beside one that has its soundtrack."""
    grids, seconds = [(4, 4, 4), (3, 2, 4)], [1.0, 0.5]
    track = soundtrack_ids(omni, grids[0], seconds[0], 60)
    _, ids, labels = reference(omni, CHAT, None, {"video": [track, 3 * 2 * 4 // 4]})
    out = mmfeed.encode_conversation(
        CHAT,
        [],
        omni.tok,
        video_grids=grids,
        second_per_grid_ts=seconds,
        video_audio_tokens=[60, 0],
        template="qwen2.5-omni",
    )
    assert out["input_ids"].tolist() == ids
    assert out["labels"].tolist() == labels


def test_truncation_never_cuts_a_video_with_its_soundtrack(omni):
    args = dict(
        video_grids=[(4, 4, 4), (2, 2, 2)],
        second_per_grid_ts=[1.0, 1.0],
        video_audio_tokens=[120, 30],
        template="qwen2.5-omni",
    )
    ids = mmfeed.encode_conversation(CHAT, [], omni.tok, **args)["input_ids"].tolist()
    vision_end = [i for i, t in enumerate(ids) if t == omni.ids["vision_end"]]
    for cut in range(1, len(ids)):
        out = mmfeed.encode_conversation(CHAT, [], omni.tok, max_length=cut, truncation="truncate", **args)
        kept = out["input_ids"].tolist()
        assert kept == ids[: len(kept)] and len(kept) <= cut
        assert out["videos_kept"] == sum(end < len(kept) for end in vision_end)
        assert kept.count(omni.ids["audio_start"]) == kept.count(omni.ids["audio_end"]) == out["videos_kept"]


def test_what_the_soundtrack_encoding_refuses(omni):
    def encode(**kwargs):
        args = dict(
            video_grids=[(2, 4, 4), (2, 4, 4)],
            second_per_grid_ts=[1.0, 1.0],
            video_audio_tokens=[7, 9],
            template="qwen2.5-omni",
        )
        return mmfeed.encode_conversation(CHAT, [], omni.tok, **(args | kwargs))

    with pytest.raises(ValueError, match="one count per video"):
        encode(video_audio_tokens=[7])
    with pytest.raises(ValueError, match=r"video 1's soundtrack has -1 audio tokens"):
        encode(video_audio_tokens=[7, -1])
    with pytest.raises(ValueError, match=r"needs second_per_grid_t in \(0, 3600"):
        encode(second_per_grid_ts=[1.0, 0.0])
    with pytest.raises(ValueError, match="qwen2.5-omni template only"):
        mmfeed.encode_conversation(
            CHAT,
            [],
            omni_model("qwen3-omni-thinking").tok,
            video_grids=[(2, 4, 4), (2, 4, 4)],
            second_per_grid_ts=[1.0, 1.0],
            video_audio_tokens=[7, 9],
            template="qwen3-omni-thinking",
        )
