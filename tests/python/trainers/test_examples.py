"""Issue 32: the examples/ fine-tuning scripts run as a user runs them, for a few steps on the tiny
models: a plain torch loop (padded and packed, saved and resumed), the HF Trainer (one process, and
two over gloo under torchrun, each reading its own shard, resumed from a checkpoint), TRL's
SFTTrainer, and the Megatron-style iterators under four torchrun processes with tensor parallelism 2."""

import ast
import json
import os
import re
import subprocess
import sys

import datagen
import pytest
from conftest import ROOT

EXAMPLES = ROOT / "examples"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]


pytestmark = pytest.mark.heavy  # the examples train the tiny models, up to four ranks: 3 to 6.5 GB


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    out = tmp_path_factory.mktemp("examples")
    datagen.generate(out, samples=16, seed=321, max_megapixels=0.3, workers=2)
    return out / "manifest.jsonl"


def run(args, timeout=900) -> str:
    env = {**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def losses_of(stdout: str) -> dict:
    return {int(s): float(v) for s, v in re.findall(r"step (\d+)  loss ([0-9.]+)", stdout)}


def test_the_torch_loop_trains_and_resumes_where_it_stopped(manifest, tmp_path):
    script = [sys.executable, EXAMPLES / "train_torch.py", manifest, "--tiny", "qwen2-vl"]
    whole = losses_of(run(script + ["--steps", 4]))
    assert sorted(whole) == [1, 2, 3, 4]
    run(script + ["--steps", 2, "--out", tmp_path, "--save-every", 2])
    rest = losses_of(run(script + ["--steps", 4, "--out", tmp_path, "--resume"]))
    assert rest == {3: whole[3], 4: whole[4]}


def test_the_torch_loop_trains_on_packed_rows(manifest):
    out = run(
        [sys.executable, EXAMPLES / "train_torch.py", manifest, "--tiny", "qwen3-vl", "--steps", 2, "--packed", 3000]
    )
    assert sorted(losses_of(out)) == [1, 2] and re.search(r"step 1 .* samples [2-9]", out)


def test_the_hf_trainer_and_trl_examples_run(manifest, tmp_path):
    hf = json.loads(
        run(
            [
                sys.executable,
                EXAMPLES / "train_hf.py",
                manifest,
                "--tiny",
                "qwen2.5-vl",
                "--steps",
                3,
                "--out",
                tmp_path / "hf",
            ]
        ).splitlines()[-1]
    )["losses"]
    assert len(hf) == 3
    sft = json.loads(
        run(
            [
                sys.executable,
                EXAMPLES / "train_hf.py",
                manifest,
                "--tiny",
                "qwen2.5-vl",
                "--steps",
                3,
                "--out",
                tmp_path / "trl",
                "--trl",
            ]
        ).splitlines()[-1]
    )["losses"]
    assert sft.keys() == hf.keys() and abs(sft["1"] - hf["1"]) <= 1e-5 * hf["1"]


def test_two_trainer_processes_read_their_own_shards_and_resume(manifest, tmp_path):
    script = TORCHRUN + [
        "--nproc-per-node",
        2,
        EXAMPLES / "train_hf.py",
        manifest,
        "--tiny",
        "qwen2-vl",
        "--save-steps",
        2,
        "--out",
        tmp_path,
    ]
    first = json.loads(run(script + ["--steps", 2]).splitlines()[-1])["losses"]
    states = [json.loads((tmp_path / "checkpoint-2" / f"mmfeed_loader_rank{r}.json").read_text()) for r in (0, 1)]
    assert [(s["rank"], s["world_size"], s["position"]) for s in states] == [(0, 2, 4), (1, 2, 4)]
    resumed = json.loads(run(script + ["--steps", 4, "--resume"]).splitlines()[-1])["losses"]
    assert sorted(resumed, key=int) == ["1", "2", "3", "4"]  # the checkpoint's log history, then two steps
    assert {s: resumed[s] for s in ("1", "2")} == first
    later = json.loads((tmp_path / "checkpoint-4" / "mmfeed_loader_rank1.json").read_text())
    assert later["position"] == 8  # two more batches of two samples on each rank, none replayed


def test_megatron_style_iterators_under_tensor_parallelism(manifest):
    out = run(TORCHRUN + ["--nproc-per-node", 4, EXAMPLES / "train_megatron.py", manifest, "--tp", 2, "--steps", 2])
    seen = {}
    for _rank, dp, step, samples in re.findall(r"rank (\d) dp (\d)/2 step (\d) loss [0-9.]+ samples (\[.*\])", out):
        seen.setdefault(int(dp), {}).setdefault(int(step), set()).add(samples)
    assert sorted(seen) == [0, 1]
    for steps in seen.values():
        assert all(len(batches) == 1 for batches in steps.values()), steps  # TP peers: one batch between them
    shard = {
        dp: {sid for step in steps.values() for b in step for sid in ast.literal_eval(b)} for dp, steps in seen.items()
    }
    assert not shard[0] & shard[1]
