"""Issue 52, the loss under unequal splits: four gloo ranks under torchrun train the tiny Qwen2-VL
with mmfeed.hf.Trainer (ddp_gradients.py), each optimizer step two micro-batches of two samples a
rank. Balanced by compute, a step's 16 samples are those drawn without balancing, split otherwise
across the ranks; normalised by the global step's label tokens (transformers'
average_tokens_across_devices, on by default and kept by mmfeed.hf), every step's all-reduced
gradients equal the unbalanced run's within float tolerance. With a per-rank normaliser they do
not: the test fails if the normaliser is per-rank. A plain DDP loop normalised by
mmfeed.torch.step_label_tokens gets the same gradients too. The Trainer reports each step's
forward time to a balancing loader itself: balance_cost="calibrated" switches every rank alike."""

import json
import os
import subprocess
import sys

import datagen
import pytest
import tiny_vl
import torch
from conftest import ROOT

import mmfeed
import mmfeed.step_times

WORKER = ROOT / "tests" / "python" / "trainers" / "ddp_gradients.py"
WORLD = 4


pytestmark = pytest.mark.heavy  # four torch ranks training, 6.5 GB


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    out = tmp_path_factory.mktemp("balanced-gradients")
    # Conversations of unequal lengths and images of unequal sizes: the ranks' label tokens differ.
    datagen.generate(out, samples=32, seed=52, max_megapixels=0.3, workers=2)
    return out / "manifest.jsonl"


def train(manifest, out, balance, per_rank=False, loop=False, calibrate=0, steps=2):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={WORLD}"]
    command += [str(WORKER), str(manifest), str(out), "--balance", balance, "--calibrate", str(calibrate)]
    command += ["--steps", str(steps)]
    command += ["--per-rank-normaliser"] if per_rank else []
    command += ["--loop"] if loop else []
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]
    return torch.load(out / "gradients.pt"), ranks


def step_samples(ranks, step, accumulation=2):
    return sorted(
        s for micro in ranks for m in micro[step * accumulation : (step + 1) * accumulation] for s in m["samples"]
    )


def relative(a, b) -> float:
    return float((a - b).norm() / b.norm())


def test_balanced_gradients_equal_the_unbalanced_ones_under_the_global_normaliser(manifest, tmp_path):
    drawn, drawn_ranks = train(manifest, tmp_path / "drawn", "none")
    balanced, balanced_ranks = train(manifest, tmp_path / "balanced", "compute")
    assert len(drawn) == len(balanced) == 2
    for step in range(2):
        # The same global batch, split otherwise: some rank's label tokens differ.
        assert step_samples(balanced_ranks, step) == step_samples(drawn_ranks, step)
        window = slice(2 * step, 2 * step + 2)

        def rank_tokens(ranks):
            return [sum(m["label_tokens"] for m in r[window]) for r in ranks]

        assert rank_tokens(balanced_ranks) != rank_tokens(drawn_ranks)
        assert relative(balanced[step], drawn[step]) < 1e-5, f"step {step}"
    # The per-rank normaliser: each rank's mean over its own tokens, averaged: the split shows.
    per_rank_drawn, _ = train(manifest, tmp_path / "drawn-per-rank", "none", per_rank=True)
    per_rank_balanced, _ = train(manifest, tmp_path / "balanced-per-rank", "compute", per_rank=True)
    assert relative(per_rank_balanced[0], per_rank_drawn[0]) > 1e-3


def test_a_loop_of_ones_own_normalised_by_step_label_tokens_gets_the_same_gradients(manifest, tmp_path):
    # A plain DDP loop: mmfeed.torch.step_label_tokens as num_items_in_batch, the loss x world.
    drawn, drawn_ranks = train(manifest, tmp_path / "drawn", "none", loop=True)
    balanced, balanced_ranks = train(manifest, tmp_path / "balanced", "compute", loop=True)
    assert len(drawn) == len(balanced) == 2
    for step in range(2):
        assert step_samples(balanced_ranks, step) == step_samples(drawn_ranks, step)
        assert relative(balanced[step], drawn[step]) < 1e-5, f"step {step}"
    # Its first step's gradients are the Trainer's (the same weights, batches and normaliser).
    trainer, _ = train(manifest, tmp_path / "trainer", "compute")
    assert relative(balanced[0], trainer[0]) < 1e-5


def test_the_trainer_reports_its_steps_and_the_ranks_calibrate_together(manifest, tmp_path):
    # mmfeed.hf.Trainer reports each optimizer step's forward time to a balancing loader itself
    # (its first step left out: warm-up): with balance_cost="calibrated" every rank fits and
    # switches alike at its first report (calibration_steps=1, after the second step), and every
    # step's global batch stays the one drawn without balancing.
    _, ranks = train(manifest, tmp_path / "calibrated", "compute", calibrate=1, steps=3)
    times = [json.loads((tmp_path / "calibrated" / f"rank{r}-times.json").read_text()) for r in range(WORLD)]
    for rank, reported in zip(ranks, times):
        assert reported["steps"] == 2 and all(s > 0 for s in reported["seconds"])
        # Each report is the step it ends: the terms of that step's two micro-batches.
        for k, step in enumerate((1, 2)):
            mine = [sum(m["terms"][t] for m in rank[2 * step : 2 * step + 2]) for t in range(4)]
            assert [reported["terms"][name][k] for name in mmfeed.step_times.TERMS] == mine
    switch = times[0]["calibrated"]
    assert (switch["epoch"], switch["step"]) == (0, 2) and any(c > 0 for c in switch["balance_cost"])
    assert all(t["calibrated"] == switch for t in times)
    drawn = drawn_steps(manifest, steps=3)
    for step in range(3):
        assert step_samples(ranks, step) == drawn[step]


def drawn_steps(manifest, steps, accumulation=2):
    """Each step's samples over the ranks, as drawn (ddp_gradients.py's loader without balance=)."""
    per_rank = []
    for rank in range(WORLD):
        options = dict(tokenizer=str(tiny_vl.TOKENIZER), model="qwen2-vl", max_pixels=50_176, batch_size=2, seed=5)
        with mmfeed.Loader(str(manifest), rank=rank, world_size=WORLD, workers=1, epochs=2, **options) as loader:
            per_rank.append([list(next(loader)["sample_ids"]) for _ in range(steps * accumulation)])
    return [
        sorted(s for batches in per_rank for b in batches[step * accumulation : (step + 1) * accumulation] for s in b)
        for step in range(steps)
    ]
