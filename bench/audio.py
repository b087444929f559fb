"""Audio preprocessing: mmfeed.AudioProcessor against the Omni models' Python pipeline on the same
clips — librosa.load(sr=16000) (what qwen-omni-utils calls) and transformers'
WhisperFeatureExtractor with the model's padding (what Qwen2_5OmniProcessor / the Qwen3-Omni
processor call) — one thread each, then every core (mmfeed's threads against a process pool).

The clips are made here: espeak-ng speech and ffmpeg's noise and tones, in WAV, FLAC, MP3, M4A
and Ogg, 5 s to 2 min, 22-48 kHz, mono and stereo, and the soundtracks of two videos (MP4 with
AAC, MKV with Opus: use_audio_in_video, read as qwen-omni-utils reads them, through audioread's
FFmpeg reader). For each clip and model: mmfeed's time (decode, resample, features), the peer's
load and feature times, the speedup, and the largest difference of the features (the float32
reference against mmfeed's float64; see tests/python/audio/test_audio_features.py for the
tolerance).

Then whole training batches (--loader-samples, each model): mmfeed.Loader(model=...) against the
Python pipeline a trainer runs today on the same samples (a clip and a question each) —
librosa.load per clip, then the model's processor (chat template, tokenizer, WhisperFeatureExtractor
with its padding): Qwen2_5OmniProcessor on each batch, Qwen3OmniMoeProcessor on each sample (the
call mmfeed matches: its padding to a call's longest clip can move a clip's last frame) — one core
each, then every core (the Loader's workers against the pipeline in a process pool, one batch per
task). The batches are checked equal (ids; features within the extractor's float32 rounding)
before anything is timed.

Usage: python bench/audio.py [--repeat 3] [--models qwen2.5-omni,qwen3-omni] [--loader-samples 48] [--json OUT]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))  # omni_reference: the Omni tokenizer and processor
BATCH = 8
LOADER_CLIPS = ["speech-22k.wav", "speech-48k.flac", "tones-10s-48k.m4a", "speech-44k.ogg"]

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
# Videos whose audio track is the clip (use_audio_in_video): 20 s and 60 s of frames and sound.
SOUNDTRACKS = {
    "talk-20s.mp4": (20, "sine=frequency=300:beep_factor=3:sample_rate=44100:duration=20", ["-c:a", "aac"]),
    "noise-60s.mkv": (60, "anoisesrc=d=60:c=pink:r=48000:a=0.3", ["-c:a", "libopus"]),
}


def make_clips(out: Path) -> list[Path]:
    speech = out / "speech-22k.wav"
    subprocess.run(["espeak-ng", "-w", str(speech), SPEECH], check=True, capture_output=True)
    for name, (source, args) in CLIPS.items():
        if source is None:
            continue
        inputs = ["-i", str(speech)] if source == "speech" else source
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *inputs, *args, str(out / name)], check=True)
    for name, (seconds, sound, codec) in SOUNDTRACKS.items():
        frames = ["-f", "lavfi", "-i", f"testsrc2=size=160x120:rate=10:duration={seconds}"]
        video = ["-c:v", "libx264", "-preset", "ultrafast", *codec, "-shortest"]
        subprocess.run(
            ["ffmpeg", "-loglevel", "error", "-y", *frames, "-f", "lavfi", "-i", sound, *video, str(out / name)],
            check=True,
        )
    return [out / name for name in [*CLIPS, *SOUNDTRACKS]]


def is_soundtrack(path) -> bool:
    return Path(path).name in SOUNDTRACKS


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
        if is_soundtrack(path):  # qwen-omni-utils hands librosa audioread's FFmpeg reader for a video
            from audioread.ffdec import FFmpegAudioFile

            samples = librosa.load(FFmpegAudioFile(path), sr=16000)[0]
        else:
            samples = librosa.load(path, sr=16000)[0]
    t1 = time.perf_counter()
    out = fe([samples], sampling_rate=16000, return_attention_mask=True, return_tensors="np", **extractor_call(model))
    return t1 - t0, time.perf_counter() - t1, out["input_features"][0]


def omni_manifest(directory: Path, samples: int) -> Path:
    """`samples` lines, each a clip (cycling through LOADER_CLIPS) and a question."""
    lines = []
    for i in range(samples):
        clip = LOADER_CLIPS[i % len(LOADER_CLIPS)]
        user = [{"type": "audio", "audio": clip}, {"type": "text", "text": f"Question {i}: what is heard?"}]
        lines.append(
            {"id": str(i), "messages": [{"role": "user", "content": user}, {"role": "assistant", "content": "Speech."}]}
        )
    path = directory / "omni.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


_processors: dict = {}
TEMPLATES = {"qwen2.5-omni": "qwen2.5-omni", "qwen3-omni": "qwen3-omni-thinking"}


def peer_batch(directory: str, lines: list[dict], model: str = "qwen2.5-omni") -> list[dict]:
    """The Python pipeline's batch of `lines`: librosa.load each clip, then the model's processor on
    them all (Qwen2.5-Omni) or on each sample (Qwen3-Omni). Returns the processor's outputs."""
    import librosa
    import torch
    from omni_reference import omni_model, omni_processor

    torch.set_num_threads(1)
    if model not in _processors:  # once per process, as a trainer's collator holds it
        _processors[model] = omni_processor(omni_model(TEMPLATES[model]), max_pixels=12845056)
    processor = _processors[model]
    texts, clips = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for line in lines:
            texts.append(processor.apply_chat_template(line["messages"], tokenize=False))
            clips.append(librosa.load(Path(directory) / line["messages"][0]["content"][0]["audio"], sr=16000)[0])
        if model == "qwen2.5-omni":
            return [dict(processor(text=texts, audio=clips, return_tensors="np", padding=True))]
        return [dict(processor(text=[t], audio=[c], return_tensors="np")) for t, c in zip(texts, clips)]


def same_samples(batch: dict, calls: list[dict]) -> float:
    """Checks the Loader's batch against the processor's outputs for its samples (ids equal, each
    clip's valid frames); returns the features' largest difference."""
    rows = [(c, i) for c in calls for i in range(len(c["input_ids"]))]
    assert len(rows) == len(batch["input_ids"]), "the batches differ: nothing to compare"
    diff = 0.0
    for k, (call, i) in enumerate(rows):
        n = int(call["attention_mask"][i].sum())
        assert (batch["input_ids"][k, :n] == call["input_ids"][i, :n]).all(), "the batches differ"
        valid = int(call["feature_attention_mask"][i].sum())
        assert int(batch["feature_attention_mask"][k].sum()) == valid, "the clips differ"
        got, want = batch["input_features"][k, :, :valid], call["input_features"][i, :, :valid]
        diff = max(diff, float(np.abs(got - want).max()))
    return diff


def loader_bench(directory: Path, model: str, samples: int, cores: int, report: dict) -> None:
    from omni_reference import omni_model

    manifest = omni_manifest(directory, samples)
    tokenizer = directory / f"{model}-tokenizer.json"
    tokenizer.write_text(omni_model(TEMPLATES[model]).json)
    lines = [json.loads(x) for x in manifest.read_text().splitlines()]
    batches = [lines[i : i + BATCH] for i in range(0, samples, BATCH)]

    def ours(workers: int, padding: str = "model") -> list:
        opts = dict(tokenizer=tokenizer, model=model, batch_size=BATCH, shuffle=False, workers=workers)
        with mmfeed.Loader(manifest, tensors="np", audio_padding=padding, **opts) as loader:
            return [dict(b) for b in loader]

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    diff = same_samples(ours(1)[0], peer_batch(str(directory), batches[0], model))
    # Qwen3-Omni's own padding is the longest clip's: "longest" is its default.
    longest = model == "qwen2.5-omni"
    ours_one = timed(lambda: ours(1))
    longest_one = timed(lambda: ours(1, "longest")) if longest else ours_one
    peer_one = timed(lambda: [peer_batch(str(directory), b, model) for b in batches])
    ours_all = timed(lambda: ours(cores))
    longest_all = timed(lambda: ours(cores, "longest")) if longest else ours_all
    with ProcessPoolExecutor(cores) as pool:
        list(pool.map(peer_batch, [str(directory)] * cores, [batches[0][:1]] * cores, [model] * cores))  # warm up
        t = time.perf_counter()
        list(pool.map(peer_batch, [str(directory)] * len(batches), batches, [model] * len(batches)))
        peer_all = time.perf_counter() - t
    print(f"{model} batches: {samples} samples (a clip and a question each), batches of {BATCH}; max |d| {diff:.1e}")
    header = f"  {'':<10} {'mmfeed samples/s':>17} {'librosa + processor':>20} {'speedup':>8}"
    print(header + (f" {'mmfeed, longest':>16} {'speedup':>8}" if longest else ""))
    rows = (("one core", ours_one, longest_one, peer_one), (f"{cores} cores", ours_all, longest_all, peer_all))
    for name, mine, cut, theirs in rows:
        line = f"  {name:<10} {samples / mine:17.1f} {samples / theirs:20.1f} {theirs / mine:7.1f}x"
        print(line + (f" {samples / cut:16.1f} {theirs / cut:7.1f}x" if longest else ""))
    if longest:
        print(
            '  (mmfeed, longest: audio_padding="longest", the same values without the frames past the batch\'s '
            "longest clip)"
        )
    print()
    report.setdefault("loader", {})[model] = dict(samples=samples, batch=BATCH, cores=cores, max_abs_diff=diff,
                            mmfeed_one_s=ours_one, mmfeed_longest_one_s=longest_one, peer_one_s=peer_one,
                            mmfeed_all_s=ours_all, mmfeed_longest_all_s=longest_all, peer_all_s=peer_all)  # fmt: skip


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
    parser.add_argument("--loader-samples", type=int, default=48, help="0: skip the Loader's batches")
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
                ours_s, ours = best(lambda p=path: one([p], soundtrack=is_soundtrack(p)), args.repeat)
                runs = [peer(str(path), model) for _ in range(args.repeat)]
                load_s, feat_s = min(r[0] for r in runs), min(r[1] for r in runs)
                ref = runs[0][2]
                diff = float(np.abs(ours["input_features"][0] - ref).max())
                seconds = len(mmfeed.load_audio(path, soundtrack=is_soundtrack(path))) / 16000
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
                ours_s, _ = best(lambda: list(threads.map(lambda p: one([p], soundtrack=is_soundtrack(p)), batch)), 1)
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
        for model in args.models.split(",") if args.loader_samples > 0 else []:
            loader_bench(Path(tmp), model, args.loader_samples, cores, report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
