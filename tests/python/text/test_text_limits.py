"""Issue 31 in the text module, against Hugging Face `tokenizers`: a Split pattern that can
match the empty string pre-tokenizes as `tokenizers` does (an empty match only splits there).
Needs the extension (mmfeed.Tokenizer)."""

import json

import pytest
from tokenizers import Tokenizer as HFTokenizer

import mmfeed


def byte_level_alphabet() -> dict[int, str]:
    """GPT-2's: printable bytes stand for themselves, the others move up from 256."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    shifted = (b for b in range(256) if b not in printable)
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(shifted)}}


def tokenizer_json(pattern: str) -> str:
    """Every byte a token (id = the byte), "an" and "ban" merged, Split(pattern, Isolated) then ByteLevel."""
    vocab = {key: b for b, key in byte_level_alphabet().items()} | {"an": 256, "ban": 257}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return json.dumps(
        {
            "version": "1.0",
            "added_tokens": [],
            "normalizer": None,
            "post_processor": None,
            "decoder": byte_level,
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
                    byte_level,
                ],
            },
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
                "merges": [["a", "n"], ["b", "an"]],
            },
        }
    )


@pytest.mark.parametrize("pattern", ["(?=a)", "", "a*", "x*", "(?=n)|n", r"\b", "(?=\\s)", "a?"])
def test_issue31_a_split_pattern_matching_empty_strings_splits_as_tokenizers_does(pattern):
    ours = mmfeed.Tokenizer.from_str(tokenizer_json(pattern))
    hf = HFTokenizer.from_str(tokenizer_json(pattern))
    for text in ["banana", "bananas ban", "", "nab", "a", "an an  ban\n", "ébanañ", "b\u0301anana"]:
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids, (pattern, text)
