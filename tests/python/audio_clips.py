"""Test audio made at test time: espeak-ng speech and ffmpeg's synthetic sources, written in the
formats and layouts users' data holds (shared by the audio tests)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
from conftest import ffmpeg

SPEECH = "Training a vision language model needs data. The quick brown fox jumps over the lazy dog."


def tones(channels: int, rate: int, seconds: float) -> list[str]:
    """ffmpeg input arguments: a different tone (and level) per channel."""
    exprs = "|".join(f"{0.8 / (c + 1):.3f}*sin({220 * (c + 1)}*2*PI*t)" for c in range(channels))
    return ["-f", "lavfi", "-i", f"aevalsrc={exprs}:s={rate}:d={seconds}"]


def noise(rate: int, seconds: float, color: str = "pink") -> list[str]:
    return ["-f", "lavfi", "-i", f"anoisesrc=d={seconds}:c={color}:r={rate}:a=0.3:seed=7"]


# name: (ffmpeg input, output arguments). The speech is espeak-ng's (22,050 Hz) where named.
CLIPS = {
    "speech-22k.wav": (None, []),
    "speech-48k-s24.wav": ("speech", ["-ar", "48000", "-c:a", "pcm_s24le"]),
    "speech-32k-s32.wav": ("speech", ["-ar", "32000", "-c:a", "pcm_s32le"]),
    "tones-44k-stereo.wav": (tones(2, 44100, 3.0), ["-c:a", "pcm_s16le"]),
    "tones-16k-float.wav": (tones(1, 16000, 2.5), ["-c:a", "pcm_f32le"]),
    "tones-24k-f64.wav": (tones(1, 24000, 2.0), ["-c:a", "pcm_f64le"]),
    "tones-8k-u8.wav": (tones(1, 8000, 2.0), ["-c:a", "pcm_u8"]),
    "tones-5.1-48k.flac": (tones(6, 48000, 2.0), []),
    "tones-7.1-96k.wav": (tones(8, 96000, 1.5), ["-c:a", "pcm_s16le"]),
    "speech-24bit.flac": ("speech", ["-ar", "44100", "-sample_fmt", "s32", "-c:a", "flac"]),
    "tones-11k-stereo.aiff": (tones(2, 11025, 2.0), []),
    "noise-44k.m4a": (noise(44100, 3.0), ["-c:a", "aac", "-b:a", "128k"]),
    "speech.mp3": ("speech", ["-ar", "44100", "-c:a", "libmp3lame", "-b:a", "128k"]),
    "speech.ogg": ("speech", ["-ar", "44100", "-c:a", "libvorbis"]),
    "speech.opus": ("speech", ["-c:a", "libopus", "-b:a", "64k"]),
    "tones-stereo.mkv": (tones(2, 48000, 2.0), ["-c:a", "libvorbis"]),
    "tones.webm": (tones(2, 48000, 2.0), ["-c:a", "libopus"]),
}
# A video with a soundtrack: its audio stream is the clip.
VIDEO = "with-audio.mp4"


def make_clips(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    speech = out / "speech-22k.wav"
    subprocess.run(["espeak-ng", "-w", str(speech), SPEECH], check=True, capture_output=True)
    for name, (source, args) in CLIPS.items():
        if source is None:
            continue
        inputs = ["-i", speech] if source == "speech" else source
        ffmpeg(*inputs, *args, out / name)
    ffmpeg(
        "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10:duration=2", *noise(44100, 2.0, "white"),
        "-c:v", "libx264", "-c:a", "aac", "-shortest", out / VIDEO,
    )  # fmt: skip
    return out


def omni_set(out: Path, lines: dict[str, dict], template: str):
    """The Omni Loader tests' data in `out`: the clips, a 120x90 photo.png, omni.jsonl holding
    `lines` (id: manifest line) and tokenizer.json of `template`'s model. Returns that model
    (omni_reference.omni_model)."""
    from omni_reference import omni_model
    from PIL import Image

    make_clips(out)
    rng = np.random.default_rng(36)
    Image.fromarray(rng.integers(0, 256, (90, 120, 3), dtype=np.uint8)).save(out / "photo.png")
    (out / "omni.jsonl").write_text("".join(json.dumps({"id": sid, **line}) + "\n" for sid, line in lines.items()))
    omni = omni_model(template)
    (out / "tokenizer.json").write_text(omni.json)
    return omni


def loaded_clip(root: Path, name: str, start: float | None = None, end: float | None = None) -> np.ndarray:
    """The clip as mmfeed loads it, as long as librosa.load(sr=16000, offset, duration) makes it
    (qwen-omni-utils' loader; the samples themselves are compared in test_audio_load.py)."""
    import librosa

    import mmfeed

    kw = {} if start is None else {"offset": start, "duration": end - start}
    mine = mmfeed.load_audio(root / name, start=start, end=end)
    assert len(mine) == len(librosa.load(root / name, sr=16000, **kw)[0])
    return mine
