"""bench/pipeline.py end to end on a small data set: every system runs in its own process, on
local files and behind nginx, delivers every sample, and the JSON report has the documented
shape. Figures are not asserted (timings), only that they are consistent."""
import json
import subprocess
import sys

from conftest import ROOT

SYSTEMS = ["naive", "torch-dataloader", "mmfeed-serial", "mmfeed"]
FIELDS = ["gpu_utilization", "data_wait_share", "samples_per_s", "cpu_s_per_sample", "peak_rss_mb",
          "time_to_first_batch_s"]


def test_pipeline_bench_reports_every_system(tmp_path):
    report = tmp_path / "bench.json"
    run = subprocess.run([sys.executable, ROOT / "bench" / "pipeline.py", "--samples", "6", "--step-ms", "20",
                          "--json", report, "--trace", tmp_path / "trace.json"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(report.read_text())
    assert out["config"]["samples"] == 6 and out["config"]["step_ms"] == 20
    assert [(r["source"], r["name"]) for r in out["systems"]] == [(s, n) for s in ("local", "http") for n in SYSTEMS]
    for r in out["systems"]:
        assert r["samples"] == 6, r
        assert all(r[f] > 0 for f in FIELDS), r
        assert r["gpu_utilization"] + r["data_wait_share"] <= 1.0001, r
        assert r["time_to_first_batch_s"] <= r["seconds"]
    for name in SYSTEMS:
        assert name in run.stdout
    assert "the best Python peer's samples/s" in run.stdout
    for source in ("local", "http"):  # mmfeed's timeline, one per source
        events = json.loads((tmp_path / f"trace-{source}.json").read_text())["traceEvents"]
        assert any(e.get("name") == "assemble batch" for e in events)


def test_pipeline_bench_refuses_unknown_systems():
    run = subprocess.run([sys.executable, ROOT / "bench" / "pipeline.py", "--systems", "mmfeed,grain"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "unknown systems or sources: grain" in run.stderr
