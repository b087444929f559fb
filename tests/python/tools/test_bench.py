"""`mmfeed bench` end to end on small data sets: every system runs in its own process, from the
object server (S3 GETs) and from local files, delivers every sample, on the same CPU budget; the
report has the documented shape, the plot and mmfeed's trace are written; --scaling and
--cores-needed report their sweeps. Figures are not asserted (timings), only that they are
consistent."""

import json
import math
import os
import subprocess
import sys

import budget
from conftest import ROOT

BENCH = ROOT / "bench" / "pipeline.py"
SYSTEMS = ["naive", "torch-dataloader", "spdl", "mmfeed-serial", "mmfeed"]
FIELDS = [
    "gpu_utilization",
    "steady_gpu_utilization",
    "data_wait_share",
    "samples_per_s",
    "cpu_s_per_sample",
    "peak_rss_mb",
    "time_to_first_batch_s",
]
PARALLEL = ["torch-dataloader", "spdl", "mmfeed"]  # the systems --workers sizes
TINY = ["--samples", 4, "--batch-size", 2, "--max-pixels", 50176, "--sources", "local"]  # the sweeps' smallest runs


def bench(tmp_path, *args):
    run = subprocess.run(
        [sys.executable, BENCH, "--out", tmp_path / "out", "--data", tmp_path / "data", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run, json.loads((tmp_path / "out" / "bench.json").read_text())


def check(r, samples):
    assert r["samples"] == samples, r
    assert all(r[f] > 0 for f in FIELDS), r
    assert r["gpu_utilization"] + r["data_wait_share"] <= 1.0001, r
    assert r["gpu_utilization"] <= r["steady_gpu_utilization"] <= 1.0001, r
    assert r["time_to_first_batch_s"] <= r["seconds"]


def test_every_system_from_the_object_store_and_local_files(tmp_path):
    run, out = bench(tmp_path, "--samples", 6, "--step-ms", 20, "--sources", "s3,local", "--no-step0")
    assert out["config"]["samples"] == 6 and out["config"]["step_ms"] == 20
    assert out["config"]["step_choice"] == "given" and out["step0"] == []
    assert [(r["source"], r["name"]) for r in out["systems"]] == [(s, n) for s in ("s3", "local") for n in SYSTEMS]
    for r in out["systems"]:
        check(r, 6)
    cores = budget.cores_available()  # the bench inherits this process's affinity
    assert out["config"]["budget"]["workers"] == out["config"]["budget"]["cores"] == cores
    assert [r["workers"] for r in out["systems"]] == [cores if r["name"] in PARALLEL else 1 for r in out["systems"]]
    assert f"budget: {cores} workers per system" in run.stdout
    for name in SYSTEMS:
        assert name in run.stdout
    assert "the samples/s of the best Python peer" in run.stdout
    assert (tmp_path / "out" / "utilization.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for source in ("s3", "local"):  # mmfeed's timeline, one per source
        events = json.loads((tmp_path / "out" / f"mmfeed-trace-{source}.json").read_text())["traceEvents"]
        assert any(e.get("name") == "assemble batch" for e in events)
        assert any(e.get("name") == "GET" for e in events) == (source == "s3")


def test_auto_step_follows_the_talks_ratio_and_step0_table(tmp_path):
    _, out = bench(tmp_path, "--samples", 16, "--sources", "s3", "--systems", "naive,spdl,mmfeed")
    cal = out["config"]["calibration"]
    assert cal["source"] == "s3" and cal["samples"] == 16 and cal["naive_seconds_per_batch"] > 0
    # The step is 15/85 of the naive loop's per-batch time on the calibration samples.
    assert abs(out["config"]["step_ms"] - 1000 * cal["naive_seconds_per_batch"] * 15 / 85) < 1e-6
    assert [r["name"] for r in out["systems"]] == ["naive", "spdl", "mmfeed"]
    assert [(r["name"], r["step_ms"]) for r in out["step0"]] == [("spdl", 0.0), ("mmfeed", 0.0)]
    for r in out["systems"] + out["step0"]:
        check(r, 16)


def test_ray_adds_mmfeed_ray_from_the_object_store(tmp_path):
    # Issue 21: mmfeed bench --ray runs mmfeed.ray.Loader (actors on a local Ray instance) beside
    # mmfeed, on the same budget, from the object server (the actors get its settings).
    run, out = bench(
        tmp_path,
        "--samples",
        8,
        "--batch-size",
        2,
        "--step-ms",
        10,
        "--sources",
        "s3",
        "--systems",
        "mmfeed,mmfeed-ray",
        "--ray",
        "--ray-actors",
        2,
    )
    assert [r["name"] for r in out["systems"]] == ["mmfeed", "mmfeed-ray"]
    assert [r["name"] for r in out["step0"]] == ["mmfeed", "mmfeed-ray"]
    cores = budget.cores_available()
    for r in out["systems"] + out["step0"]:
        check(r, 8)
        assert r["workers"] == cores
    assert "mmfeed-ray" in run.stdout


def test_model_trainer_from_local_files(tmp_path):
    # What bench/gpu/run.sh runs, on the CPU with the tiny model: no object store, no calibration.
    run, out = bench(
        tmp_path,
        "--quick",
        "--samples",
        8,
        "--batch-size",
        4,
        "--max-pixels",
        50176,
        "--sources",
        "local",
        "--systems",
        "naive,mmfeed",
        "--trainer",
        "model",
        "--device",
        "cpu",
        "--model-preset",
        "tiny",
    )
    assert out["config"]["trainer"] == "model" and out["config"]["device"] == "cpu"
    assert out["config"]["step_choice"] == "the model's" and out["config"]["calibration"] is None
    assert [(r["source"], r["name"]) for r in out["systems"]] == [("local", "naive"), ("local", "mmfeed")]
    for r in out["systems"]:
        check(r, 8)
        assert r["step_ms_mean"] > 0
        assert "nvml_gpu_utilization" not in r  # no GPU to ask
    assert "NVML busy" in run.stdout and "step ms" in run.stdout  # beside the compute share; n/a here


def test_auto_step_calibrates_on_local_files(tmp_path):
    # The calibration's head manifest lies outside the data set; its local image paths still resolve.
    _, out = bench(tmp_path, "--quick", "--samples", 8, "--sources", "local", "--systems", "mmfeed")
    assert out["config"]["calibration"]["source"] == "local" and out["config"]["step_ms"] > 0
    check(out["systems"][0], 8)


def test_workers_and_cpus_are_every_systems_budget(tmp_path):
    run, out = bench(
        tmp_path, *TINY, "--workers", 1, "--cpus", 1, "--systems", ",".join(PARALLEL), "--step-ms", 1, "--no-step0"
    )
    pinned = out["config"]["budget"]
    assert pinned["workers"] == pinned["cpus"] == pinned["cores"] == 1 and len(pinned["affinity"]) == 1
    assert [r["name"] for r in out["systems"]] == PARALLEL
    for r in out["systems"]:  # as each child saw it during its run
        check(r, 4)
        assert r["workers"] == r["cpus"] == 1 and r["affinity"] == pinned["affinity"], r
    assert "budget: 1 workers per system" in run.stdout and "pinned with --cpus 1" in run.stdout


def test_scaling_reports_each_workers_count_and_mmfeeds_serial_share(tmp_path):
    run, out = bench(tmp_path, "--scaling", "--quick", *TINY)
    counts = budget.doubling(budget.cores_available())
    assert out["systems"] == [] and out["step0"] == [] and out["cores_needed"] == []
    rows = out["scaling"]
    assert [(r["name"], r["workers"]) for r in rows] == [(s, n) for s in ("torch-dataloader", "mmfeed") for n in counts]
    for r in rows:
        assert r["source"] == "local" and r["samples"] == 4 and r["step_ms"] == 0.0, r
        for field in (
            "samples_per_s",
            "cpu_s_per_sample",
            "speedup",
            "steady_samples_per_s",
            "steady_speedup",
            "cores_busy",
        ):
            assert math.isfinite(r[field]) and r[field] > 0, (field, r)
        assert r["cores_busy"] == r["cpu_seconds"] / r["seconds"], r
    assert [r["speedup"] for r in rows if r["workers"] == 1] == [1.0, 1.0]
    assert [r["steady_speedup"] for r in rows if r["workers"] == 1] == [1.0, 1.0]
    for r in rows:
        if r["name"] == "mmfeed":
            assert r["single_thread_stages"], r
            assert 0 < r["single_thread_share"] < 1 and math.isfinite(r["amdahl_ceiling"]), r
            assert r["amdahl_ceiling"] == 1 / r["single_thread_share"]
        else:
            assert "single_thread_share" not in r
    assert "Scaling at step 0" in run.stdout and "Amdahl ceiling" in run.stdout


def test_cores_needed_is_the_fewest_cores_that_keep_the_trainer_busy(tmp_path):
    # A step far longer than preparing a batch: one core keeps the trainer busy.
    run, out = bench(tmp_path, "--cores-needed", *TINY, "--systems", "mmfeed", "--step-ms", 1500)
    assert out["systems"] == [] and out["scaling"] == []
    [row] = out["cores_needed"]
    assert row["name"] == "mmfeed" and row["cores_needed"] == 1, row
    assert [(t["cores"], t["cpus"], t["workers"]) for t in row["tried"]] == [(1, 1, 1)]
    assert "Cores needed" in run.stdout


def test_cores_needed_is_more_than_the_cores_when_none_suffice(tmp_path):
    # Step 0: the trainer only ever waits, on any number of cores. Each try is pinned to its cores.
    cores = budget.cores_available()
    _, out = bench(tmp_path, "--cores-needed", *TINY, "--systems", "mmfeed", "--step-ms", 0)
    [row] = out["cores_needed"]
    assert row["cores_needed"] == f"more than {cores}", row
    counts = budget.doubling(cores)
    assert [(t["cores"], t["cpus"], t["workers"]) for t in row["tried"]] == [(n, n, n) for n in counts]


def test_refuses_more_cpus_than_it_may_use(tmp_path):
    more = len(os.sched_getaffinity(0)) + 1
    run = subprocess.run(
        [sys.executable, BENCH, "--cpus", str(more), "--out", tmp_path], capture_output=True, text=True
    )
    assert run.returncode == 2 and "cannot pin to" in run.stderr, run.stderr


def test_refuses_unknown_systems(tmp_path):
    run = subprocess.run(
        [sys.executable, BENCH, "--systems", "mmfeed,grain", "--out", tmp_path], capture_output=True, text=True
    )
    assert run.returncode == 2 and "unknown systems or sources: grain" in run.stderr


def test_qwen3_vl_preprocessing_in_every_system(tmp_path):
    # The peers run transformers' Qwen3-VL image processing (patch 16, mean/std 0.5) and chat
    # template; mmfeed model="qwen3-vl".
    _, out = bench(tmp_path, "--samples", 6, "--step-ms", 10, "--sources", "local", "--no-step0", "--model", "qwen3-vl")
    assert out["config"]["model"] == "qwen3-vl"
    assert [r["name"] for r in out["systems"]] == SYSTEMS
    for r in out["systems"]:
        check(r, 6)
