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


def _sample_json(messages) -> str:
    import json

    sample = messages if isinstance(messages, dict) else {"messages": list(messages)}
    return json.dumps(sample, ensure_ascii=False)


def render_chat(messages, template: str = "qwen2-vl", add_generation_prompt: bool = False,
                add_vision_id: bool = False) -> str:
    """The conversation as the model's chat template renders it (HF apply_chat_template,
    tokenize=False). `messages` is a list of {"role", "content"} dicts, or a whole manifest
    sample (LLaVA "conversations" and ShareGPT shapes included)."""
    return _mmfeed.render_chat(_sample_json(messages), template, add_generation_prompt, add_vision_id)


def encode_conversation(messages, image_grids, tokenizer: Tokenizer, *, video_grids=(), template: str = "qwen2-vl",
                        max_length: int | None = None, truncation: str = "error", labels: str = "qwen",
                        mrope: bool = False, add_vision_id: bool = False, merge_size: int = 2) -> dict:
    """Renders, tokenizes and labels a conversation for supervised fine-tuning.

    image_grids: one (t, h, w) per image, in order (the processor's image_grid_thw); each image
    pad becomes t*h*w/merge_size^2 tokens. labels: "qwen" trains assistant content + <|im_end|>
    + "\\n" (Qwen's recipe), "content_and_eos" without the newline; -100 elsewhere.
    truncation: "error" (a sample over max_length raises) or "truncate" (cut, never inside an
    image; "images_kept" says how many images remain). mrope: add position_ids [3, L].
    Returns int64 numpy arrays input_ids, labels, attention_mask (and position_ids).
    """
    import numpy as np

    out = _mmfeed.encode_conversation(tokenizer._core, _sample_json(messages),
                                      [list(map(int, g)) for g in image_grids],
                                      [list(map(int, g)) for g in video_grids], template, max_length or 0,
                                      truncation, labels, mrope, add_vision_id, merge_size)
    result = {k: np.asarray(out[k], dtype=np.int64) for k in ("input_ids", "labels", "attention_mask")}
    if mrope:
        result["position_ids"] = np.asarray(out["position_ids"], dtype=np.int64).reshape(3, -1)
    result["images_kept"] = out["images_kept"]
    return result
