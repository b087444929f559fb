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

from mmfeed import _mmfeed, _native


class Tokenizer:
    """A byte-level BPE tokenizer (Qwen2/2.5/3, Llama-3-style and GPT-2-style files)."""

    def __init__(self, core):
        self._core = core
        _native.hold(self)

    def _release_native(self) -> None:
        self._core = None

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> Tokenizer:
        """Reads a tokenizer.json; ValueError naming the file when it is missing or unsupported."""
        return cls(_mmfeed._Tokenizer.from_file(os.fspath(path)))

    @classmethod
    def from_str(cls, json: str) -> Tokenizer:
        """A tokenizer from the text of a tokenizer.json."""
        return cls(_mmfeed._Tokenizer.from_str(json))

    def encode(self, text: str) -> list[int]:
        """The ids of `text` (no special tokens added), equal to `tokenizers`' ids; the GIL is released."""
        return self._core.encode(text)

    def encode_batch(self, texts: list[str], threads: int = 1) -> list[list[int]]:
        """Each text's ids, encoded on up to `threads` threads; an error names the text by index."""
        return self._core.encode_batch(list(texts), threads)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """The tokens' text; invalid UTF-8 replaced by U+FFFD as `tokenizers` does."""
        return self._core.decode(list(ids), skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        """The id of a vocabulary or added token, or None."""
        return self._core.token_to_id(token)

    @property
    def vocab_size(self) -> int:
        """Tokens in the vocabulary, added tokens included."""
        return self._core.vocab_size()


def _sample_json(messages, tools=None) -> str:
    import json

    sample = dict(messages) if isinstance(messages, dict) else {"messages": list(messages)}
    if tools is not None:
        # As transformers takes them: JSON schemas (dicts), or functions converted with its
        # get_json_schema (transformers needed only then).
        schemas = []
        for tool in tools:
            if isinstance(tool, dict):
                schemas.append(tool)
            elif callable(tool):
                from transformers.utils import get_json_schema

                schemas.append(get_json_schema(tool))
            else:
                raise ValueError(f"tools are JSON schemas (dicts) or functions, got {type(tool).__name__}")
        sample["tools"] = schemas
    return json.dumps(sample, ensure_ascii=False)


def render_chat(
    messages,
    template: str = "qwen2-vl",
    add_generation_prompt: bool = False,
    add_vision_id: bool = False,
    tools=None,
    enable_thinking: bool | None = None,
    add_audio_id: bool = False,
) -> str:
    """The conversation as the model's chat template renders it (HF apply_chat_template,
    tokenize=False, byte for byte). `messages` is a list of {"role", "content"} dicts (with
    "tool_calls" and "reasoning_content" where the template reads them), or a whole manifest
    sample (LLaVA "conversations" and ShareGPT shapes included, "tools" beside "messages").
    template: "qwen2-vl" (= "qwen2.5-vl"), "qwen3-vl" (Instruct), "qwen3-vl-thinking", "qwen3.5"
    (Qwen3.5 4B and larger), "qwen3.5-nothink" (2B and smaller), "qwen2.5-omni" (images, videos
    and audio items; add_audio_id numbers the audio), "qwen3-omni-thinking" (images, videos and
    audio, never numbered), or the path of a template file (.jinja, or chat_template.json)
    byte-identical to one of those.
    tools: JSON schemas (dicts) or functions, as apply_chat_template takes them.
    enable_thinking: Qwen3.5's generation prompt with or without thinking (None: the template's
    default); Qwen3-Omni Thinking adds an empty think block when it is False."""
    return _mmfeed.render_chat(
        _sample_json(messages, tools),
        os.fspath(template),
        add_generation_prompt,
        add_vision_id,
        enable_thinking,
        add_audio_id,
    )


def encode_conversation(
    messages,
    image_grids,
    tokenizer: Tokenizer,
    *,
    video_grids=(),
    second_per_grid_ts=(),
    video_timestamps=(),
    audio_tokens=(),
    video_audio_tokens=(),
    tokens_per_second: int | None = None,
    template: str = "qwen2-vl",
    max_length: int | None = None,
    truncation: str = "error",
    labels: str = "qwen",
    mrope: bool = False,
    add_vision_id: bool = False,
    merge_size: int = 2,
    tools=None,
    train_reasoning: bool = True,
) -> dict:
    """Renders, tokenizes and labels a conversation for supervised fine-tuning.

    image_grids: one (t, h, w) per image, in order (the processor's image_grid_thw); each image
    pad becomes t*h*w/merge_size^2 tokens. labels: "qwen" trains each assistant turn (content,
    tool calls, and the <think> block the Thinking template renders unless train_reasoning is
    False) + <|im_end|> + "\\n" (Qwen's recipe), "content_and_eos" without the newline; -100
    elsewhere (system, user and tool turns). truncation: "error" (a sample over max_length
    raises) or "truncate" (cut, never inside an image; "images_kept" says how many images
    remain). mrope: add position_ids [3, L]. tools: as render_chat's.
    Videos (video_grids, one (t, h, w) each, the processor's video_grid_thw): Qwen3-VL templates
    need video_timestamps (one list of t seconds per video, process_video's "timestamps"),
    written before each temporal group as transformers 5.24 writes them; Qwen2.5-VL's mrope
    steps a video's groups by second_per_grid_ts x tokens_per_second (2 by default with
    template="qwen2.5-vl", 0 = one per group, Qwen2-VL).
    Audio (the Omni templates, "qwen2.5-omni" and "qwen3-omni-thinking"): audio_tokens, one count
    per audio item (AudioProcessor's "tokens"), each audio pad expanded to it; their videos need
    second_per_grid_ts (temporal_patch_size / fps: the processors' video_second_per_grid) for the
    positions, which step by the model's position_id_per_seconds (25, 13) unless
    tokens_per_second says otherwise. video_audio_tokens (use_audio_in_video): per video, its
    soundtrack's audio tokens (0: the video alone); each such video and its soundtrack are
    interleaved between the audio start and end tokens as the model's processor writes them
    (Qwen2.5-Omni: 2-second chunks; Qwen3-Omni: by time, token by token), positioned as the
    model's get_rope_index(use_audio_in_video=True).
    Returns int64 numpy arrays input_ids, labels, attention_mask (and position_ids), and how many
    images, videos and audio clips truncation kept ("images_kept", "videos_kept", "audios_kept").
    """
    import numpy as np

    out = _mmfeed.encode_conversation(
        tokenizer._core,
        _sample_json(messages, tools),
        [list(map(int, g)) for g in image_grids],
        [list(map(int, g)) for g in video_grids],
        [float(x) for x in second_per_grid_ts],
        [[float(t) for t in ts] for ts in video_timestamps],
        [int(n) for n in audio_tokens],
        [int(n) for n in video_audio_tokens],
        (2 if template == "qwen2.5-vl" else 0) if tokens_per_second is None else tokens_per_second,
        os.fspath(template),
        max_length or 0,
        truncation,
        labels,
        mrope,
        add_vision_id,
        merge_size,
        train_reasoning,
    )
    result = {k: np.asarray(out[k], dtype=np.int64) for k in ("input_ids", "labels", "attention_mask")}
    if mrope:
        result["position_ids"] = np.asarray(out["position_ids"], dtype=np.int64).reshape(3, -1)
    result["images_kept"] = out["images_kept"]
    result["videos_kept"] = out["videos_kept"]
    result["audios_kept"] = out["audios_kept"]
    return result
