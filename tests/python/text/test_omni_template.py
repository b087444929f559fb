"""The Qwen2.5-Omni processor's chat template (src/text/templates/qwen2_5_omni.jinja)
rendered by mmfeed, byte-identical to transformers' apply_chat_template on generated
conversations with images, videos and audio items (and the tools, tool calls and reasoning the
template ignores), every option; the other templates refuse audio (the Loader's refusals are in
tests/python/audio/test_audio_loader.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from chat_samples import SEED_CONVERSATIONS, generated
from transformers import PreTrainedTokenizerFast

import mmfeed

DATA = Path(__file__).resolve().parents[2] / "data"
TEMPLATES = Path(__file__).resolve().parents[3] / "src" / "text" / "templates"
TEMPLATE = TEMPLATES / "qwen2_5_omni.jinja"


@pytest.fixture(scope="module")
def hf():
    return PreTrainedTokenizerFast(
        tokenizer_file=str(DATA / "qwen3-tokenizer" / "tokenizer.json"), chat_template=TEMPLATE.read_text()
    )


def test_generated_conversations_render_as_apply_chat_template(hf):
    rendered = audio_seen = 0
    for msgs, tools in generated(SEED_CONVERSATIONS, seed=36, audio=True):
        audio_seen += any(
            isinstance(m.get("content"), list) and any("audio" in c or "audio_url" in c for c in m["content"])
            for m in msgs
        )
        for gen in (False, True):
            for vid in (False, True):
                for aud in (False, True):
                    want = hf.apply_chat_template(
                        msgs,
                        tools=tools,
                        tokenize=False,
                        add_generation_prompt=gen,
                        add_vision_id=vid,
                        add_audio_id=aud,
                    )
                    got = mmfeed.render_chat(
                        msgs,
                        template="qwen2.5-omni",
                        tools=tools,
                        add_generation_prompt=gen,
                        add_vision_id=vid,
                        add_audio_id=aud,
                    )
                    assert got == want, msgs
                    rendered += 1
    assert rendered == 8 * SEED_CONVERSATIONS
    assert audio_seen > SEED_CONVERSATIONS // 3  # the set does reach the audio branch


def test_listed_audio_is_placed_by_its_placeholders(hf):
    sample = {
        "messages": [
            {"role": "user", "content": "<audio>What is said? <image>"},
            {"role": "assistant", "content": "Hello."},
        ],
        "audios": ["a.wav"],
        "images": ["i.jpg"],
    }
    messages = [
        {"role": "user", "content": [{"type": "audio", "audio": "a.wav"}, {"type": "text", "text": "What is said? "},
                                     {"type": "image", "image": "i.jpg"}]},
        {"role": "assistant", "content": "Hello."},
    ]  # fmt: skip
    assert mmfeed.render_chat(sample, template="qwen2.5-omni") == hf.apply_chat_template(messages, tokenize=False)


def test_the_template_file_is_recognised_and_audio_is_refused_elsewhere(tmp_path):
    msgs = [{"role": "user", "content": [{"type": "audio", "audio": "a.wav"}, {"type": "text", "text": "Hi"}]}]
    assert mmfeed.render_chat(msgs, template=TEMPLATE) == mmfeed.render_chat(msgs, template="qwen2.5-omni")
    for name in ("qwen2-vl", "qwen3-vl", "qwen3-vl-thinking", "qwen3.5"):
        with pytest.raises(ValueError, match="renders no audio"):
            mmfeed.render_chat(msgs, template=name)


THINKING = TEMPLATES / "qwen3_omni_thinking.jinja"


@pytest.fixture(scope="module")
def hf_thinking():
    return PreTrainedTokenizerFast(
        tokenizer_file=str(DATA / "qwen3-tokenizer" / "tokenizer.json"), chat_template=THINKING.read_text()
    )


def test_qwen3_omni_thinking_renders_as_apply_chat_template(hf_thinking):
    """Every branch: tools (a list-form system prompt beside them is refused by both), a list-form
    system prompt as one turn per item, untyped text items skipped, only string user messages as
    queries, reasoning kept after the last one, the generation prompt with thinking on or off."""
    rendered = refused = 0
    for msgs, tools in generated(SEED_CONVERSATIONS, seed=361, audio=True):
        for gen in (False, True):
            for thinking in (None, True, False):
                for vid in (False, True):
                    options = dict(tools=tools, add_generation_prompt=gen, add_vision_id=vid, add_audio_id=vid)
                    if thinking is not None:
                        options["enable_thinking"] = thinking
                    try:
                        want = hf_thinking.apply_chat_template(msgs, tokenize=False, **options)
                    except TypeError:  # the template adds a string to a list-form system prompt
                        with pytest.raises(ValueError, match="content must be a string"):
                            mmfeed.render_chat(msgs, template="qwen3-omni-thinking", **options)
                        refused += 1
                        continue
                    got = mmfeed.render_chat(msgs, template="qwen3-omni-thinking", **options)
                    assert got == want, (msgs, options)
                    rendered += 1
    assert rendered + refused == 12 * SEED_CONVERSATIONS
    assert 0 < refused < rendered // 10  # the set reaches the refusal, and mostly renders


def test_qwen3_omni_thinking_file_and_thinking_blocks(hf_thinking):
    assert mmfeed.render_chat([{"role": "user", "content": "Hi"}], template=THINKING) == mmfeed.render_chat(
        [{"role": "user", "content": "Hi"}], template="qwen3-omni-thinking"
    )
    # A user turn given as a list is not a query for this template: the reasoning of the answer
    # after it is dropped unless a string query precedes; the same turn as a string keeps it.
    listed = [
        {"role": "user", "content": [{"type": "audio", "audio": "a.wav"}, {"type": "text", "text": "What?"}]},
        {"role": "assistant", "content": "Rain.", "reasoning_content": "It sounds wet."},
        {"role": "user", "content": "Sure?"},
        {"role": "assistant", "content": "Yes.", "reasoning_content": "Still wet."},
    ]
    got = mmfeed.render_chat(listed, template="qwen3-omni-thinking")
    assert got == hf_thinking.apply_chat_template(listed, tokenize=False)
    assert "It sounds wet." not in got and "<think>\nStill wet.\n</think>\n\nYes." in got
    # No string query at all: the template takes the last message as the query, so no reasoning
    # is rendered anywhere.
    only_listed = listed[:2]
    got = mmfeed.render_chat(only_listed, template="qwen3-omni-thinking")
    assert got == hf_thinking.apply_chat_template(only_listed, tokenize=False)
    assert "<|audio_start|><|audio_pad|><|audio_end|>What?" in got and "<think>" not in got
