"""The Omni models' audio of videos (use_audio_in_video, issue 36) in SFT encoding: each video
that brings its soundtrack is written as transformers' processor writes it (its own
replace_video_with_audio_token: the audio start token, the video's tokens and the soundtrack's
interleaved — Qwen2.5-Omni in 2-second chunks, Qwen3-Omni token by token by time — and the audio end
token, inside the video's vision bounds), and positioned as the model's
get_rope_index(use_audio_in_video=True) numbers it. Tokenizer and reference:
tests/support/omni_reference.py."""

from __future__ import annotations

import random

import numpy as np
import pytest
from chat_samples import generated
from omni_reference import (
    DATA,
    TEMPLATES,
    audio_tokens_of,
    media_kinds,
    omni_model,
    reference,
    rope_index,
    soundtrack_ids,
)

import mmfeed

CONVERSATIONS = 150
# Seconds per temporal group (temporal_patch_size / fps). Qwen2.5-Omni: its processor's default
# fps 2, others, and fps 0.5, whose groups lie 100 positions apart (chunks of one token inside a
# group). Qwen3-Omni: those whose positions are whole (x 13), its processor's fps 1 and fps 2.
STEPS = {"qwen2.5-omni": [1.0, 0.5, 2 / 3, 0.4, 1.2, 2 / 7, 4.0], "qwen3-omni-thinking": [2.0, 1.0]}


@pytest.fixture(scope="module", params=sorted(TEMPLATES))
def omni(request):
    return omni_model(request.param)


def test_videos_with_their_soundtracks_encode_as_the_processor_and_model(omni):
    rng = random.Random(363)
    encoded = with_soundtrack = 0
    for msgs, tools in generated(CONVERSATIONS, seed=364, audio=True):
        kinds = media_kinds(msgs)
        if "video" not in kinds:
            continue
        images = [(1, 2 * rng.randint(1, 4), 2 * rng.randint(1, 5)) for k in kinds if k == "image"]
        videos = [(rng.randint(1, 9), 2 * rng.randint(1, 3), 2 * rng.randint(1, 3)) for k in kinds if k == "video"]
        seconds = [rng.choice(STEPS[omni.template]) for _ in videos]
        # Feature frames of each audio item and each video's soundtrack, in order of appearance
        # (the model's audio_seqlens): up to 80 s, 40 chunks.
        frames = [rng.randint(8, 8000) for k in kinds if k in ("audio", "video")]
        audio_frames = [f for f, k in zip(frames, [k for k in kinds if k != "image"]) if k == "audio"]
        track_frames = [f for f, k in zip(frames, [k for k in kinds if k != "image"]) if k == "video"]
        sizes = {
            "image": [t * h * w // 4 for t, h, w in images],
            "audio": [audio_tokens_of(omni.template, f) for f in audio_frames],
            "video": [
                soundtrack_ids(omni, g, s, audio_tokens_of(omni.template, f))
                for g, s, f in zip(videos, seconds, track_frames)
            ],
        }
        kwargs = dict(
            video_grids=videos,
            second_per_grid_ts=seconds,
            audio_tokens=sizes["audio"],
            video_audio_tokens=[audio_tokens_of(omni.template, f) for f in track_frames],
            template=omni.template,
            tools=tools,
            mrope=True,
        )
        try:
            text, ids, labels = reference(omni, msgs, tools, sizes)
        except TypeError:  # Qwen3-Omni's template on a list-form system prompt beside tools
            continue
        pads = {k: omni.hf.convert_ids_to_tokens(omni.ids[k]) for k in ("image", "video")}
        if any(text.count(pads[k]) != kinds.count(k) for k in pads):
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
    grids, seconds = [(4, 4, 4), (3, 2, 4)], [1.0, 2.0]
    track = soundtrack_ids(omni, grids[0], seconds[0], 60)
    _, ids, labels = reference(omni, CHAT, None, {"video": [track, 3 * 2 * 4 // 4]})
    out = mmfeed.encode_conversation(
        CHAT,
        [],
        omni.tok,
        video_grids=grids,
        second_per_grid_ts=seconds,
        video_audio_tokens=[60, 0],
        template=omni.template,
    )
    assert out["input_ids"].tolist() == ids
    assert out["labels"].tolist() == labels


def test_truncation_never_cuts_a_video_with_its_soundtrack(omni):
    args = dict(
        video_grids=[(4, 4, 4), (2, 2, 2)],
        second_per_grid_ts=[1.0, 1.0],
        video_audio_tokens=[120, 30],
        template=omni.template,
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
            template=omni.template,
        )
        return mmfeed.encode_conversation(CHAT, [], omni.tok, **(args | kwargs))

    with pytest.raises(ValueError, match="one count per video"):
        encode(video_audio_tokens=[7])
    with pytest.raises(ValueError, match=r"video 1's soundtrack has -1 audio tokens"):
        encode(video_audio_tokens=[7, -1])
    with pytest.raises(ValueError, match=r"needs second_per_grid_t in \(0, 3600"):
        encode(second_per_grid_ts=[1.0, 0.0])
    if omni.template == "qwen3-omni-thinking":  # 2/3 s x 13 per second: a group at 8.67
        with pytest.raises(ValueError, match="not a whole number"):
            encode(second_per_grid_ts=[1.0, 2 / 3], mrope=True)
        encode(second_per_grid_ts=[1.0, 2 / 3])  # the ids need no whole positions
    with pytest.raises(ValueError, match="only an Omni template encodes"):
        mmfeed.encode_conversation(
            CHAT,
            [],
            mmfeed.Tokenizer.from_file(DATA / "qwen3-tokenizer" / "tokenizer.json"),
            video_grids=[(2, 4, 4), (2, 4, 4)],
            second_per_grid_ts=[1.0, 1.0],
            video_audio_tokens=[7, 9],
            template="qwen2.5-vl",
        )
