"""Audio for the Qwen Omni models, equal to what their Hugging Face processors compute.

    proc = mmfeed.AudioProcessor("qwen2.5-omni")
    out = proc(["speech.wav", open("clip.mp3", "rb").read(), samples_16k])
    out["input_features"]          # float32 [clips, 128, frames]
    out["feature_attention_mask"]  # int32 [clips, frames]
    proc.tokens(out["feature_attention_mask"].sum(-1))  # the audio tokens of each clip

A path or encoded bytes is loaded as qwen-omni-utils loads it, librosa.load(sr=16000): decoded
(WAV, FLAC, MP3, Ogg Vorbis/Opus, AAC/M4A, the audio of MP4/MKV/WebM), cropped to
audio_start/audio_end, averaged to mono, resampled with libsoxr's HQ recipe. A float32 array is
16 kHz mono samples, cropped but not resampled (as qwen-omni-utils takes an array). Features are
WhisperFeatureExtractor's log-mel spectrogram with the model's padding.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import numpy as np

from mmfeed import _mmfeed

AudioSource = str | os.PathLike | bytes | np.ndarray


def _encoded_or_samples(item: AudioSource) -> bytes | np.ndarray:
    if isinstance(item, bytes):
        return item
    if isinstance(item, np.ndarray):
        if item.ndim != 1:
            raise ValueError(f"audio arrays must be mono, 1-D: got shape {item.shape}")
        return np.ascontiguousarray(item, dtype=np.float32)
    if isinstance(item, (str, os.PathLike)):
        path = os.fspath(item)
        return Path(path[7:] if path.startswith("file://") else path).read_bytes()
    raise TypeError(f"audio must be a path, bytes or a float array, not {type(item).__name__}")


def load_audio(
    source: AudioSource,
    sampling_rate: int = 16000,
    *,
    start: float | None = None,
    end: float | None = None,
    max_seconds: float = 3600.0,
    soundtrack: bool = False,
) -> np.ndarray:
    """The clip as mono float32 samples at `sampling_rate` (0: the file's own), equal to
    librosa.load(path, sr=sampling_rate, offset=start, duration=end - start). soundtrack: read
    as qwen-omni-utils reads a video's audio (use_audio_in_video): through FFmpeg's 16-bit
    samples, whatever the container."""
    data = _encoded_or_samples(source)
    if isinstance(data, np.ndarray):
        raise TypeError("load_audio takes a path or encoded bytes")
    return _mmfeed.load_audio(data, sampling_rate, start, end, max_seconds, soundtrack)


def resample_audio(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Mono samples resampled as librosa.resample(y, orig_sr=from_rate, target_sr=to_rate)
    (res_type "soxr_hq"), float32."""
    return _mmfeed.resample_audio(np.ascontiguousarray(samples, dtype=np.float32), from_rate, to_rate)


class AudioProcessor:
    """Load and transform clips as the Omni processors do.

    model: "qwen2.5-omni" (every clip padded to 300 s, longer clips cut: 30,000 frames) or
    "qwen3-omni" (padded to the longest clip of the call, nothing cut).
    padding: "model" (the model's way), "max_length" (300 s) or "longest" (the longest clip of
    the call; for Qwen2.5-Omni the 300 s output cut after the longest clip's valid frames: the
    same values, ~15 MB less per clip).
    max_seconds: a longer clip (after its crop) is refused, before it is decoded when the
    container states its length.
    threads: clips loaded and transformed in parallel (the GIL is released).
    """

    def __init__(
        self,
        model: str = "qwen2.5-omni",
        *,
        padding: Literal["model", "max_length", "longest"] = "model",
        max_seconds: float = 3600.0,
        threads: int = 1,
    ):
        self.model = model
        self._core = _mmfeed._AudioProcessor(model, padding, max_seconds, threads)

    def __call__(
        self,
        audios: AudioSource | list[AudioSource],
        audio_start: float | list[float | None] | None = None,
        audio_end: float | list[float | None] | None = None,
        soundtrack: bool | list[bool] = False,
    ) -> dict[str, np.ndarray]:
        """input_features and feature_attention_mask for one clip or a list; audio_start and
        audio_end (seconds) crop every clip alike or each its own (a list); soundtrack (one for
        all or a list): the file is a video whose audio is read as qwen-omni-utils reads it for
        use_audio_in_video (load_audio's soundtrack)."""
        items = audios if isinstance(audios, list) else [audios]
        starts = audio_start if isinstance(audio_start, list) else [audio_start] * len(items)
        ends = audio_end if isinstance(audio_end, list) else [audio_end] * len(items)
        tracks = soundtrack if isinstance(soundtrack, list) else [soundtrack] * len(items)
        features, mask = self._core.process([_encoded_or_samples(a) for a in items], starts, ends, tracks)
        return {"input_features": features, "feature_attention_mask": mask}

    def tokens(self, frames: int | np.ndarray) -> int | np.ndarray:
        """The audio tokens the model's encoder makes of `frames` valid feature frames (the
        feature_attention_mask's sum): one count or an array of them."""
        if isinstance(frames, (int, np.integer)):
            return self._core.tokens(int(frames))
        return np.array([self._core.tokens(int(f)) for f in np.asarray(frames).ravel()], dtype=np.int64)
