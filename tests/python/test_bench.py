"""`mmfeed bench` end to end on small data sets: every system runs in its own process, from the
object server (S3 GETs) and from local files, delivers every sample; the report has the
documented shape, the plot and mmfeed's trace are written. Figures are not asserted (timings),
only that they are consistent."""
import json
import subprocess
import sys

from conftest import ROOT

BENCH = ROOT / "bench" / "pipeline.py"
SYSTEMS = ["naive", "torch-dataloader", "spdl", "mmfeed-serial", "mmfeed"]
FIELDS = ["gpu_utilization", "steady_gpu_utilization", "data_wait_share", "samples_per_s", "cpu_s_per_sample",
          "peak_rss_mb", "time_to_first_batch_s"]


def bench(tmp_path, *args):
    run = subprocess.run([sys.executable, BENCH, "--out", tmp_path / "out", "--data", tmp_path / "data",
                          *map(str, args)], capture_output=True, text=True, timeout=900)
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


def test_model_trainer_from_local_files(tmp_path):
    # What bench/gpu/run.sh runs, on the CPU with the tiny model: no object store, no calibration.
    _, out = bench(tmp_path, "--quick", "--samples", 8, "--batch-size", 4, "--sources", "local", "--systems",
                   "naive,mmfeed", "--trainer", "model", "--device", "cpu", "--model-preset", "tiny")
    assert out["config"]["trainer"] == "model" and out["config"]["device"] == "cpu"
    assert out["config"]["step_choice"] == "the model's" and out["config"]["calibration"] is None
    assert [(r["source"], r["name"]) for r in out["systems"]] == [("local", "naive"), ("local", "mmfeed")]
    for r in out["systems"]:
        check(r, 8)
        assert "nvml_gpu_utilization" not in r  # no GPU to ask


def test_auto_step_calibrates_on_local_files(tmp_path):
    # The calibration's head manifest lies outside the data set; its local image paths still resolve.
    _, out = bench(tmp_path, "--quick", "--samples", 8, "--sources", "local", "--systems", "mmfeed")
    assert out["config"]["calibration"]["source"] == "local" and out["config"]["step_ms"] > 0
    check(out["systems"][0], 8)


def test_refuses_unknown_systems(tmp_path):
    run = subprocess.run([sys.executable, BENCH, "--systems", "mmfeed,grain", "--out", tmp_path],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "unknown systems or sources: grain" in run.stderr


def test_qwen3_vl_preprocessing_in_every_system(tmp_path):
    # The peers run transformers' Qwen3-VL image processing (patch 16, mean/std 0.5) and chat
    # template; mmfeed model="qwen3-vl".
    _, out = bench(tmp_path, "--samples", 6, "--step-ms", 10, "--sources", "local", "--no-step0", "--model",
                   "qwen3-vl")
    assert out["config"]["model"] == "qwen3-vl"
    assert [r["name"] for r in out["systems"]] == SYSTEMS
    for r in out["systems"]:
        check(r, 6)
