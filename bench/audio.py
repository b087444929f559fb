"""Audio preprocessing: mmfeed.AudioProcessor against the Omni models' Python pipeline on the same
clips — librosa.load(sr=16000) (what qwen-omni-utils calls) and transformers'
WhisperFeatureExtractor with the model's padding (what Qwen2_5OmniProcessor / the Qwen3-Omni
processor call) — one thread each, then every core (mmfeed's threads against a process pool).

The clips are made here: espeak-ng speech and ffmpeg's noise and tones, in WAV, FLAC, MP3, M4A
and Ogg, 5 s to 2 min, 22-48 kHz, mono and stereo. For each clip and model: mmfeed's time
(decode, resample, features), the peer's load and feature times, the speedup, and the largest
difference of the features (the float32 reference against mmfeed's float64; see
tests/python/audio/test_audio_features.py for the tolerance).

Usage: python bench/audio.py [--repeat 3] [--models qwen2.5-omni,qwen3-omni] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np

import mmfeed

SPEECH = "Training a vision language model needs data, and the data is rarely where the model is. " * 3
CLIPS = {  # name: (ffmpeg input, output arguments); "speech" is espeak-ng's 22,050 Hz clip
    "speech-22k.wav": (None, []),
    "speech-48k.flac": ("speech", ["-ar", "48000"]),
    "noise-30s-44k-stereo.flac": (
        ["-f", "lavfi", "-i", "anoisesrc=d=30:c=pink:r=44100:a=0.3,aformat=channel_layouts=stereo"],
        [],
    ),
    "noise-2min-44k.mp3": (["-f", "lavfi", "-i", "anoisesrc=d=120:c=brown:r=44100:a=0.3"], ["-b:a", "128k"]),
    "tones-10s-48k.m4a": (["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=10"], ["-c:a", "aac"]),
    "speech-44k.ogg": ("speech", ["-ar", "44100", "-c:a", "libvorbis"]),
}


def make_clips(out: Path) -> list[Path]:
    speech = out / "speech-22k.wav"
    subprocess.run(["espeak-ng", "-w", str(speech), SPEECH], check=True, capture_output=True)
    for name, (source, args) in CLIPS.items():
        if source is None:
            continue
        inputs = ["-i", str(speech)] if source == "speech" else source
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *inputs, *args, str(out / name)], check=True)
    return [out / name for name in CLIPS]


def extractor_call(model: str) -> dict:
    if model == "qwen2.5-omni":
        return dict(padding="max_length", truncation=True)
    return dict(padding=True, truncation=False)


def peer(path: str, model: str) -> tuple[float, float, np.ndarray]:
    """librosa.load + WhisperFeatureExtractor on one clip: (load s, features s, features)."""
    import librosa
    import torch
    from transformers import WhisperFeatureExtractor

    torch.set_num_threads(1)
    fe = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, hop_length=160, n_fft=400, chunk_length=300)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = librosa.load(path, sr=16000)[0]
    t1 = time.perf_counter()
    out = fe([samples], sampling_rate=16000, return_attention_mask=True, return_tensors="np", **extractor_call(model))
    return t1 - t0, time.perf_counter() - t1, out["input_features"][0]


def best(fn, repeat: int):
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default="qwen2.5-omni,qwen3-omni")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    report = {"cores": cores, "libraries": mmfeed.audio_libraries(), "clips": [], "pool": []}
    print(f"mmfeed {mmfeed.__version__}: {mmfeed.audio_libraries()}; {cores} cores\n")
    with tempfile.TemporaryDirectory() as tmp:
        clips = make_clips(Path(tmp))
        for model in args.models.split(","):
            one = mmfeed.AudioProcessor(model, threads=1)
            print(f"{model}, one thread (best of {args.repeat})")
            print(
                f"  {'clip':<28} {'seconds':>7} {'mmfeed ms':>10} {'librosa ms':>11} {'extractor ms':>13} {'speedup':>8} {'max |d|':>9}"
            )
            speedups = []
            for path in clips:
                ours_s, ours = best(lambda p=path: one([p]), args.repeat)
                runs = [peer(str(path), model) for _ in range(args.repeat)]
                load_s, feat_s = min(r[0] for r in runs), min(r[1] for r in runs)
                ref = runs[0][2]
                diff = float(np.abs(ours["input_features"][0] - ref).max())
                seconds = len(mmfeed.load_audio(path)) / 16000
                speedup = (load_s + feat_s) / ours_s
                speedups.append(speedup)
                print(
                    f"  {path.name:<28} {seconds:7.1f} {1000 * ours_s:10.1f} {1000 * load_s:11.1f} "
                    f"{1000 * feat_s:13.1f} {speedup:7.1f}x {diff:9.1e}"
                )
                report["clips"].append(
                    dict(model=model, clip=path.name, seconds=seconds, mmfeed_ms=1000 * ours_s,
                         librosa_ms=1000 * load_s, extractor_ms=1000 * feat_s, speedup=speedup, max_abs_diff=diff)
                )  # fmt: skip
            print(f"  median speedup {statistics.median(speedups):.1f}x\n")
            # Every core: 4 copies of each clip, each clip its own call (the peer's padding), on
            # threads for mmfeed (it releases the GIL) and in a process pool for the peer.
            batch = [p for p in clips for _ in range(4)]
            with ThreadPoolExecutor(cores) as threads:
                ours_s, _ = best(lambda: list(threads.map(lambda p: one([p]), batch)), 1)
            with ProcessPoolExecutor(cores) as pool:
                list(pool.map(peer, [str(clips[0])] * cores, [model] * cores))  # start the workers
                t = time.perf_counter()
                list(pool.map(peer, [str(p) for p in batch], [model] * len(batch)))
                peer_s = time.perf_counter() - t
            print(
                f"{model}, {cores} cores, {len(batch)} clips: mmfeed {len(batch) / ours_s:.1f} clips/s, "
                f"librosa + extractor (process pool) {len(batch) / peer_s:.1f} clips/s: {peer_s / ours_s:.1f}x\n"
            )
            report["pool"].append(dict(model=model, clips=len(batch), mmfeed_s=ours_s, peer_s=peer_s))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
