"""SFT encoding with the Omni templates (issue 36): on generated conversations with images,
videos and audio, mmfeed's input_ids equal the Omni processors' text expansion (each pad token
repeated: an image's t*h*w/4, a video's likewise, an audio clip's num_audio_tokens from its valid
feature frames by the processor's own _get_feat_extract_output_lengths) of transformers'
apply_chat_template rendering tokenized by `tokenizers`; labels are Qwen's recipe (each assistant
turn and its <|im_end|>\\n, media tokens never); position ids equal the models' get_rope_index
(Qwen2.5-Omni's and Qwen3-Omni's TMRoPE without audio in video). Tokenizers and the reference: tests/support/omni_reference.py."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from chat_samples import generated
from omni_reference import TEMPLATES, audio_tokens_of, media_kinds, omni_model, reference, rope_index

import mmfeed

DATA = Path(__file__).resolve().parents[2] / "data"
CONVERSATIONS = 150


@pytest.fixture(scope="module", params=sorted(TEMPLATES))
def omni(request):
    return omni_model(request.param)


def test_generated_conversations_encode_as_the_processor_and_model(omni):
    rng = random.Random(361)
    encoded = refused = with_audio = 0
    # Qwen3-Omni's video processor samples at fps 1 (2 s per temporal group), Qwen2.5-Omni's at 2
    # (1 s); Qwen2.5-Omni truncates the others' positions (0.5 s, 2/3 s), Qwen3-Omni keeps them
    # fractional (mmfeed refuses those: test_what_the_omni_encoding_refuses).
    steps = [1.0, 0.5, 2 / 3] if omni.template == "qwen2.5-omni" else [2.0, 1.0]
    for msgs, tools in generated(CONVERSATIONS, seed=362, audio=True):
        kinds = media_kinds(msgs)
        images = [(1, 2 * rng.randint(1, 4), 2 * rng.randint(1, 5)) for k in kinds if k == "image"]
        videos = [(rng.randint(1, 4), 2 * rng.randint(1, 3), 2 * rng.randint(1, 3)) for k in kinds if k == "video"]
        seconds = [rng.choice(steps) for _ in videos]
        frames = [rng.randint(8, 3200) for k in kinds if k == "audio"]
        tokens = [audio_tokens_of(omni.template, f) for f in frames]
        sizes = {"image": [t * h * w // 4 for t, h, w in images], "video": [t * h * w // 4 for t, h, w in videos]}
        sizes["audio"] = tokens
        kwargs = dict(
            video_grids=videos,
            second_per_grid_ts=seconds,
            audio_tokens=tokens,
            template=omni.template,
            tools=tools,
            mrope=True,
        )
        try:
            text, ids, labels = reference(omni, msgs, tools, sizes)
        except TypeError:  # Qwen3-Omni's template on a list-form system prompt beside tools
            with pytest.raises(ValueError, match="must be a string"):
                mmfeed.encode_conversation(msgs, images, omni.tok, **kwargs)
            refused += 1
            continue
        rendered = {k: text.count(omni.hf.convert_ids_to_tokens(omni.ids[k])) for k in ("image", "video", "audio")}
        if any(rendered[k] != kinds.count(k) for k in rendered):  # media where the template prints none
            with pytest.raises(ValueError, match="template renders"):
                mmfeed.encode_conversation(msgs, images, omni.tok, **kwargs)
            refused += 1
            continue
        out = mmfeed.encode_conversation(msgs, images, omni.tok, **kwargs)
        assert out["input_ids"].tolist() == ids, msgs
        assert out["labels"].tolist() == labels, msgs
        assert out["attention_mask"].tolist() == [1] * len(ids)
        assert (out["audios_kept"], out["images_kept"], out["videos_kept"]) == (
            len(tokens),
            len(images),
            len(videos),
        )
        want = rope_index(omni, ids, images, videos, seconds, frames)
        assert np.array_equal(want, np.trunc(want))  # whole, so int64 positions carry them exactly
        np.testing.assert_array_equal(out["position_ids"], want.astype(np.int64))
        encoded += 1
        with_audio += bool(tokens)
    assert encoded + refused == CONVERSATIONS
    assert encoded > CONVERSATIONS // 2 and with_audio > CONVERSATIONS // 5


AUDIO_CHAT = [
    {
        "role": "user",
        "content": [
            {"type": "audio", "audio": "a.wav"},
            {"type": "text", "text": "And this one?"},
            {"type": "video", "video": "v.mp4"},
            {"type": "audio", "audio": "b.wav"},
        ],
    },
    {"role": "assistant", "content": "Rain, then a train."},
]


def test_truncation_never_cuts_an_audio_block(omni):
    whole = mmfeed.encode_conversation(
        AUDIO_CHAT,
        [],
        omni.tok,
        video_grids=[(2, 4, 4)],
        second_per_grid_ts=[1.0],
        audio_tokens=[7, 9],
        template=omni.template,
    )
    ids = whole["input_ids"].tolist()
    audio_end = [i for i, t in enumerate(ids) if t == omni.ids["audio_end"]]
    video_end = ids.index(omni.ids["vision_end"])
    for cut in range(1, len(ids)):
        out = mmfeed.encode_conversation(
            AUDIO_CHAT,
            [],
            omni.tok,
            video_grids=[(2, 4, 4)],
            second_per_grid_ts=[1.0],
            audio_tokens=[7, 9],
            template=omni.template,
            max_length=cut,
            truncation="truncate",
        )
        kept = out["input_ids"].tolist()
        assert kept == ids[: len(kept)] and len(kept) <= cut
        assert out["audios_kept"] == sum(end < len(kept) for end in audio_end)
        assert out["videos_kept"] == int(video_end < len(kept))
        # a cut falls before a block's start token or after its end token, never between
        assert kept.count(omni.ids["audio_start"]) == out["audios_kept"]
        assert kept.count(omni.ids["vision_start"]) == out["videos_kept"]


def test_what_the_omni_encoding_refuses(omni):
    def encode(**kwargs):
        args = dict(video_grids=[(2, 4, 4)], second_per_grid_ts=[1.0], audio_tokens=[7, 9], template=omni.template)
        return mmfeed.encode_conversation(AUDIO_CHAT, [], omni.tok, **(args | kwargs))

    with pytest.raises(ValueError, match="2 audio clips but 1 audio token counts"):
        encode(audio_tokens=[7])
    with pytest.raises(ValueError, match=r"audio clip 1 has 0 audio tokens, not in \[1, "):
        encode(audio_tokens=[7, 0])
    with pytest.raises(ValueError, match="no second_per_grid_t"):
        encode(second_per_grid_ts=[], mrope=True)
    encode(second_per_grid_ts=[], mrope=False)  # positions are what need it
    if omni.template == "qwen3-omni-thinking":  # 2/3 s x 13 per second: positions 8.67 apart
        with pytest.raises(ValueError, match="not a whole number"):
            encode(second_per_grid_ts=[2 / 3], mrope=True)
    with pytest.raises(ValueError, match="media tokens"):  # the Qwen3 tokenizer lacks the audio tokens
        mmfeed.encode_conversation(
            AUDIO_CHAT,
            [],
            mmfeed.Tokenizer.from_file(DATA / "qwen3-tokenizer" / "tokenizer.json"),
            video_grids=[(2, 4, 4)],
            second_per_grid_ts=[1.0],
            audio_tokens=[7, 9],
            template=omni.template,
        )
    with pytest.raises(ValueError, match="only an Omni template encodes"):
        mmfeed.encode_conversation(AUDIO_CHAT, [], omni.tok, video_grids=[(2, 4, 4)], audio_tokens=[7, 9])
