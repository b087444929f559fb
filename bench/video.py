"""Video preprocessing: mmfeed.process_video against PyAV + transformers' video processor (the
peer, bench/video_peer.py, timed in the torchvision environment .venv-tv) on the same clips,
the same frames and the same frame size, one thread each; then mmfeed over every core.

The clips are made with ffmpeg (testsrc2 H.264 and VP9 at 360p-1080p). For each clip and model:
the frames kept and the grid, mmfeed's time and CPU time, the peer's decode and processor time,
frames per second and the speedup. The peer's grid is checked equal to mmfeed's. Last, the
clips as whole samples through mmfeed.Loader on every core (samples/s, CPU per sample).

Usage: python bench/video.py [--repeat 3] [--models qwen2.5-vl,qwen3-vl] [--json OUT]
(needs .venv-tv: `make test-oracles` makes it)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mmfeed
from mmfeed import _mmfeed

ROOT = Path(__file__).resolve().parents[1]
CLIPS = {  # name: (size, rate, seconds, codec arguments)
    "360p-60s.mp4": ("640x360", 30, 60, ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
    "720p-10s.mp4": ("1280x720", 30, 10, ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
    "1080p-5s.mp4": ("1920x1080", 30, 5, ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "30"]),
    "480p-vp9.webm": ("854x480", 30, 10, ["-c:v", "libvpx-vp9", "-b:v", "1M", "-deadline", "realtime"]),
}


def make_clips(folder: Path) -> None:
    for name, (size, rate, seconds, codec) in CLIPS.items():
        if not (folder / name).exists():
            subprocess.run(
                [
                    "ffmpeg",
                    "-hide_banner",
                    "-loglevel",
                    "error",
                    "-y",
                    "-f",
                    "lavfi",
                    "-i",
                    f"testsrc2=size={size}:rate={rate}:duration={seconds}",
                    *codec,
                    str(folder / name),
                ],
                check=True,
                timeout=600,
            )


def timed(repeat: int, fn):
    out, best, cpu = fn(), float("inf"), float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        best = min(best, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return out, best * 1e3, cpu * 1e3


def time_mmfeed(folder: Path, models: list[str], repeat: int) -> tuple[list[dict], list[dict]]:
    """mmfeed.process_video on one thread over every clip and model: a row each, and the job the
    peer repeats on the same frames at the same size."""
    rows, jobs = [], []
    for model in models:
        for name in CLIPS:
            data = (folder / name).read_bytes()
            out, ms, cpu_ms = timed(repeat, lambda: mmfeed.process_video(data, model=model))
            rows.append(
                {
                    "clip": name,
                    "model": model,
                    "frames": len(out["indices"]),
                    "grid": out["video_grid_thw"],
                    "size": out["size"],
                    "mmfeed_ms": ms,
                    "mmfeed_cpu_ms": cpu_ms,
                }
            )
            jobs.append(
                {"path": str(folder / name), "model": model, "indices": list(out["indices"]), "size": out["size"]}
            )
    return rows, jobs


def time_peer(folder: Path, jobs: list[dict], rows: list[dict], peer_python: str, repeat: int) -> dict:
    """Runs the peer on `jobs` in the torchvision environment, checks its grids against mmfeed's
    and adds its times and the speedup to `rows`; returns its report."""
    (folder / "jobs.json").write_text(json.dumps(jobs))
    peer = subprocess.run(
        [peer_python, str(ROOT / "bench" / "video_peer.py"), str(folder / "jobs.json"), str(repeat)],
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    report = json.loads(peer.stdout.strip().splitlines()[-1])
    for row, result in zip(rows, report["results"]):
        assert result["grid"] == row["grid"], (row, result)
        row["peer_decode_ms"], row["peer_process_ms"] = result["decode_ms"], result["process_ms"]
        row["speedup"] = (result["decode_ms"] + result["process_ms"]) / row["mmfeed_ms"]
    return report


def time_pool(folder: Path, rows: list[dict], cores: int, repeat: int) -> tuple[float, float]:
    """The clips processed concurrently by mmfeed on every core (the binding releases the GIL):
    the best of `repeat` passes over every clip and the sum of the clips' best one-thread times,
    in seconds."""
    datas = [((folder / r["clip"]).read_bytes(), r["model"]) for r in rows]
    with ThreadPoolExecutor(cores) as pool:
        _, pool_ms, _ = timed(
            repeat, lambda: list(pool.map(lambda job: mmfeed.process_video(job[0], model=job[1]), datas))
        )
    return pool_ms / 1e3, sum(r["mmfeed_ms"] for r in rows) / 1e3


def write_manifest(path: Path, repeat: int) -> None:
    """A conversation per clip, `repeat` times over: the clip and a question, and an answer."""
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"{name}-{k}",
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "video", "video": name},
                                {"type": "text", "text": "What happens?"},
                            ],
                        },
                        {"role": "assistant", "content": "A test pattern moves."},
                    ],
                }
            )
            + "\n"
            for k in range(repeat)
            for name in CLIPS
        )
    )


def time_loader(folder: Path, models: list[str], cores: int, repeat: int) -> dict[str, tuple[float, float]]:
    """The whole sample through mmfeed.Loader on every core: the clips read from files, the text
    rendered and tokenized, the batch assembled; what the loader adds to processing. Per model:
    samples/s and CPU ms per sample."""
    loader_rates = {}
    for model in models:
        manifest = folder / f"{model}.jsonl"
        write_manifest(manifest, repeat)
        t, c = time.perf_counter(), time.process_time()
        with mmfeed.Loader(
            manifest,
            tokenizer=str(ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"),
            model=model,
            batch_size=1,
            workers=cores,
            shuffle=False,
            tensors="np",
        ) as loader:
            n = sum(len(b["sample_ids"]) for b in loader)
            assert not loader.errors(), loader.errors()
        loader_rates[model] = (n / (time.perf_counter() - t), (time.process_time() - c) / n * 1e3)
    return loader_rates


def print_rows(rows: list[dict], torch_version: str, repeat: int) -> None:
    """The one-thread table: per clip and model, mmfeed's and the peer's times and rates."""
    print(
        f"PyAV + transformers {torch_version} video processors vs mmfeed ({mmfeed.__version__}, "
        f"{_mmfeed.video_libraries()}), one thread, best of {repeat}\n"
    )
    print(
        f"{'clip':<15}{'model':<12}{'frames':>7}{'grid':>14}{'mmfeed ms':>11}{'cpu ms':>9}{'PyAV ms':>10}"
        f"{'HF ms':>9}{'mmfeed fr/s':>13}{'peer fr/s':>11}{'speedup':>9}"
    )
    for r in rows:
        peer_ms = r["peer_decode_ms"] + r["peer_process_ms"]
        print(
            f"{r['clip']:<15}{r['model']:<12}{r['frames']:>7}{'x'.join(map(str, r['grid'])):>14}"
            f"{r['mmfeed_ms']:>11.1f}{r['mmfeed_cpu_ms']:>9.1f}{r['peer_decode_ms']:>10.1f}{r['peer_process_ms']:>9.1f}"
            f"{r['frames'] / r['mmfeed_ms'] * 1e3:>13.1f}{r['frames'] / peer_ms * 1e3:>11.1f}{r['speedup']:>8.1f}x"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default="qwen2.5-vl,qwen3-vl")
    parser.add_argument("--peer-python", default=str(ROOT / ".venv-tv" / "bin" / "python"))
    parser.add_argument("--json")
    args = parser.parse_args()
    if not Path(args.peer_python).exists():
        sys.exit(f"{args.peer_python} not found: `make test-oracles` makes the torchvision environment")
    cores, models = _mmfeed.usable_cpus(), args.models.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_clips(folder)
        rows, jobs = time_mmfeed(folder, models, args.repeat)
        report = time_peer(folder, jobs, rows, args.peer_python, args.repeat)
        pool_s, serial_s = time_pool(folder, rows, cores, args.repeat)
        loader_rates = time_loader(folder, models, cores, args.repeat)

    print_rows(rows, report["torch"], args.repeat)
    speedups = [r["speedup"] for r in rows]
    print(
        f"\nspeedup on one thread: median {statistics.median(speedups):.1f}x ({min(speedups):.1f}x-{max(speedups):.1f}x)"
    )
    print(f"mmfeed on {cores} threads: {len(rows) / pool_s:.2f} clips/s, {serial_s / pool_s:.2f}x its one-thread rate")
    for model, (rate, cpu_ms) in loader_rates.items():
        print(
            f"mmfeed.Loader, {model}, {cores} workers: {rate:.2f} samples/s (one clip each), "
            f"{cpu_ms:.0f} CPU ms per sample"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"rows": rows, "cores": cores, "pool_speedup": serial_s / pool_s, "loader": loader_rates}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
