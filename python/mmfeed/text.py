"""Tokenization with a Hugging Face tokenizer.json, the same ids as the `tokenizers` library.

    tok = mmfeed.Tokenizer.from_file("tokenizer.json")
    tok.encode("Hello, world")            # [9707, 11, 1879]
    tok.encode_batch(texts, threads=4)    # lists of ids, the GIL released
    tok.decode(ids, skip_special_tokens=False)

Like `tokenizers`' encode(text, add_special_tokens=False): the files accepted carry no
post-processor that would add tokens.
"""

from __future__ import annotations

import os

from mmfeed import _mmfeed


class Tokenizer:
    """A byte-level BPE tokenizer (Qwen2/2.5/3, Llama-3-style and GPT-2-style files)."""

    def __init__(self, core):
        self._core = core

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "Tokenizer":
        return cls(_mmfeed._Tokenizer.from_file(os.fspath(path)))

    @classmethod
    def from_str(cls, json: str) -> "Tokenizer":
        return cls(_mmfeed._Tokenizer.from_str(json))

    def encode(self, text: str) -> list[int]:
        return self._core.encode(text)

    def encode_batch(self, texts: list[str], threads: int = 1) -> list[list[int]]:
        return self._core.encode_batch(list(texts), threads)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self._core.decode(list(ids), skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self._core.token_to_id(token)

    @property
    def vocab_size(self) -> int:
        return self._core.vocab_size()
