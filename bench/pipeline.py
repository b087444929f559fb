"""mmfeed bench: the talk's experiment on this machine, mmfeed against the Python pipelines.

The demo data set is loaded into batches by each system, side by side in one invocation on the
same data and the same CPU budget, while a trainer stand-in consumes the batches:

  - naive: a Python loop, one sample at a time: boto3 GET (or a file read), the Hugging Face
    Qwen2-VL processor (PIL backend; --image-backend torchvision: its torchvision backend,
    transformers' default where torchvision is installed, run in .venv-tv, while mmfeed then runs
    with image_backend="torchvision"), apply_chat_template + tokenizer (the talk's baseline);
  - torch-dataloader: a PyTorch DataLoader with --workers worker processes running the same code;
  - spdl: SPDL's pipeline (PyPI `spdl`): GETs 32 at a time on its thread pool, the same
    preprocessing on --workers threads, batches aggregated and prefetched;
  - mmfeed-serial: mmfeed doing the same work one sample after another on one thread;
  - mmfeed: concurrent mode (fetches in flight, --workers CPU workers, batches prefetched);
  - mmfeed-ray (with --ray): mmfeed.ray.Loader, the same engine in --ray-actors Ray actors of
    --workers / --ray-actors workers each on a local Ray instance of --workers CPUs (started
    before the trainer, as a cluster is; the actors start with the loader), the batches coming
    through Ray's object store.

The budget: --workers N (default: the cores this process may use, its CPU affinity capped by a
cgroup v2 cpu.max quota) is DataLoader's num_workers, SPDL's processing concurrency and mmfeed's
workers alike; --cpus K pins the benchmark and everything it starts to K cores first.

Sources: "s3", the latency-injecting object server (tests/support/objectstore.py: nginx answering S3
GetObject path-style, log-normal first byte with a 50 ms median and 200 ms p99, 32 MB/s per
connection), started and stopped here; "local", the same files on disk.

The trainer stand-in sleeps a fixed step per batch (no CPU), or with --trainer model runs a real
Qwen-VL-shaped training step on a GPU (bench/bench_model.py; the table then shows NVML's GPU busy
share beside the compute share, and the mean step). The step is chosen as in the talk:
256 samples took over 100 s to prepare one after another while a step trained for 15-20 s, so
the naive loop kept the GPU busy about 15% of the time. `--step-ms auto` (the default) times the
naive loop on the first two batches and sets the step to 15/85 of its per-batch time, which puts
the naive loop at about 15%. A second table runs the fastest systems with an infinitely fast
trainer (step 0): raw samples/s.

Each system runs in its own process, so its CPU time and peak RSS are its own. Reported per
system: GPU utilisation (compute / wall), the same after the first batch (steady state), the
data-wait share, samples/s, CPU-seconds per sample (the process and its workers), peak RSS
(the process plus its largest worker), peak PSS (the sum over the process and all its workers,
a shared page counted once: bench/memory.py; the figure that compares one process with a pool
of them), time to first batch. Written to --out: bench.json
(with each step's start and end, `timeline`), utilization.png (utilisation over time per
system) and mmfeed's Perfetto timeline per source.

Two sizing experiments replace those tables when asked (either or both):

  --scaling       step 0 from local files (unless --sources) for workers 1, 2, 4, ... up to the
                  cores, mmfeed and the best Python peer (torch-dataloader): samples/s, CPU s per
                  sample, and mmfeed's single-threaded share (busy seconds of its one-thread
                  stages over its CPU seconds) with the Amdahl ceiling it implies (1 / share);
  --cores-needed  for each parallel system, the fewest cores (affinity 1, 2, 4, ... up to the
                  cores; workers = cores) at which the trainer stays >= 95% busy after the first
                  batch at the --step-ms demand (auto: the talk's ratio).

One file of about 1,020 lines: every system's run, the measurements (GPU share, CPU, RSS, PSS),
the tables and the sizing experiments read one row type and one run loop; the peers' pipelines
are in bench/peers/.

Usage: mmfeed bench [--quick] [--samples N] [--sources s3,local] [--systems ...]
                    [--step-ms auto|MS] [--out DIR] [--data DIR] [--trainer sleep|model]
                    [--workers N] [--cpus K] [--scaling] [--cores-needed] [--ray [--ray-actors N]]
                    [--image-backend pil|torchvision]
       python bench/pipeline.py ...   (the same; mmfeed bench runs this file from the source tree)

A development tool, not part of the package: it needs this source tree (the data set generator
and the object server in tests/support/, the tokenizer and chat templates in tests/data/) and
the benchmark peers of requirements.txt.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))  # datagen, objectstore

import memory  # noqa: E402  (bench/, beside this file)
from peers.hf_sample import HFSample  # noqa: E402
from peers.pipelines import dataloader_batches, naive_batches, spdl_batches  # noqa: E402

SYSTEMS = ("naive", "torch-dataloader", "spdl", "mmfeed-serial", "mmfeed", "mmfeed-ray")
RAY_SYSTEM = "mmfeed-ray"  # run only when asked (--ray, or named in --systems)
SOURCES = ("s3", "local")
PEERS = ("naive", "torch-dataloader", "spdl")
STEP0_SYSTEMS = ("torch-dataloader", "spdl", "mmfeed", RAY_SYSTEM)  # the throughput table: the fastest of each kind
PARALLEL = STEP0_SYSTEMS  # the systems --workers sizes; naive and mmfeed-serial run on one thread
SCALING_SYSTEMS = ("torch-dataloader", "mmfeed")  # mmfeed and the best Python peer (DataLoader + HF processor)
BUSY_ENOUGH = 0.95  # --cores-needed: the trainer's steady utilisation a system must reach
NAIVE_SHARE = 0.15  # the talk: a 15-20 s step against 100+ s of serial preparation
BUCKET = "s3"  # the object server's S3 location doubles as the bucket name
TEMPLATE_FILES = {"qwen2-vl": "qwen2_vl.jinja", "qwen2.5-vl": "qwen2_vl.jinja", "qwen3-vl": "qwen3_vl.jinja"}
FIELDS = (
    "gpu_utilization",
    "steady_gpu_utilization",
    "data_wait_share",
    "samples_per_s",
    "cpu_s_per_sample",
    "peak_rss_mb",
    "peak_pss_mb",
    "time_to_first_batch_s",
)


def _cpu_seconds() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def mmfeed_batches(
    manifest: Path,
    tokenizer: Path,
    max_pixels: int,
    batch: int,
    mode: str,
    trace: str,
    workers: int,
    stages: dict,
    device: str | None = None,
    model: str = "qwen2-vl",
    image_backend: str = "pil",
):
    """mmfeed's batches; with a CUDA `device`, copied there ahead of the trainer on a side stream.
    Once the last batch is taken, `stages` gets the loader's metrics()["stages"]."""
    import mmfeed

    on_gpu = dict(tensors="torch", device=device) if device and device.startswith("cuda") else {}
    with mmfeed.Loader(
        manifest,
        tokenizer=tokenizer,
        model=model,
        max_pixels=max_pixels,
        batch_size=batch,
        mode=mode,
        workers=workers,
        shuffle=False,
        trace_path=trace,
        image_backend=image_backend,
        **on_gpu,
    ) as loader:
        yield from loader
        if loader.errors():
            raise RuntimeError(f"mmfeed skipped samples: {loader.errors()[:2]}")
        stages.update(loader.metrics()["stages"])


def mmfeed_ray_batches(
    manifest: Path,
    tokenizer: Path,
    max_pixels: int,
    batch: int,
    workers: int,
    actors: int,
    model: str,
    stages: dict,
    image_backend: str = "pil",
):
    """mmfeed.ray.Loader's batches from `actors` actors of workers / actors engine threads each, on
    the Ray instance run_one started. Once the last batch is taken, stages["actors_cpu_s"] is the
    CPU time of the actors' processes over their parts (Ray's workers are not this process's
    children, whose time the figures count)."""
    import mmfeed.ray

    with mmfeed.ray.Loader(
        manifest,
        num_actors=actors,
        actor_options={"num_cpus": workers / actors},
        tokenizer=tokenizer,
        model=model,
        max_pixels=max_pixels,
        batch_size=batch,
        workers=max(1, workers // actors),
        shuffle=False,
        image_backend=image_backend,
    ) as loader:
        yield from loader
        if loader.errors():
            raise RuntimeError(f"mmfeed.ray skipped samples: {loader.errors()[:2]}")
        stages["actors_cpu_s"] = sum(a["cpu_s"] for a in loader.metrics()["actors"])


def start_local_ray(cpus: int) -> None:
    """A Ray instance of `cpus` CPUs on this machine, its workers given the object server's settings."""
    import ray

    env = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "MMFEED_"))}
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})


# ---- one system in this process ------------------------------------------------------------


def train(batches, step, progress) -> dict:
    """The trainer stand-in: takes batches, runs `step` on each, times its waits and steps."""
    start_cpu, start = _cpu_seconds(), time.perf_counter()
    waited, computed, samples, first, timeline = 0.0, 0.0, 0, None, []
    it = iter(batches)
    while True:
        t = time.perf_counter()
        batch = next(it, None)
        got = time.perf_counter()
        waited += got - t
        if batch is None:
            break
        if first is None:
            first = got - start
        samples += len(batch["input_ids"])
        step(batch)
        done = time.perf_counter()
        computed += done - got
        timeline.append((round(got - start, 4), round(done - start, 4)))
        progress(samples)
    total = time.perf_counter() - start
    del it
    import gc

    gc.collect()  # join worker processes now, so their CPU is counted here
    return {
        "samples": samples,
        "seconds": total,
        "cpu": _cpu_seconds() - start_cpu,
        "waited": waited,
        "computed": computed,
        "first_batch": first or total,
        "timeline": timeline,
    }


def system_batches(args, ds: HFSample, manifest: Path, tokenizer: Path, workers: int, stages: dict):
    """The batches of the system `args.one`: a Python peer over `ds`, or mmfeed's engine, which
    fills `stages` once its last batch is taken."""
    if args.one == "naive":
        return naive_batches(ds, args.batch_size)
    if args.one == "torch-dataloader":
        return dataloader_batches(ds, args.batch_size, workers)
    if args.one == "spdl":
        return spdl_batches(ds, args.batch_size, workers)
    if args.one == RAY_SYSTEM:
        return mmfeed_ray_batches(
            manifest,
            tokenizer,
            args.max_pixels,
            args.batch_size,
            workers,
            args.ray_actors,
            args.model,
            stages,
            args.image_backend,
        )
    concurrent = args.one == "mmfeed"  # mmfeed-serial: the same engine on one thread, untraced, on the host
    return mmfeed_batches(
        manifest,
        tokenizer,
        args.max_pixels,
        args.batch_size,
        "concurrent" if concurrent else "serial",
        str(args.trace or "") if concurrent else "",
        workers,
        stages,
        args.device if concurrent and args.trainer == "model" else None,
        model=args.model,
        image_backend=args.image_backend,
    )


def trainer_step(args):
    """The trainer's step on a batch, and with the model trainer NVML's sampler of the GPU's busy
    share, started (None without one)."""
    if args.trainer != "model":
        seconds = args.step_ms / 1000
        return (lambda batch: time.sleep(seconds)), None
    from bench_model import Nvml, Sampler, make_train_step

    step = make_train_step(device=args.device, preset=args.model_preset)
    gpu = Nvml.open()
    sampler = None
    if gpu:
        sampler = Sampler(gpu)
        sampler.start()
    return step, sampler


def system_figures(name: str, r: dict, workers: int, peak_pss_mb: float) -> dict:
    """One system's reported figures from its trainer's timings `r` and this process's usage."""
    affinity = sorted(os.sched_getaffinity(0))  # what the run had: --cpus or --cores-needed's pinning
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "name": name,
        "samples": r["samples"],
        "workers": workers,
        "cpus": len(affinity),
        "affinity": affinity,
        "gpu_utilization": r["computed"] / r["seconds"],
        "steady_gpu_utilization": r["computed"] / max(r["seconds"] - r["first_batch"], 1e-9),
        "data_wait_share": r["waited"] / r["seconds"],
        "samples_per_s": r["samples"] / r["seconds"],
        "cpu_s_per_sample": r["cpu"] / max(r["samples"], 1),
        "peak_rss_mb": (own.ru_maxrss + children.ru_maxrss) / 1024,
        "peak_pss_mb": peak_pss_mb,
        "time_to_first_batch_s": r["first_batch"],
        "seconds": r["seconds"],
        "cpu_seconds": r["cpu"],
        "data_seconds_per_batch": r["waited"] / max(len(r["timeline"]), 1),
        "step_ms_mean": 1000 * r["computed"] / max(len(r["timeline"]), 1),
        "timeline": r["timeline"],
    }


def run_one(args) -> dict:
    """Runs one system in this process and returns its figures. Every system's process imports
    torch and transformers first, as a training process has: imports are not timed."""
    import torch  # noqa: F401
    from transformers.models.qwen2_vl import image_processing_pil_qwen2_vl  # noqa: F401

    tokenizer = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
    template = ROOT / "src" / "text" / "templates" / TEMPLATE_FILES[args.model]
    manifest = Path(args.manifest)
    ds = HFSample(manifest, tokenizer, template, args.max_pixels, args.model, args.image_backend)
    workers = args.workers if args.one in PARALLEL else 1
    stages: dict = {}
    if args.one == RAY_SYSTEM:
        start_local_ray(workers)  # up before the trainer, as a cluster is; the actors start with the loader
    batches = system_batches(args, ds, manifest, tokenizer, workers, stages)
    step, sampler = trainer_step(args)

    def progress(samples: int) -> None:
        print(f"progress {samples}", flush=True)

    with memory.PeakPss() as peak:  # the loader's processes and threads start with the first batch
        r = train(batches, step, progress)
    r["cpu"] += stages.pop("actors_cpu_s", 0.0)
    out = system_figures(args.one, r, workers, peak.mb)
    if stages:
        out["stages"] = {name: stage for name, stage in stages.items() if isinstance(stage, dict)}
    if sampler:
        out["nvml_gpu_utilization"] = sampler.stop()  # what the GPU itself reports busy
    return out


# ---- the driver ------------------------------------------------------------------------------


class Progress:
    """One line on the terminal, redrawn: which run, how far, overall."""

    def __init__(self, total_samples: int):
        self.total, self.done, self.live = total_samples, 0, sys.stderr.isatty()

    def update(self, label: str, samples: int, of: int) -> None:
        if not self.live:
            return
        done = self.done + samples
        width = 30
        filled = int(width * done / max(self.total, 1))
        sys.stderr.write(
            f"\r  [{'#' * filled}{'.' * (width - filled)}] {100 * done / max(self.total, 1):3.0f}%  "
            f"{label:<28} {samples}/{of} samples "
        )
        sys.stderr.flush()

    def finish(self, label: str, samples: int, seconds: float) -> None:
        self.done += samples
        if self.live:
            sys.stderr.write("\r" + " " * 90 + "\r")
        sys.stderr.write(f"  {label:<28} {samples} samples in {seconds:.1f} s\n")
        sys.stderr.flush()


def spawn(
    system: str,
    manifest: Path,
    step_ms: float,
    args,
    env: dict,
    label: str,
    progress: Progress,
    samples: int,
    workers: int,
    trace: Path | None = None,
    affinity: list[int] | None = None,
    trainer: str | None = None,
) -> dict:
    """Runs `system` in a child process (pinned to the CPUs `affinity` when given) and returns
    its figures."""
    # The torchvision backend's Python peers run in its own environment (.venv-tv): PyPI's
    # torchvision needs a torch build that cannot share the project's venv.
    python = args.torchvision_python if args.image_backend == "torchvision" and system in PEERS else sys.executable
    command = [
        python,
        __file__,
        "--one",
        system,
        "--manifest",
        str(manifest),
        "--step-ms",
        str(step_ms),
        "--max-pixels",
        str(args.max_pixels),
        "--batch-size",
        str(args.batch_size),
        "--model",
        args.model,
        "--workers",
        str(workers),
        "--trainer",
        trainer or args.trainer,
        "--device",
        args.device,
        "--model-preset",
        args.model_preset,
        "--ray-actors",
        str(args.ray_actors),
        "--image-backend",
        args.image_backend,
    ]
    if trace:
        command += ["--trace", str(trace)]
    if affinity:
        command += ["--affinity", ",".join(map(str, affinity))]
    start = time.perf_counter()
    result = None
    # stderr to a file: a child that writes much there would block on a full pipe we do not read.
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        for line in proc.stdout:
            if line.startswith("progress "):
                progress.update(label, int(line.split()[1]), samples)
            elif line.startswith("{"):
                result = json.loads(line)
        if proc.wait() != 0 or result is None:
            err.seek(0)
            raise SystemExit(f"mmfeed bench: {label} failed (exit {proc.returncode}):\n{err.read()[-3000:]}")
    progress.finish(label, result["samples"], time.perf_counter() - start)
    return result


def plot(results: list[dict], path: Path, step_ms: float, step_label: str) -> None:
    """Utilisation over time, one panel per source, one line per system: the share of each
    window the trainer spent computing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sources = list(dict.fromkeys(r["source"] for r in results))
    fig, axes = plt.subplots(len(sources), 1, figsize=(10, 3.6 * len(sources)), squeeze=False)
    for ax, source in zip(axes[:, 0], sources):
        runs = [r for r in results if r["source"] == source]
        horizon = max(r["seconds"] for r in runs)
        window = max(horizon / 40, 8 * step_ms / 1000, 0.25)
        for r in runs:
            edges = [i * window for i in range(int(r["seconds"] / window) + 2)]
            busy = [0.0] * (len(edges) - 1)
            for a, b in r["timeline"]:
                for k in range(int(a / window), min(int(b / window) + 1, len(busy))):
                    busy[k] += max(0.0, min(b, edges[k + 1]) - max(a, edges[k]))
            xs = [(edges[k] + min(edges[k + 1], r["seconds"])) / 2 for k in range(len(busy)) if edges[k] < r["seconds"]]
            spans = [min(edges[k + 1], r["seconds"]) - edges[k] for k in range(len(xs))]  # the last one is partial
            ax.plot(
                xs,
                [100 * min(busy[k] / max(spans[k], 1e-9), 1.0) for k in range(len(xs))],
                label=f"{r['name']} ({100 * r['gpu_utilization']:.0f}%)",
            )
        ax.set_title(f"{source}: trainer busy ({step_label})")
        ax.set_xlabel("seconds")
        ax.set_ylabel("GPU utilisation %")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_table(title: str, results: list[dict], model: bool = False) -> None:
    """The utilisation table; with the model trainer (`model`), NVML's GPU busy share beside the
    compute share and the mean step."""
    print(f"\n{title}")
    header = (
        f"{'source':<7}{'system':<17}{'GPU util':>9}{'steady':>8}"
        + (f"{'NVML busy':>10}{'step ms':>9}" if model else "")
        + f"{'data wait':>10}{'samples/s':>10}{'CPU s/sample':>13}{'peak RSS MB':>12}{'peak PSS MB':>12}"
        + f"{'1st batch s':>12}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        nvml = r.get("nvml_gpu_utilization")
        gpu = f"{'n/a' if nvml is None else f'{100 * nvml:.0f}%':>10}{r['step_ms_mean']:>9.1f}" if model else ""
        print(
            f"{r['source']:<7}{r['name']:<17}{100 * r['gpu_utilization']:>8.0f}%"
            f"{100 * r['steady_gpu_utilization']:>7.0f}%{gpu}{100 * r['data_wait_share']:>9.0f}%"
            f"{r['samples_per_s']:>10.1f}{r['cpu_s_per_sample']:>13.3f}{r['peak_rss_mb']:>12.0f}"
            f"{r['peak_pss_mb']:>12.0f}{r['time_to_first_batch_s']:>12.2f}"
        )
    for source in dict.fromkeys(r["source"] for r in results):
        by = {r["name"]: r for r in results if r["source"] == source}
        peers = [(by[n]["samples_per_s"], n) for n in PEERS if n in by]
        if "mmfeed" in by and peers:
            best, name = max(peers)
            print(
                f"{source}: mmfeed {by['mmfeed']['samples_per_s'] / best:.1f}x the samples/s of the best "
                f"Python peer ({name})"
            )


def print_scaling(rows: list[dict], cores: int) -> None:
    """The scaling table: step-0 throughput and CPU cost by workers, and mmfeed's serial part."""
    workers = ", ".join(str(w) for w in dict.fromkeys(r["workers"] for r in rows))
    print(f"\nScaling at step 0 (an infinitely fast trainer), workers {workers} on {cores} cores")
    header = (
        f"{'source':<7}{'system':<17}{'workers':>8}{'samples/s':>10}{'speed-up':>9}{'steady':>8}"
        f"{'speed-up':>9}{'cores busy':>11}{'CPU s/sample':>13}{'1-thread share':>15}{'Amdahl ceiling':>15}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        share = r.get("single_thread_share")
        ceiling = r.get("amdahl_ceiling")
        steady, steady_speedup = r["steady_samples_per_s"], r["steady_speedup"]
        print(
            f"{r['source']:<7}{r['name']:<17}{r['workers']:>8}{r['samples_per_s']:>10.1f}{r['speedup']:>8.2f}x"
            f"{'-' if steady is None else f'{steady:.1f}':>8}"
            f"{'-' if steady_speedup is None else f'{steady_speedup:.2f}x':>9}{r['cores_busy']:>11.2f}"
            f"{r['cpu_s_per_sample']:>13.3f}{'-' if share is None else f'{100 * share:.2f}%':>15}"
            f"{'-' if ceiling is None else f'{ceiling:.1f}x' if ceiling < 100 else f'{ceiling:.0f}x':>15}"
        )
    stages = sorted({name for r in rows for name in r.get("single_thread_stages", [])})
    print(
        "steady: samples/s after the first batch (the pipeline full, as a long run sees it); cores busy: CPU "
        "seconds over wall seconds, the process and its workers (beyond its workers: the trainer's thread, "
        "the reads and the kernel's page faults)"
    )
    if any("single_thread_share" in r for r in rows):
        print(
            f"1-thread share: busy seconds of mmfeed's one-thread stages ({', '.join(stages) or 'none reported'}) "
            f"over its CPU seconds (process and children); Amdahl ceiling: 1 / share, the most any number of "
            f"workers can speed it up"
        )


def print_cores_needed(rows: list[dict], step_label: str, cores: int) -> None:
    """The cores-needed table: per system, the fewest cores and the utilisation at each tried."""
    print(
        f"\nCores needed: the fewest cores (workers = cores) at which the trainer stays >= "
        f"{100 * BUSY_ENOUGH:.0f}% busy after its first batch, {step_label}; tried 1 .. {cores}"
    )
    header = f"{'source':<7}{'system':<17}{'cores needed':>13}  steady utilisation at each tried (cores: busy)"
    print(header)
    print("-" * len(header))
    for r in rows:
        tried = "  ".join(f"{t['cores']}: {100 * t['steady_gpu_utilization']:.0f}%" for t in r["tried"])
        print(f"{r['source']:<7}{r['name']:<17}{r['cores_needed']:>13}  {tried}")


TRIED_FIELDS = (  # --cores-needed: the figures kept of each core count tried
    "workers",
    "cpus",
    "gpu_utilization",
    "steady_gpu_utilization",
    "samples_per_s",
    "cpu_s_per_sample",
    "peak_rss_mb",
    "peak_pss_mb",
)


def parser_of_experiments() -> argparse.ArgumentParser:
    """The parser, with the flags that choose the experiments: the data set, the sources and
    systems, the trainer's step, the CPU budget and where the results go."""
    parser = argparse.ArgumentParser(
        prog="mmfeed bench", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="128 samples from the object store, no step-0 table (under 3 minutes on 2 cores)",
    )
    parser.add_argument("--samples", type=int, help="samples in the data set (default 256; --quick 128)")
    parser.add_argument("--sources", help="s3 and/or local (default s3,local; --quick s3; --scaling local)")
    parser.add_argument(
        "--systems",
        help=f"of {','.join(SYSTEMS)} (default all; --scaling "
        f"{','.join(SCALING_SYSTEMS)}; --cores-needed {','.join(PARALLEL)})",
    )
    parser.add_argument("--step-ms", default="auto", help="trainer step per batch in ms, or auto (the talk's ratio)")
    parser.add_argument("--no-step0", action="store_true", help="skip the step-0 throughput table")
    parser.add_argument(
        "--workers",
        type=int,
        help="DataLoader num_workers, SPDL's processing concurrency and mmfeed's workers alike "
        "(default: the cores this process may use)",
    )
    parser.add_argument("--cpus", type=int, help="pin the benchmark and everything it starts to this many cores")
    parser.add_argument(
        "--scaling",
        action="store_true",
        help="instead of the tables: step 0 for workers 1, 2, 4, ... up to the cores, mmfeed against "
        "the DataLoader, with mmfeed's single-threaded share and its Amdahl ceiling",
    )
    parser.add_argument(
        "--cores-needed",
        action="store_true",
        help=f"instead of the tables: per system, the fewest cores (1, 2, 4, ...) keeping the trainer "
        f">= {100 * BUSY_ENOUGH:.0f}%% busy at the --step-ms demand",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="where the report, plot, traces go")
    parser.add_argument("--data", type=Path, help="the data set's directory (default OUT/data; reused if present)")
    parser.add_argument("--json", type=Path, help="the report (default OUT/bench.json)")
    return parser


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of each run: the preprocessing every system does, the trainer, mmfeed-ray's actors,
    and the internal ones a child process is started with."""
    parser.add_argument(
        "--model",
        choices=sorted(TEMPLATE_FILES),
        default="qwen2-vl",
        help="the model whose preprocessing every system runs (its image processor and chat template)",
    )
    parser.add_argument("--max-pixels", type=int, default=1003520)
    parser.add_argument(
        "--image-backend",
        choices=("pil", "torchvision"),
        default="pil",
        help="the images every system makes: HF's PIL or torchvision processor, mmfeed's image_backend (default pil)",
    )
    parser.add_argument(
        "--torchvision-python",
        default=str(ROOT / ".venv-tv" / "bin" / "python"),
        help="the interpreter the Python peers run in with --image-backend torchvision (make bench-torchvision)",
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--trainer",
        choices=("sleep", "model"),
        default="sleep",
        help="sleep for the step, or run a real Qwen-VL-shaped training step (GPU)",
    )
    parser.add_argument("--device", default="cuda", help="device of --trainer model")
    parser.add_argument(
        "--model-preset",
        choices=("default", "tiny"),
        default="default",
        help="size of --trainer model: default (585M parameters, the GPU run) or tiny (CPU checks)",
    )
    parser.add_argument(
        "--ray", action="store_true", help="add mmfeed-ray: mmfeed.ray.Loader on a local Ray instance of --workers CPUs"
    )
    parser.add_argument("--ray-actors", type=int, default=1, help="mmfeed-ray's actors (default 1)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one system, print JSON
    parser.add_argument("--manifest", help=argparse.SUPPRESS)
    parser.add_argument("--trace", help=argparse.SUPPRESS)
    parser.add_argument("--affinity", help=argparse.SUPPRESS)  # internal: the CPUs the one system runs on


@dataclass
class Plan:
    """What the driver runs, from the flags: the budget, the data set's size, and each experiment's
    sources and systems (none where the experiment is not asked for)."""

    cores: int
    allowed: list[int]  # the CPUs this process may use, after --cpus
    workers: int
    samples: int
    sources: list[str]
    scaling_sources: list[str]
    table_systems: list[str]
    step0_systems: list[str]
    scaling_systems: list[str]
    cores_systems: list[str]
    counts: list[int]  # the worker or core counts a sweep tries
    calibration_samples: int  # the naive loop's samples timed for --step-ms auto; 0: no calibration

    def total_samples(self) -> int:
        """The samples every run together loads, for the progress line."""
        runs = (
            len(self.sources) * (len(self.table_systems) + len(self.step0_systems))
            + len(self.scaling_sources) * len(self.scaling_systems) * len(self.counts)
            + len(self.sources) * len(self.cores_systems) * len(self.counts)
        )
        return self.samples * runs + self.calibration_samples


def plan_runs(args, parser: argparse.ArgumentParser) -> Plan:
    """Checks the flags (a wrong one ends the program with parser.error), pins the CPUs of --cpus
    and works out what to run."""
    import budget  # the driver's alone: a peer in .venv-tv (--image-backend torchvision) has no mmfeed

    if args.image_backend == "torchvision" and not Path(args.torchvision_python).exists():
        parser.error(f"--image-backend torchvision: {args.torchvision_python} not found (make bench-torchvision)")
    if args.ray_actors < 1:
        parser.error("--ray-actors takes a count of 1 or more")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers takes a count of 1 or more")
    if args.cpus is not None:
        try:
            budget.pin(args.cpus)  # before anything starts, so that every child inherits it
        except ValueError as e:
            parser.error(str(e))
    cores = budget.cores_available()
    tables = not (args.scaling or args.cores_needed)
    sources = (args.sources or ("s3" if args.quick else "s3,local")).split(",")
    given = args.systems.split(",") if args.systems else None
    systems = given or [s for s in SYSTEMS if s != RAY_SYSTEM or args.ray]
    unknown = [s for s in systems if s not in SYSTEMS] + [s for s in sources if s not in SOURCES]
    if unknown:
        parser.error(f"unknown systems or sources: {', '.join(unknown)}")
    if args.step_ms != "auto":
        try:
            float(args.step_ms)
        except ValueError:
            parser.error("--step-ms takes a number of milliseconds or auto")
    step0 = tables and not args.quick and not args.no_step0 and args.trainer == "sleep"
    table_systems = systems if tables else []
    scaling_systems = [s for s in (given or SCALING_SYSTEMS) if s in PARALLEL] if args.scaling else []
    if args.scaling and not scaling_systems:
        parser.error(f"--scaling sweeps workers: give it one of {', '.join(PARALLEL)}")
    cores_systems = (given or [s for s in PARALLEL if s != RAY_SYSTEM or args.ray]) if args.cores_needed else []
    # With the model trainer the step is the model's: nothing to calibrate.
    calibrate = args.step_ms == "auto" and args.trainer == "sleep" and bool(table_systems or cores_systems)
    return Plan(
        cores=cores,
        allowed=sorted(os.sched_getaffinity(0)),
        workers=args.workers or cores,
        samples=args.samples or (128 if args.quick else 256),
        sources=sources,
        scaling_sources=(args.sources or "local").split(","),  # CPU scaling: no object-store latency in the way
        table_systems=table_systems,
        step0_systems=[s for s in STEP0_SYSTEMS if s in systems] if step0 else [],
        scaling_systems=scaling_systems,
        cores_systems=cores_systems,
        counts=budget.doubling(cores),
        calibration_samples=2 * args.batch_size if calibrate else 0,
    )


def bench_config(args, plan: Plan, summary: dict) -> dict:
    """The report's "config": the data set, the preprocessing, the budget and the trainer."""
    import budget

    return {
        "samples": summary["samples"],
        "images": summary["images"],
        "bytes": summary["bytes"],
        "batch_size": args.batch_size,
        "max_pixels": args.max_pixels,
        "model": args.model,
        "image_backend": args.image_backend,
        "cores": os.cpu_count(),
        "budget": {
            "workers": plan.workers,
            "cores": plan.cores,
            "cpus": args.cpus,
            "affinity": plan.allowed,
            "cgroup_cpu_limit": budget.cgroup_cpu_limit(),
        },
        "trainer": args.trainer,
        "device": args.device if args.trainer == "model" else None,
        "object_store": {"first_byte_median_ms": 50, "first_byte_p99_ms": 200, "per_connection_mb_s": 32},
    }


def source_manifests(plan: Plan, data: Path, tmp: Path, stack: contextlib.ExitStack) -> tuple[dict, dict]:
    """The manifest each source reads and the runs' environment; the object server started on
    `stack` only when a source reads from it."""
    from objectstore import Nginx, rewrite_images, s3_env

    manifest = data / "manifest.jsonl"
    paths, env = {"local": manifest}, dict(os.environ)
    needed = (plan.sources if plan.table_systems or plan.cores_systems else []) + (
        plan.scaling_sources if plan.scaling_systems else []
    )
    if "s3" in needed:
        server = stack.enter_context(Nginx(data, tmp / "nginx"))
        paths["s3"] = rewrite_images(manifest, lambda ref: f"s3://{BUCKET}/{ref}", tmp / "remote.jsonl")
        env = s3_env(f"http://127.0.0.1:{server.port}", "bench", "bench")  # nginx does not check signatures
    return paths, env


@dataclass
class Runner:
    """Runs systems in child processes on a source's manifest and keeps the report."""

    args: argparse.Namespace
    paths: dict  # source: its manifest
    env: dict
    progress: Progress
    samples: int
    report: dict
    report_path: Path

    def run(self, system: str, source: str, step_ms: float, label: str, workers: int, **options) -> dict:
        """Runs `system` on `source`'s manifest in a child process; returns its figures."""
        return spawn(
            system,
            self.paths[source],
            step_ms,
            self.args,
            self.env,
            f"{source}: {label}",
            self.progress,
            self.samples,
            workers,
            **options,
        )

    def write_report(self) -> None:  # after every run, so that a run cut short still leaves its figures
        self.report_path.write_text(json.dumps(self.report, indent=1) + "\n")


def calibrate_step(runner: Runner, source: str, samples: int, tmp: Path) -> tuple[float, dict]:
    """--step-ms auto: times the naive loop on the first `samples` of `source` with no step, and
    returns the step that puts it at NAIVE_SHARE, with what was measured."""
    from objectstore import rewrite_images

    # The head lies elsewhere than the data set, so local image paths are made absolute.
    base = runner.paths[source].parent.resolve()
    head = rewrite_images(
        runner.paths[source], lambda ref: ref if "://" in ref else str(base / ref), tmp / "calibrate.jsonl"
    )
    head.write_text("\n".join(head.read_text().splitlines()[:samples]) + "\n")
    r = spawn("naive", head, 0.0, runner.args, runner.env, f"calibrate: naive on {source}", runner.progress, samples, 1)
    per_batch = r["data_seconds_per_batch"]
    step_ms = 1000 * per_batch * NAIVE_SHARE / (1 - NAIVE_SHARE)
    return step_ms, {"source": source, "samples": samples, "naive_seconds_per_batch": per_batch}


def choose_step(runner: Runner, plan: Plan, tmp: Path) -> tuple[float, dict | None]:
    """The trainer's step in ms and its calibration (None when given or not needed), both also
    recorded in the report's config."""
    args, calibration = runner.args, None
    if plan.calibration_samples:
        step_ms, calibration = calibrate_step(runner, plan.sources[0], plan.calibration_samples, tmp)
    elif args.trainer == "model" or args.step_ms == "auto":
        step_ms = 0.0  # not used: the step is the model's, or only step-0 runs follow
    else:
        step_ms = float(args.step_ms)
    runner.report["config"].update(
        step_ms=step_ms,
        calibration=calibration,
        step_choice="the model's"
        if args.trainer == "model"
        else "auto: naive at 15% (the talk's ratio)"
        if calibration
        else "given",
    )
    return step_ms, calibration


def run_tables(runner: Runner, plan: Plan, step_ms: float) -> list[Path]:
    """The utilisation table's runs at `step_ms`, then the step-0 table's; returns mmfeed's traces."""
    traces = []
    for source in plan.sources:
        for system in plan.table_systems:
            trace = runner.args.out / f"mmfeed-trace-{source}.json" if system == "mmfeed" else None
            r = runner.run(system, source, step_ms, system, plan.workers, trace=trace)
            runner.report["systems"].append({"source": source, "step_ms": step_ms, **r})
            runner.write_report()
            if trace:
                traces.append(trace)
    for source in plan.sources:
        for system in plan.step0_systems:
            r = runner.run(system, source, 0.0, f"{system}, step 0", plan.workers)
            runner.report["step0"].append({"source": source, "step_ms": 0.0, **r})
            runner.write_report()
    return traces


def scaling_row(r: dict, first: dict | None, source: str, batch_size: int) -> dict:
    """A --scaling row from a run's figures `r`: its steady rate, cores busy and speed-ups over the
    sweep's first row (`first`; None: this is the first)."""
    r.pop("timeline")
    # After the first batch: what a long run sees once the pipeline is full (none when the data
    # set is one batch).
    after = r["samples"] - batch_size
    r["steady_samples_per_s"] = after / max(r["seconds"] - r["time_to_first_batch_s"], 1e-9) if after > 0 else None
    r["cores_busy"] = r["cpu_seconds"] / max(r["seconds"], 1e-9)
    base = first or r
    steady = (
        r["steady_samples_per_s"] / base["steady_samples_per_s"]
        if r["steady_samples_per_s"] and base["steady_samples_per_s"]
        else None
    )
    return {
        "source": source,
        "step_ms": 0.0,
        "speedup": r["samples_per_s"] / base["samples_per_s"],
        "steady_speedup": steady,
        **r,
    }


def run_scaling(runner: Runner, plan: Plan) -> None:
    """--scaling: each system at step 0 for each worker count, and mmfeed's serial share."""
    import budget

    for source in plan.scaling_sources:
        for system in plan.scaling_systems:
            sweep: list[dict] = []
            for n in plan.counts:
                r = runner.run(system, source, 0.0, f"{system}, {n} workers, step 0", n, trainer="sleep")
                sweep.append(scaling_row(r, sweep[0] if sweep else None, source, runner.args.batch_size))
                runner.report["scaling"].append(sweep[-1])
                runner.write_report()
            if system == "mmfeed":
                budget.serial_share(sweep)  # Amdahl: what runs on one thread bounds the speed-up
                runner.write_report()


def run_cores_needed(runner: Runner, plan: Plan, step_ms: float) -> None:
    """--cores-needed: each system on 1, 2, 4, ... cores until the trainer is busy enough."""
    for source in plan.sources:
        for system in plan.cores_systems:
            row = {"source": source, "name": system, "cores_needed": f"more than {plan.cores}", "tried": []}
            runner.report["cores_needed"].append(row)
            for n in plan.counts:
                r = runner.run(system, source, step_ms, f"{system} on {n} cores", n, affinity=plan.allowed[:n])
                row["tried"].append({"cores": n, **{k: r[k] for k in TRIED_FIELDS}})
                runner.write_report()
                if r["steady_gpu_utilization"] >= BUSY_ENOUGH:
                    row["cores_needed"] = n
                    runner.write_report()
                    break


def print_results(args, plan: Plan, summary: dict, report: dict, step_ms: float, calibration: dict | None) -> None:
    """The run's heading, its budget and the tables of the experiments that ran."""
    pinned = f", pinned with --cpus {args.cpus} (CPUs {','.join(map(str, plan.allowed))})" if args.cpus else ""
    print(
        f"\nmmfeed bench: {summary['samples']} samples ({summary['images']} images, {summary['bytes'] / 1e6:.0f} MB), "
        f"{args.model}, batches of {args.batch_size}, max_pixels {args.max_pixels}, trainer: {args.trainer}"
    )
    print(
        f"budget: {plan.workers} workers per system (DataLoader num_workers, SPDL processing concurrency, mmfeed "
        f"workers; naive and mmfeed-serial use one thread) on {plan.cores} cores{pinned}"
    )
    if args.trainer == "model":
        title = f"Trainer: a Qwen-VL-shaped training step on {args.device}"
        step_label = f"a {args.device} model step"
    else:
        title = f"Trainer step {step_ms:.0f} ms per batch" + (
            " (the talk's ratio: the naive loop's GPU busy ~15%)" if calibration else ""
        )
        step_label = f"step {step_ms:.0f} ms per batch" + (" (the talk's ratio)" if calibration else "")
    if report["systems"]:
        print_table(title, report["systems"], model=args.trainer == "model")
    if report["step0"]:
        print_table("Trainer step 0 (infinitely fast): how fast each system delivers", report["step0"])
    if report["scaling"]:
        print_scaling(report["scaling"], plan.cores)
    if report["cores_needed"]:
        print_cores_needed(report["cores_needed"], step_label, plan.cores)


def write_outputs(runner: Runner, step_ms: float, traces: list[Path]) -> None:
    """The report, the utilisation plot (when the tables ran) and where they and the traces are."""
    args, report = runner.args, runner.report
    runner.write_report()
    print(f"\nreport: {runner.report_path}")
    if report["systems"]:
        plot_path = args.out / "utilization.png"
        plot(
            report["systems"],
            plot_path,
            step_ms,
            f"{args.device} model step" if args.trainer == "model" else f"step {step_ms:.0f} ms per batch",
        )
        print(f"plot:   {plot_path}")
    for trace in traces:
        print(f"trace:  {trace} (open in ui.perfetto.dev)")


def main(argv: list[str] | None = None) -> int:
    """The driver: plans the runs, runs each system in a child process, prints and writes the
    results; with --one, the child that runs one system."""
    parser = parser_of_experiments()
    add_run_flags(parser)
    args = parser.parse_args(argv)
    if args.one:
        if args.affinity:
            os.sched_setaffinity(0, [int(cpu) for cpu in args.affinity.split(",")])
        args.step_ms = float(args.step_ms)
        print(json.dumps(run_one(args)), flush=True)
        return 0
    plan = plan_runs(args, parser)
    args.out.mkdir(parents=True, exist_ok=True)
    import datagen

    data = args.data or args.out / "data"
    print(f"mmfeed bench: writing or reusing {plan.samples} samples in {data}", file=sys.stderr, flush=True)
    summary = datagen.generate(data, samples=plan.samples, seed=0, workers=os.cpu_count())
    report = {
        "config": bench_config(args, plan, summary),
        "systems": [],
        "step0": [],
        "scaling": [],
        "cores_needed": [],
    }
    with tempfile.TemporaryDirectory(prefix="mmfeed-bench-") as tmp, contextlib.ExitStack() as stack:
        paths, env = source_manifests(plan, data, Path(tmp), stack)
        progress = Progress(plan.total_samples())
        runner = Runner(args, paths, env, progress, plan.samples, report, args.json or args.out / "bench.json")
        step_ms, calibration = choose_step(runner, plan, Path(tmp))
        traces = run_tables(runner, plan, step_ms)
        run_scaling(runner, plan)
        run_cores_needed(runner, plan, step_ms)
    print_results(args, plan, summary, report, step_ms, calibration)
    write_outputs(runner, step_ms, traces)
    return 0


if __name__ == "__main__":
    sys.exit(main())
