"""The Loader's options as types: `LoaderOptions`, the keyword arguments of `mmfeed.Loader`,
`mmfeed.LoaderInputs`, `mmfeed.torch.Dataset` and `mmfeed.ray.Loader` (each also takes the
manifest first, and Python's own keywords: see mmfeed.Loader), one per row of the engine's option
table (include/mmfeed/loader_options.h), in its order; None leaves an option's default. Choices
are Literal types, so an editor completes them and mypy checks them. tests/python/tools/test_docs.py
holds this module to the table (names, order, types and choices); docs/options.md lists the
defaults and meanings.

Example:
    def loader(**options: Unpack[LoaderOptions]) -> mmfeed.Loader: ...
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal, TypedDict

_Path = str | os.PathLike[str]


class Source(TypedDict, total=False):
    """One entry of `sources=`: a manifest (required) and its own options."""

    manifest: _Path
    weight: float
    media_root: _Path
    max_pixels: int
    chat_template: str


class LoaderOptions(TypedDict, total=False):
    """The engine's options (docs/options.md: their defaults and meanings)."""

    manifests: _Path | Sequence[_Path] | None
    media_root: _Path | Sequence[_Path] | None
    weights: Sequence[float] | None
    blend_samples: int | None
    source_repeats: Sequence[float] | None
    source_max_pixels: Sequence[int] | None
    source_chat_template: _Path | Sequence[_Path] | None
    tokenizer: _Path | None
    model: _Path | None
    min_pixels: int | None
    max_pixels: int | None
    pixels: Literal["float32", "bfloat16", "uint8"] | None
    image_backend: Literal["pil", "torchvision"] | None
    alpha: Literal["drop", "paste", "white"] | None
    chat_template: _Path | None
    audio_padding: Literal["model", "max_length", "longest"] | None
    use_audio_in_video: bool | None
    batch_size: int | None
    pad_to_multiple_of: int | None
    token_budget: int | None
    pack_window: int | None
    packed_format: Literal["hf", "thd"] | None
    mrope: bool | None
    seed: int | None
    shuffle: bool | None
    epochs: int | None
    end_position: int | None
    rank: int | None
    world_size: int | None
    shard_remainder: Literal["pad", "drop", "keep"] | None
    balance: Literal["none", "tokens", "compute"] | None
    gradient_accumulation_steps: int | None
    balance_cost: Sequence[float] | Literal["calibrated"] | None
    mode: Literal["concurrent", "serial"] | None
    ordered: bool | None
    workers: int | None
    prefetch_batches: int | None
    max_buffered_bytes: int | None
    fetch_inflight: int | None
    max_object_bytes: int | None
    max_manifest_bytes: int | None
    cache_dir: _Path | None
    max_images_per_sample: int | None
    allow_local_media_from_remote_manifest: bool | None
    max_length: int | None
    truncation: Literal["error", "truncate"] | None
    labels: Literal["qwen", "content_and_eos"] | None
    train_reasoning: bool | None
    on_error: Literal["skip", "fail"] | None
    max_error_fraction: float | None
    trace_path: _Path | None
    pin_memory: bool | None
    pin_device: int | None
    cuda_device: int | None
    sources: Sequence[_Path | Source] | None  # Python's: the manifests with per-source options
