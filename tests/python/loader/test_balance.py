"""Issue 52, ranks balanced by compute: with balance="compute" each optimizer step's samples are the
step's as drawn without it (the same global batch), split across the ranks so that the largest
rank's cost falls, every rank the same count, every sample of the epoch once; resumed exactly; the
plan made by each rank alone agrees across ranks. The cost is checked on what the Loader delivers:
each sample's tokens and image grids as the processor made them, priced with the documented
Qwen2-VL-7B forward FLOPs (docs/loading.md), independently of the engine's estimate from the index.
Packed rows: each packing window's samples split across the ranks the same way. Reported step
times are priced from the batches and the cost model fitted to them."""

import json
import os
import shutil
import subprocess
import sys

import datagen
import numpy as np
import pytest
from conftest import ROOT

import mmfeed
import mmfeed.step_times
from mmfeed.step_times import _check_loaders

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = dict(tokenizer=TOKENIZER, max_pixels=1_003_520, tensors="np", seed=3)
WORLD = 4


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, cli):
    out = tmp_path_factory.mktemp("balance-data")
    datagen.generate(out, samples=48, seed=21, max_megapixels=2.0, workers=2)
    manifest = out / "manifest.jsonl"
    proc = subprocess.run([str(cli), "index", str(manifest)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return manifest


@pytest.fixture(scope="module")
def true_costs(dataset):
    """Each sample's forward FLOPs from what the Loader delivers for it alone."""
    costs = {}
    with mmfeed.Loader(dataset, batch_size=1, shuffle=False, **OPTIONS) as loader:
        for b in loader:
            tokens = int(b["attention_mask"].sum())
            flops = 2 * 7.6e9 * tokens + 4 * 28 * 3584 * tokens * (tokens + 1) / 2
            for t, h, w in b["image_grid_thw"].tolist():
                for _ in range(t):
                    flops += 2 * 6.75e8 * h * w + 4 * 32 * 1280 * (h * w) ** 2
            costs[b["sample_ids"][0]] = flops
    return costs


def rank_batches(manifest, **options):
    runs = []
    for rank in range(WORLD):
        with mmfeed.Loader(manifest, rank=rank, world_size=WORLD, **{**OPTIONS, **options}) as loader:
            runs.append(([list(b["sample_ids"]) for b in loader], loader.metrics()))
    return runs


def max_over_mean(runs, costs, per_step):
    """The steps' mean of the largest rank's true cost over the ranks' mean."""
    ratios = []
    for step in range(len(runs[0][0]) // per_step):
        loads = [
            sum(costs[s] for b in batches[step * per_step : (step + 1) * per_step] for s in b) for batches, _ in runs
        ]
        ratios.append(max(loads) / (sum(loads) / len(loads)))
    return float(np.mean(ratios))


@pytest.mark.parametrize("accumulation", [1, 2])
def test_a_steps_samples_are_the_drawn_steps_split_by_cost(dataset, true_costs, accumulation):
    options = dict(batch_size=2, gradient_accumulation_steps=accumulation)
    drawn = rank_batches(dataset, **options)
    balanced = rank_batches(dataset, balance="compute", **options)
    steps = len(drawn[0][0]) // accumulation
    assert steps >= 2 and all(len(batches) == len(drawn[0][0]) for batches, _ in balanced)
    for step in range(steps):
        window = slice(step * accumulation, (step + 1) * accumulation)

        def step_samples(runs):
            return sorted(s for batches, _ in runs for b in batches[window] for s in b)

        assert step_samples(balanced) == step_samples(drawn), f"step {step}: the global batch changed"
    every = [s for batches, _ in balanced for b in batches for s in b]
    assert sorted(every) == sorted(true_costs)  # each sample once (48 = 4 ranks x 12)
    assert all(len(b) == 2 for batches, _ in balanced for b in batches)
    # The largest rank's true cost falls, and the Loader says by how much it planned.
    assert max_over_mean(balanced, true_costs, accumulation) < max_over_mean(drawn, true_costs, accumulation)
    for _, metrics in balanced:
        gauges = metrics["gauges"]
        assert gauges["balance.steps"]["value"] == steps
        assert gauges["balance.planned_max_over_mean_ppm"]["value"] < gauges["balance.drawn_max_over_mean_ppm"]["value"]
    # Every rank made the same plan on its own: the hash of every rank's samples of every step.
    assert len({metrics["gauges"]["balance.plan_hash"]["value"] for _, metrics in balanced}) == 1
    other = rank_batches(dataset, balance="tokens", **options)
    assert other[0][1]["gauges"]["balance.plan_hash"] != balanced[0][1]["gauges"]["balance.plan_hash"]
    assert "balance.steps" not in drawn[0][1]["gauges"]


def test_a_balanced_run_resumes_exactly(dataset):
    options = dict(OPTIONS, batch_size=2, balance="compute", rank=1, world_size=WORLD, epochs=2)
    with mmfeed.Loader(dataset, **options) as loader:
        whole = [dict(b) for b in loader]
    with mmfeed.Loader(dataset, **options) as loader:
        it = iter(loader)
        for _ in range(7):  # into the second epoch
            next(it)
        state = loader.state_dict()
    with mmfeed.Loader(dataset, **options) as loader:
        loader.load_state_dict(state)
        rest = [dict(b) for b in loader]
    assert [b["sample_ids"] for b in rest] == [b["sample_ids"] for b in whole[7:]]
    for a, b in zip(rest, whole[7:]):
        np.testing.assert_array_equal(a["pixel_values"], b["pixel_values"])
    # A state of a run balanced otherwise is refused by name, not resumed into other samples.
    with mmfeed.Loader(dataset, **{**options, "balance": "tokens"}) as loader:
        loader.load_state_dict(state)
        with pytest.raises(ValueError, match="balance"):
            next(iter(loader))


def test_the_report_is_the_loaders_plan_and_the_cli_prints_it(dataset, cli):
    report = mmfeed.balance_report(dataset, world_size=WORLD, batch_size=2, tokenizer=TOKENIZER, max_pixels=1_003_520)
    assert report["media_nominal"] == 0 and report["media"] > 0  # every image's size from the index
    assert report["mean_planned"] < report["mean_drawn"]
    assert len(report["steps"]) == 48 // (WORLD * 2)
    proc = subprocess.run(
        [
            str(cli),
            "balance-report",
            "--json",
            str(dataset),
            "--world-size",
            str(WORLD),
            "--batch-size",
            "2",
            "--max-pixels",
            "1003520",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert [(s[0], s[2]) for s in printed["steps"]] == [(s[0], s[2]) for s in report["steps"]]
    # What per-rank counts that differ would give: never worse than the equal counts kept.
    assert 1 <= report["mean_free"] <= report["mean_planned"] and printed["mean_free"] == pytest.approx(
        report["mean_free"], rel=1e-5
    )
    packed = mmfeed.balance_report(dataset, world_size=WORLD, token_budget=2048, tokenizer=TOKENIZER)
    assert packed["mean_free"] == 0  # packed rows: counts are free already
    # Without the index each image counts at a nominal size, and the report says so.
    bare = dataset.parent / "bare"
    bare.mkdir(exist_ok=True)
    shutil.copy(dataset, bare / dataset.name)
    nominal = mmfeed.balance_report(
        bare / dataset.name, media_root=dataset.parent, world_size=WORLD, batch_size=2, tokenizer=TOKENIZER
    )
    assert nominal["media_nominal"] == nominal["media"] > 0


def rank_windows(manifest, window, **options):
    """Each rank's samples by packing window: its rows' samples in order, cut every `window`
    (a window's rows hold its samples alone)."""
    out = []
    for rank in range(WORLD):
        with mmfeed.Loader(manifest, rank=rank, world_size=WORLD, **{**OPTIONS, **options}) as loader:
            samples = [s for row in loader for s in row["sample_ids"]]
        out.append([samples[k : k + window] for k in range(0, len(samples), window)])
    return out


def test_packed_windows_are_split_by_cost_and_each_rank_packs_its_own(dataset, true_costs):
    options = dict(token_budget=4096, pack_window=4)
    drawn = rank_windows(dataset, 4, **options)
    balanced = rank_windows(dataset, 4, balance="compute", **options)
    windows = len(drawn[0])
    assert windows == 3 and all(len(w) == windows for w in balanced)
    loads = {"drawn": [], "balanced": []}
    for k in range(windows):
        assert sorted(s for r in balanced for s in r[k]) == sorted(s for r in drawn for s in r[k]), f"window {k}"
        assert all(len(r[k]) == 4 for r in balanced)  # every rank its pack_window
        for name, runs in (("drawn", drawn), ("balanced", balanced)):
            ranks = [sum(true_costs[s] for s in r[k]) for r in runs]
            loads[name].append(max(ranks) / (sum(ranks) / WORLD))
    assert sorted(s for r in balanced for w in r for s in w) == sorted(true_costs)
    assert np.mean(loads["balanced"]) < np.mean(loads["drawn"])


def test_the_report_packs_each_ranks_windows_into_rows(dataset):
    options = dict(world_size=WORLD, tokenizer=TOKENIZER, max_pixels=1_003_520, token_budget=4096, pack_window=4)
    report = mmfeed.balance_report(dataset, gradient_accumulation_steps=1, **options)
    two = mmfeed.balance_report(dataset, gradient_accumulation_steps=2, **options)
    assert report["samples"] == two["samples"] == 48 and len(report["steps"]) >= 3
    # A step of two rows a rank is two steps of one row each: its loads add up.
    for k, (drawn_max, drawn_mean, planned_max, planned_mean) in enumerate(two["steps"]):
        first, second = report["steps"][2 * k], report["steps"][2 * k + 1]
        assert drawn_mean == pytest.approx((first[1] + second[1]), rel=1e-9)
        assert planned_mean == pytest.approx((first[3] + second[3]), rel=1e-9)
        assert drawn_max <= first[0] + second[0] and planned_max <= first[2] + second[2]


def own_terms(batch):
    """A batch's tokens and vision patch pairs, read here from its tensors (not mmfeed's pricing)."""
    if "cu_seq_lens_q" in batch:
        lengths = np.diff(batch["cu_seq_lens_q"])
    else:
        lengths = batch["attention_mask"].sum(axis=-1)
    pairs = sum(t * (h * w) ** 2 for t, h, w in batch["image_grid_thw"].tolist())
    return float(lengths.sum()), float(pairs)


@pytest.mark.parametrize("packed", [False, True])
def test_reported_step_times_are_priced_and_fitted(dataset, packed):
    # Times made from each step's own tokens and patch pairs (3 us a token, 2 ns a patch pair):
    # the fit recovers them, and the predicted FLOPs follow them.
    shape = dict(token_budget=4096, pack_window=8) if packed else dict(batch_size=2, gradient_accumulation_steps=2)
    with mmfeed.Loader(dataset, balance="compute", **shape, **OPTIONS) as loader:
        batches = iter(loader)
        for _ in range(8):
            tokens = pairs = 0.0
            for _ in range(2):
                t, p = own_terms(next(batches))
                tokens, pairs = tokens + t, pairs + p
            loader.report_step_time(3e-6 * tokens + 2e-9 * pairs)
        report = loader.step_times()
    assert report["steps"] == 8 and report["correlation"] > 0.9
    fitted = np.array(report["fitted_balance_cost"]) / 1e15  # FLOPs at 1 PFLOP/s: seconds
    np.testing.assert_allclose(fitted[[0, 3]], [3e-6, 2e-9], rtol=1e-6)
    np.testing.assert_allclose(fitted[[1, 2]], [0, 0], atol=1e-15)
    np.testing.assert_allclose(
        report["predicted_flops"][0],
        sum(c * v[0] for c, v in zip((2 * 7.6e9, 4 * 28 * 3584, 2 * 6.75e8, 4 * 32 * 1280), report["terms"].values())),
        rtol=1e-12,
    )


def test_a_step_time_needs_a_balancing_loader_a_batch_and_a_positive_time(dataset):
    with mmfeed.Loader(dataset, batch_size=2, **OPTIONS) as loader:
        next(iter(loader))
        with pytest.raises(ValueError, match="only when it balances"):
            loader.report_step_time(1.0)
        with pytest.raises(ValueError, match="only when it balances"):
            loader.skip_step_time()
    with mmfeed.Loader(dataset, batch_size=2, balance="tokens", **OPTIONS) as loader:
        with pytest.raises(ValueError, match="no batch was delivered"):
            loader.report_step_time(1.0)
        next(iter(loader))
        for bad in (0, -1.0, float("nan")):
            with pytest.raises(ValueError, match="positive"):
                loader.report_step_time(bad)
        loader.report_step_time(0.5)
        assert loader.step_times()["steps"] == 1 and loader.step_times()["correlation"] is None
        # A step left out (a run's warm-up): its batches belong to no report.
        next(loader)
        loader.skip_step_time()
        with pytest.raises(ValueError, match="no batch was delivered"):
            loader.report_step_time(1.0)
        third = mmfeed.step_times.batch_terms(next(loader))
        loader.report_step_time(0.5)
        times = loader.step_times()
        assert times["steps"] == 2 and [v[1] for v in times["terms"].values()] == third.tolist()


def planted_seconds(batches):
    """A step's time made from its own tokens and patch pairs (0.1 us a token, 2 ns a patch pair):
    a model led by the vision pairs, where the default's is led by the tokens."""
    terms = [own_terms(b) for b in batches]
    return 1e-7 * sum(t for t, _ in terms) + 2e-9 * sum(p for _, p in terms)


def calibrated_run(manifest, steps, state=None, **options):
    """A calibrating loader's steps (each its batches' sample ids), each step's time reported."""
    out = []
    with mmfeed.Loader(manifest, **options) as loader:
        if state:
            loader.load_state_dict(state)
        batches = iter(loader)
        for _ in range(steps):
            step = [next(batches) for _ in range(2)]
            loader.report_step_time(planted_seconds(step))
            out.append([list(b["sample_ids"]) for b in step])
        return out, loader.state_dict(), loader.step_times()


def test_a_calibrated_run_switches_at_the_first_open_step_to_the_fitted_model(dataset):
    # After 4 reported steps the loader fits the planted times and plans with them from step 4 on:
    # its steps before are the default model's, its steps from there a run given the fitted
    # coefficients from the start has (a step's plan is its own samples' and model's alone);
    # nothing of the epoch lost or repeated; a resume keeps the switch.
    shape = dict(OPTIONS, batch_size=2, gradient_accumulation_steps=2, balance="compute", epochs=2)
    steps, state, times = calibrated_run(dataset, 24, balance_cost="calibrated", calibration_steps=4, **shape)
    [switch] = state["balance_switches"]
    assert switch[:2] == [0, 4] and times["calibrated"]["step"] == 4
    np.testing.assert_allclose(np.array(switch[2:]) / 1e15, [1e-7, 0, 0, 2e-9], rtol=1e-6, atol=1e-15)
    with mmfeed.Loader(dataset, balance_cost=switch[2:], **shape) as loader:
        fitted = [list(b["sample_ids"]) for b in loader]
    with mmfeed.Loader(dataset, **shape) as loader:
        default = [list(b["sample_ids"]) for b in loader]
    flat = [batch for step in steps for batch in step]
    assert flat[:8] == default[:8] and flat[8:] == fitted[8:]
    assert fitted[8:24] != default[8:24], "the two models must plan differently for the test to say anything"
    assert sorted(s for b in flat[:24] for s in b) == sorted(s for b in default[:24] for s in b)  # the epoch's
    # Resumed inside the second epoch: the same batches, planned with the switch, no new calibration.
    with mmfeed.Loader(dataset, balance_cost="calibrated", calibration_steps=4, **shape) as loader:
        it = iter(loader)
        for _ in range(4 * 2 + 6):
            next(it)
        middle = loader.state_dict()
    assert "balance_switches" not in middle  # (no step reported: no calibration)
    middle["balance_switches"] = state["balance_switches"]
    rest, end, _ = calibrated_run(dataset, 5, state=middle, balance_cost="calibrated", calibration_steps=4, **shape)
    assert [batch for step in rest for batch in step] == flat[14:24] and end["balance_switches"] == [switch]


def test_calibration_is_refused_without_compute_balance_or_a_job_to_gather_in(dataset):
    with pytest.raises(ValueError, match="balance='compute'"):
        mmfeed.Loader(dataset, balance="tokens", balance_cost="calibrated", **OPTIONS)
    with pytest.raises(ValueError, match="calibration_steps"):
        mmfeed.Loader(dataset, balance="compute", calibration_steps=4, **OPTIONS)
    with pytest.raises(ValueError, match="positive integer"):
        mmfeed.Loader(dataset, balance="compute", balance_cost="calibrated", calibration_steps=0, **OPTIONS)
    with pytest.raises(ValueError, match="Loader's own"):  # nothing reports times to a report
        mmfeed.balance_report(dataset, balance_cost="calibrated", tokenizer=TOKENIZER)
    # Two ranks and no torch.distributed group: the ranks cannot agree on a model.
    with mmfeed.Loader(
        dataset,
        balance="compute",
        balance_cost="calibrated",
        calibration_steps=1,
        rank=0,
        world_size=2,
        ignore_job_ranks=True,
        batch_size=2,
        **OPTIONS,
    ) as loader:
        next(iter(loader))
        with pytest.raises(RuntimeError, match="init_process_group"):
            loader.report_step_time(0.1)


def test_a_group_that_does_not_hold_each_loader_rank_on_as_many_processes_is_refused():
    # What calibrating gathers: each process's last row says its loader's (rank, world_size).
    def process(rank, world):
        return np.array([[1.0, 2, 3, 4, 5], [0, 2, rank, world, 0]])

    _check_loaders(np.stack([process(0, 2), process(0, 2), process(1, 2), process(1, 2)]), 4, 2)  # peers
    with pytest.raises(RuntimeError, match=r"holds \(rank, world_size\) \[\(0, 2\), \(0, 2\), \(0, 2\), \(1, 2\)\]"):
        _check_loaders(np.stack([process(0, 2), process(0, 2), process(0, 2), process(1, 2)]), 4, 2)
    with pytest.raises(RuntimeError, match="one world of 2 loaders, each on 2 process"):
        _check_loaders(np.stack([process(0, 2), process(1, 2), process(1, 4), process(0, 2)]), 4, 2)


@pytest.mark.heavy  # four ranks
@pytest.mark.parametrize("packed,peers", [(False, 1), (True, 1), (False, 2)], ids=["padded", "packed", "tp2"])
def test_four_ranks_under_torchrun_calibrate_together(dataset, tmp_path, packed, peers):
    # Four gloo ranks report their own times (calibrate_ranks.py); at the second report (third,
    # packed) they fit one model and switch at the same step, the first none has begun: each
    # rank's batches are then exactly those of a rank Loader resumed from the start with that
    # switch in its state, and every epoch's samples come
    # once over the ranks (packed ranks, whose windows advance unevenly, too). tp2: two processes a
    # loader rank (tensor parallelism 2), the second peer reporting twice the time: the four still
    # switch together (the fit over all is 1.5 times the planted coefficients), peers alike.
    worker = ROOT / "tests" / "python" / "loader" / "calibrate_ranks.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={WORLD}"]
    command += (
        [str(worker), str(dataset), str(tmp_path), str(TOKENIZER)]
        + (["--packed"] if packed else [])
        + ["--peers", str(peers)]
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]
    switches = ranks[0]["switches"]
    assert len(switches) == 1 and all(r["switches"] == switches for r in ranks)
    planted = (1 + (peers - 1) / 2) * np.array([1e-7, 0, 0, 2e-9])  # (the peers' times' mean)
    np.testing.assert_allclose(np.array(switches[0][2:]) / 1e15, planted, rtol=1e-6, atol=1e-15)
    assert all(ranks[r]["steps"] == ranks[r - r % peers]["steps"] for r in range(WORLD))
    ranks = ranks[::peers]  # one process a loader rank
    world = WORLD // peers
    if packed:  # where the furthest rank stood: the ranks' rows differ, so do their windows
        assert switches[0][0] == 0 and switches[0][1] > 0
    else:
        assert switches[0][:2] == [0, 2]  # every rank had begun steps 0 and 1
    shape = dict(token_budget=3400, pack_window=5) if packed else dict(batch_size=2)
    options = dict(OPTIONS, balance="compute", gradient_accumulation_steps=2, epochs=2, world_size=world, **shape)
    for epoch in (0, 1):
        ids = [s for r in ranks for step in r["steps"] for e, batch in step for s in batch if e == epoch]
        assert len(ids) == len(set(ids)) == 48, f"epoch {epoch}"
    for rank, record in enumerate(ranks):
        with mmfeed.Loader(dataset, rank=rank, ignore_job_ranks=True, **options) as loader:
            loader.start()
            start = loader.state_dict()
        with mmfeed.Loader(dataset, rank=rank, ignore_job_ranks=True, **options) as loader:
            loader.load_state_dict({**start, "balance_switches": switches})
            want = [[int(b["epoch"]), list(b["sample_ids"])] for b in loader]
        assert [batch for step in record["steps"] for batch in step] == want, f"rank {rank}"
