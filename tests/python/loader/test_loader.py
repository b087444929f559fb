"""The Loader end to end on a generated data set: batches equal to the components applied
sample by sample, deterministic across thread counts and modes, ranks disjoint and complete,
exact resume, bad samples reported and never lost, memory shared with the engine."""

import json
import re
import resource
import subprocess
import time

import datagen
import numpy as np
import pytest
from conftest import ROOT, copy_with_damaged_image

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
MAX_PIXELS = 100_000


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("loader-data")
    datagen.generate(out, samples=23, seed=5, max_megapixels=0.6, workers=2)
    return out / "manifest.jsonl"


def load(manifest, **options):
    options.setdefault("tensors", "np")
    options.setdefault("tokenizer", TOKENIZER)
    options.setdefault("max_pixels", MAX_PIXELS)
    options.setdefault("batch_size", 4)
    with mmfeed.Loader(manifest, **options) as loader:
        batches = list(loader)
        return batches, loader.errors(), loader.state_dict()


def flat(batches):
    return [sid for b in batches for sid in b["sample_ids"]]


def test_batches_equal_the_components_applied_per_sample(dataset):
    batches, errors, _ = load(dataset, shuffle=False)
    assert not errors
    samples = {}
    for line in dataset.read_text().splitlines():
        s = json.loads(line)
        samples[s["id"]] = s
    tok = mmfeed.Tokenizer.from_file(TOKENIZER)
    proc = mmfeed.ImageProcessor("qwen2-vl", max_pixels=MAX_PIXELS)
    for b in batches:
        rows, grid_at = 0, 0
        for i, sid in enumerate(b["sample_ids"]):
            sample = samples[sid]
            paths = [
                str(dataset.parent / c["image"])
                for m in sample["messages"]
                if isinstance(m["content"], list)
                for c in m["content"]
                if c["type"] == "image"
            ]
            vision = proc(paths)
            enc = mmfeed.encode_conversation(sample, vision["image_grid_thw"].tolist(), tok)
            n = len(enc["input_ids"])
            np.testing.assert_array_equal(b["input_ids"][i, :n], enc["input_ids"])
            np.testing.assert_array_equal(b["labels"][i, :n], enc["labels"])
            assert b["attention_mask"][i, :n].all() and not b["attention_mask"][i, n:].any()
            assert (b["input_ids"][i, n:] == 151643).all() and (b["labels"][i, n:] == -100).all()
            k = len(vision["pixel_values"])
            np.testing.assert_array_equal(b["pixel_values"][rows : rows + k], vision["pixel_values"])
            np.testing.assert_array_equal(b["image_grid_thw"][grid_at : grid_at + len(paths)], vision["image_grid_thw"])
            rows += k
            grid_at += len(paths)
        assert rows == len(b["pixel_values"])


@pytest.mark.parametrize(
    "packing", [{}, {"token_budget": 4000, "pack_window": 8, "mrope": True}], ids=["padded", "packed"]
)
def test_same_configuration_same_batches_whatever_the_threads_and_mode(dataset, packing):
    # Issue 18: every image's pixel rows are written on the pool, by whichever worker is idle;
    # the bytes may not depend on which, nor on how many.
    reference, _, _ = load(dataset, seed=3, workers=1, **packing)
    for options in (
        {"workers": 2},
        {"workers": 3, "prefetch_batches": 1},
        {"workers": 8},
        {"mode": "serial"},
        {"workers": 2, "fetch_inflight": 2},
    ):
        other, _, _ = load(dataset, seed=3, **options, **packing)
        assert len(other) == len(reference)
        for a, b in zip(reference, other):
            assert a["sample_ids"] == b["sample_ids"]
            assert a.keys() == b.keys()
            for key in a.keys() - {"sample_ids", "epoch", "index", "buffer_address"}:
                np.testing.assert_array_equal(a[key], b[key])


def test_loaders_sharing_inputs_deliver_the_same_bytes(dataset, tmp_path):
    # mmfeed.ray's actors open one loader per part from one LoaderInputs: a resumed part from
    # shared inputs must be byte for byte what a loader reading its own delivers.
    reference, _, _ = load(dataset, seed=3, epochs=2)
    inputs = mmfeed.LoaderInputs(dataset, tokenizer=TOKENIZER)
    shared, _, _ = load(dataset, seed=3, epochs=2, inputs=inputs)
    with mmfeed.Loader(
        dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, batch_size=4, seed=3, epochs=2, tensors="np", inputs=inputs
    ) as loader:
        loader.load_state_dict({"seed": 3, "rank": 0, "world_size": 1, "epoch": 1, "position": 8})
        resumed = list(loader)
    epoch0 = sum(1 for b in reference if b["epoch"] == 0)
    for a, b in zip(reference, shared):
        assert a["sample_ids"] == b["sample_ids"]
        for key in a.keys() - {"sample_ids", "epoch", "index", "buffer_address"}:
            np.testing.assert_array_equal(a[key], b[key])
    assert len(shared) == len(reference)
    assert flat(resumed) == flat(reference[epoch0 + 2 :])
    with pytest.raises(ValueError, match="LoaderConfig.tokenizer: differs from the LoaderInputs'"):
        load(dataset, tokenizer=tmp_path / "other.json", inputs=inputs)
    with pytest.raises(TypeError, match="inputs must be a mmfeed.LoaderInputs"):
        mmfeed.Loader(dataset, tokenizer=TOKENIZER, inputs="tokenizer.json")
    with pytest.raises(ValueError, match="missing.jsonl"):
        mmfeed.LoaderInputs(tmp_path / "missing.jsonl", tokenizer=TOKENIZER)


@pytest.mark.parametrize(
    "packing", [{}, {"token_budget": 4000, "pack_window": 8, "mrope": True}], ids=["padded", "packed"]
)
def test_resume_under_other_thread_counts_gives_the_same_bytes(dataset, packing):
    # Issue 18: a state taken with 2 workers resumes with 3 or 1 (the serial mode does not resume)
    # into the very batches a one-worker run delivers after the same point.
    reference, _, _ = load(dataset, seed=3, workers=1, **packing)
    taken = 2
    with mmfeed.Loader(
        dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, batch_size=4, seed=3, workers=2, tensors="np", **packing
    ) as loader:
        for _ in range(taken):
            next(loader)
        state = loader.state_dict()
    for options in ({"workers": 3}, {"workers": 1}):
        resumed = mmfeed.Loader(
            dataset,
            tokenizer=TOKENIZER,
            max_pixels=MAX_PIXELS,
            batch_size=4,
            seed=3,
            tensors="np",
            **options,
            **packing,
        )
        resumed.load_state_dict(state)
        with resumed:
            rest = list(resumed)
        assert len(rest) == len(reference) - taken, options
        for a, b in zip(reference[taken:], rest):
            assert a["sample_ids"] == b["sample_ids"], options
            for key in a.keys() - {"sample_ids", "epoch", "index", "buffer_address"}:
                np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("local_world_size", [None, "2"])
def test_auto_workers_are_the_ranks_share_of_the_cores_less_one(dataset, monkeypatch, local_world_size):
    # Issue 18: workers default to the cores the process may use, shared by the node's ranks.
    if local_world_size:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local_world_size)
    else:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    expected = max(1, mmfeed._mmfeed.usable_cpus() // int(local_world_size or 1) - 1)
    for workers in ("auto", None):  # asked for, and the default
        options = {} if workers is None else {"workers": workers}
        with mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, **options) as loader:
            next(iter(loader))
            metrics = loader.metrics()
            assert metrics["workers"] == expected
            assert 0 < metrics["peak_rss_bytes"] <= resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_prefetch_depth_is_automatic_unless_given(dataset):
    # Issue 18: the depth starts at one batch, grows only while the trainer waits on a loader the
    # depth held back and shrinks when a batch was always spare (the rules are tested in C++:
    # PrefetchDepthTest); a number fixes it.
    for options, low, high in (({}, 1, 16), ({"prefetch_batches": "auto"}, 1, 16), ({"prefetch_batches": 3}, 3, 3)):
        with mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, **options) as loader:
            batches = list(loader)
            gauges = loader.metrics()["gauges"]
        depth, window = gauges["loader.prefetch_depth"], gauges["loader.sample_window"]
        assert batches and low <= depth["value"] <= depth["max"] <= high, (options, depth)
        assert 16 <= window["value"] <= window["max"], (options, window)


def test_start_opens_the_engine_before_the_first_batch(dataset):
    want, _, _ = load(dataset)
    with mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, batch_size=4, tensors="np") as loader:
        assert loader.metrics() == {}  # not open: iteration would open it
        loader.start()
        assert loader.metrics() != {} and loader.state_dict()["position"] == 0  # open, nothing delivered
        got = list(loader)
    assert [b["sample_ids"] for b in got] == [b["sample_ids"] for b in want]
    with pytest.raises(RuntimeError, match="closed"):
        loader.start()


def test_seed_and_epoch_change_the_order(dataset):
    a, _, _ = load(dataset, seed=1, epochs=2)
    b, _, _ = load(dataset, seed=2)
    epoch0 = flat([x for x in a if x["epoch"] == 0])
    epoch1 = flat([x for x in a if x["epoch"] == 1])
    assert sorted(epoch0) == sorted(epoch1) and epoch0 != epoch1
    assert flat(b) != epoch0


def test_ranks_are_disjoint_and_complete(dataset):
    ids = [json.loads(line)["id"] for line in dataset.read_text().splitlines()]
    seen = []
    for rank in range(3):
        batches, _, _ = load(dataset, seed=9, rank=rank, world_size=3, shard_remainder="keep")
        seen += flat(batches)
    assert sorted(seen) == sorted(ids)


def test_ranks_get_equal_shards_by_default(dataset):
    # Issue 15: unequal shards (23 samples over 3 ranks: 8, 8, 7) hang a data-parallel job at the
    # epoch's end. Padded (the default), every rank gets 8 and the epoch's first sample comes
    # twice; dropped, every rank gets 7 and the epoch's last two are left out.
    ids = [json.loads(line)["id"] for line in dataset.read_text().splitlines()]
    whole = flat(load(dataset, seed=9, shard_remainder="keep")[0])
    for remainder, per_rank, expected in [("pad", 8, ids + whole[:1]), ("drop", 7, whole[:21])]:
        shards = [
            flat(
                load(
                    dataset,
                    seed=9,
                    rank=r,
                    world_size=3,
                    **({"shard_remainder": remainder} if remainder != "pad" else {}),
                )[0]
            )
            for r in range(3)
        ]
        assert [len(s) for s in shards] == [per_rank] * 3, remainder
        assert sorted(sum(shards, [])) == sorted(expected), remainder


@pytest.mark.parametrize("stop_after", [1, 3, 6])
def test_resume_yields_exactly_the_rest(dataset, stop_after):
    full, _, _ = load(dataset, seed=4, epochs=2, batch_size=3)
    with mmfeed.Loader(
        dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, seed=4, epochs=2, batch_size=3, prefetch_batches=2
    ) as loader:
        first = [next(loader) for _ in range(stop_after)]  # others are prefetched, not consumed
        state = loader.state_dict()
    resumed = mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, seed=4, epochs=2, batch_size=3)
    resumed.load_state_dict(state)
    with resumed:
        rest = list(resumed)
    delivered = [(b["epoch"], sid) for b in first + rest for sid in b["sample_ids"]]
    expected = [(b["epoch"], sid) for b in full for sid in b["sample_ids"]]
    assert delivered == expected


def test_resume_refuses_another_world_size(dataset):
    loader = mmfeed.Loader(dataset, tokenizer=TOKENIZER, world_size=2)
    loader.load_state_dict({"seed": 0, "rank": 0, "world_size": 3, "epoch": 0, "position": 2})
    with pytest.raises(ValueError, match="derive each new rank's state from all old ranks' states"):
        next(loader)
    other_rank = mmfeed.Loader(dataset, tokenizer=TOKENIZER, rank=0, world_size=2)
    other_rank.load_state_dict({"seed": 0, "rank": 1, "world_size": 2, "epoch": 0, "position": 2})
    with pytest.raises(ValueError, match="LoaderConfig.rank: the resume state is rank 1's, not rank 0's"):
        next(other_rank)


def test_bad_samples_are_reported_and_nothing_is_lost(dataset, tmp_path):
    manifest, first = copy_with_damaged_image(dataset, tmp_path / "data", 0, lambda raw: raw[:200])  # truncated
    lines = manifest.read_text().splitlines()
    lines.append('{"id": "broken-json", "messages": [')
    lines.append(
        json.dumps(
            {
                "id": "missing-file",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image", "image": "images/nope.jpg"}, {"type": "text", "text": "?"}],
                    },
                    {"role": "assistant", "content": "!"},
                ],
            }
        )
    )
    manifest.write_text("\n".join(lines) + "\n")
    batches, errors, _ = load(manifest, seed=2)
    by_stage = {e["stage"] for e in errors}
    assert {"manifest", "fetch", "image"} <= by_stage, errors
    reported = {e["sample_id"] for e in errors}
    assert "missing-file" in reported and first["id"] in reported
    assert any("manifest.jsonl:" in sid for sid in reported)  # the broken line named by position
    assert len(flat(batches)) + len(errors) == len(lines)
    with pytest.raises(ValueError, match="sample"):
        load(manifest, seed=2, on_error="fail")


@pytest.mark.parametrize("packed", [False, True])
def test_metrics_report_each_stage(dataset, packed):
    options = dict(token_budget=3000, pack_window=8) if packed else {}
    with mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, batch_size=4, **options) as loader:
        batches = [next(loader)]
        # A trainer busy with its step takes nothing: the engine fills the prefetch queue. (A
        # consumer that always waits may take every batch before the gauge reads the queue.)
        deadline = time.monotonic() + 60
        while loader.metrics()["gauges"]["loader.prefetched_batches"]["max"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        batches += list(loader)
        m = loader.metrics()
    stages = m["stages"]
    assert stages["wall_s"] > 0
    assert stages["process"]["items"] == 23  # every sample's text (and, padding, its images)
    assert stages["decode"]["items"] == 23  # every sample's images, once
    assert stages["assemble"]["items"] == len(batches)
    assert stages["consumer_wait"]["items"] >= len(batches)
    for name in ("process", "decode", "assemble", "consumer_wait"):
        assert 0 < stages[name]["busy_s"] and 0 < stages[name]["busy_share"] <= 1.0001, (name, stages[name])
    assert m["gauges"]["loader.prefetched_batches"]["max"] >= 1
    assert m["batch_buffers"]["acquires"] == len(batches)


@pytest.mark.parametrize("packed", [False, True])
def test_the_workers_write_every_pixel_row_and_the_batch_thread_none(dataset, tmp_path, packed):
    # `workers` is the loader's whole CPU budget: the batch thread plans batches and waits while
    # the pool writes their pixels.
    trace = tmp_path / "trace.json"
    options = dict(token_budget=4096, pack_window=8) if packed else {}
    batches, _, _ = load(dataset, workers=2, trace_path=str(trace), **options)
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    writers = [names[e["tid"]] for e in events if e.get("name") == "write pixels"]
    assert len(writers) == sum(len(b["image_grid_thw"]) for b in batches) > 0
    assert set(writers) <= {"process-0", "process-1"}, set(writers)
    assert any(e.get("name") == "assemble batch" and names[e["tid"]] == "batch" for e in events)


def test_arrays_share_the_batch_buffer_and_outlive_the_loader(dataset):
    with mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, batch_size=4, tensors="np") as loader:
        batch = next(loader)
    address = batch["buffer_address"]
    assert batch["input_ids"].__array_interface__["data"][0] == address
    assert not batch["input_ids"].flags.owndata
    ids = batch["input_ids"].copy()
    del loader
    np.testing.assert_array_equal(batch["input_ids"], ids)  # still valid after close


def test_configuration_errors_name_the_field(dataset):
    with pytest.raises(ValueError, match="LoaderConfig.rank: rank 2 is outside world_size 2"):
        next(mmfeed.Loader(dataset, tokenizer=TOKENIZER, rank=2, world_size=2))
    with pytest.raises(ValueError, match="unknown loader option 'batchsize'"):
        mmfeed.Loader(dataset, tokenizer=TOKENIZER, batchsize=3)  # when made, not at the first batch
    for option, value, expected in [
        ("max_pixels", 1e5, "an integer, not 100000.0"),
        ("batch_size", -1, "an integer >= 0, not -1"),
        ("shuffle", "no", "True or False, not 'no'"),
        ("max_error_fraction", "half", "a number, not 'half'"),
    ]:
        with pytest.raises(TypeError, match=f"loader option '{option}' must be {re.escape(expected)}"):
            mmfeed.Loader(dataset, tokenizer=TOKENIZER, **{option: value})
    with pytest.raises(ValueError, match="manifest: file:///nonexistent.jsonl: cannot open"):
        next(mmfeed.Loader("/nonexistent.jsonl", tokenizer=TOKENIZER))


def test_cli_run_reports_and_writes_a_trace(cli, dataset, tmp_path):

    trace = tmp_path / "trace.json"
    run = subprocess.run(
        [
            cli,
            "run",
            dataset,
            "--tokenizer",
            TOKENIZER,
            "--max-pixels",
            str(MAX_PIXELS),
            "--batch-size",
            "5",
            "--trace",
            trace,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(run.stdout)
    assert report["samples"] == 23 and report["batches"] == 5 and report["skipped"] == 0
    assert report["metrics"]["counters"]["loader.samples"] == 23
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["name"] for e in events}
    assert {"process sample", "assemble batch", "next (waiting)", "thread_name"} <= names
    assert any(e["ph"] == "M" and e["args"]["name"].startswith("process-") for e in events)


def test_cli_run_config_file_and_bad_options(cli, dataset, tmp_path):

    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "manifests": [str(dataset)],
                "tokenizer": str(TOKENIZER),
                "batch_size": 6,
                "max_pixels": MAX_PIXELS,
                "shuffle": False,
            }
        )
    )
    run = subprocess.run([cli, "run", "--config", config, "--json"], capture_output=True, text=True, check=True)
    assert json.loads(run.stdout)["batches"] == 4
    bad = subprocess.run(
        [cli, "run", dataset, "--tokenizer", TOKENIZER, "--frobnicate", "1"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "unknown option --frobnicate" in bad.stderr


def test_cli_toml_config_equals_the_flags(cli, dataset, tmp_path):
    # Every option is a flag and a config key; a TOML table and the flags give the same run.
    flags = [
        cli,
        "run",
        dataset,
        "--tokenizer",
        TOKENIZER,
        "--max-pixels",
        str(MAX_PIXELS),
        "--no-shuffle",
        "--token-budget",
        "2000",
        "--pack-window",
        "8",
        "--mrope",
        "--labels",
        "content_and_eos",
        "--max-error-fraction",
        "0.25",
        "--max-buffered-bytes",
        "50000000",
        "--no-pin-memory",
        "--json",
    ]
    by_flags = json.loads(subprocess.run(flags, capture_output=True, text=True, check=True).stdout)
    config = tmp_path / "config.toml"
    config.write_text(f"""# mmfeed run options
manifests = ["{dataset}"]
tokenizer = "{TOKENIZER}"
max_pixels = {MAX_PIXELS}
shuffle = false
token_budget = 2000
pack-window = 8
mrope = true
labels = "content_and_eos"
max_error_fraction = 0.25
max_buffered_bytes = 50_000_000
pin_memory = false
""")
    by_toml = json.loads(
        subprocess.run([cli, "run", "--config", config, "--json"], capture_output=True, text=True, check=True).stdout
    )
    for key in ("batches", "samples", "tokens", "images"):
        assert by_toml[key] == by_flags[key], key
    assert by_flags["samples"] == by_flags["metrics"]["counters"]["loader.samples"] > 0
    # Packing took effect: fewer rows than samples.
    assert by_flags["batches"] < by_flags["samples"]

    broken = tmp_path / "broken.toml"
    broken.write_text('tokenizer = "a"\nbatch_size = = 3\n')
    bad = subprocess.run([cli, "run", "--config", broken], capture_output=True, text=True)
    assert bad.returncode == 2 and "config is not TOML" in bad.stderr and "line 2" in bad.stderr
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('mrope = "yes"\n')
    bad = subprocess.run([cli, "run", "--config", wrong], capture_output=True, text=True)
    assert bad.returncode == 2 and "mrope takes true or false" in bad.stderr and "wrong.toml" in bad.stderr


@pytest.mark.parametrize("packed", [False, True])
def test_pad_to_multiple_of_only_adds_padding(dataset, packed):
    options = dict(seed=3, **({"token_budget": 3000, "pack_window": 8} if packed else {}))
    plain, _, _ = load(dataset, **options)
    rounded, errors, _ = load(dataset, pad_to_multiple_of=64, **options)
    assert not errors and len(plain) == len(rounded)
    grew = 0
    for a, b in zip(plain, rounded):
        n, m = a["input_ids"].shape[1], b["input_ids"].shape[1]
        assert m % 64 == 0 and n <= m < n + 64
        grew += m - n
        for key in ("input_ids", "labels", "mm_token_type_ids") + (() if packed else ("attention_mask",)):
            np.testing.assert_array_equal(b[key][:, :n], a[key])
        assert (b["input_ids"][:, n:] == 151643).all()  # <|endoftext|>, Qwen's pad
        assert (b["labels"][:, n:] == -100).all() and (b["mm_token_type_ids"][:, n:] == 0).all()
        np.testing.assert_array_equal(b["position_ids"][..., :n], a["position_ids"])
        if packed:
            # the row's tail is a sequence of its own: positions from 0, and its own cu_seq_lens entry
            assert "attention_mask" not in b
            assert (b["position_ids"][..., n:] == np.arange(m - n)).all()
            k = len(a["sample_ids"])
            np.testing.assert_array_equal(b["cu_seq_lens_q"][: k + 1], a["cu_seq_lens_q"][: k + 1])
            assert list(b["cu_seq_lens_q"][k + 1 :]) == ([m] if m > n else [])
            assert b["max_length_q"] == max(a["max_length_q"], m - n)
        else:
            assert (b["attention_mask"][:, n:] == 0).all() and (b["position_ids"][..., n:] == 0).all()
        for key in ("pixel_values", "image_grid_thw", "sample_ids"):
            np.testing.assert_array_equal(b[key], a[key])
    assert grew > 0
    with pytest.raises(ValueError, match="pad_to_multiple_of"):
        load(dataset, pad_to_multiple_of=1 << 21)


def test_packing_fills_rows_under_the_budget(dataset):
    padded, _, _ = load(dataset, seed=6, batch_size=100)  # one batch holding every sample
    lengths = {sid: int(m.sum()) for sid, m in zip(padded[0]["sample_ids"], padded[0]["attention_mask"])}
    budget = max(lengths.values()) + 200
    rows, errors, _ = load(dataset, seed=6, token_budget=budget, pack_window=10)
    assert not errors
    assert sorted(flat(rows)) == sorted(lengths)
    by_id = {}
    for b in padded:
        for i, sid in enumerate(b["sample_ids"]):
            n = lengths[sid]
            by_id[sid] = (b["input_ids"][i, :n], b["labels"][i, :n], b["position_ids"][:, i, :n])
    for row in rows:
        cu = row["cu_seq_lens_q"]
        assert row["input_ids"].shape == (1, cu[-1]) and cu[-1] <= budget
        assert row["position_ids"].shape == (4, 1, cu[-1])
        for k, sid in enumerate(row["sample_ids"]):
            a, b = cu[k], cu[k + 1]
            np.testing.assert_array_equal(row["input_ids"][0, a:b], by_id[sid][0])
            np.testing.assert_array_equal(row["labels"][0, a:b], by_id[sid][1])  # (the first is -100 in both)
            np.testing.assert_array_equal(row["position_ids"][0, 0, a:b], np.arange(b - a))
            np.testing.assert_array_equal(row["position_ids"][1:, 0, a:b], by_id[sid][2])
    # first-fit decreasing over windows of 10 needs few rows
    assert len(rows) < len(lengths)


def test_packing_resumes_inside_a_window(dataset):
    options = dict(seed=8, token_budget=3000, pack_window=12, epochs=2)
    full, _, _ = load(dataset, **options)
    for stop_after in (1, 2, len(full) - 1):
        with mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, **options) as loader:
            first = [next(loader) for _ in range(stop_after)]
            state = loader.state_dict()
        resumed = mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, **options)
        resumed.load_state_dict(state)
        with resumed:
            rest = list(resumed)
        assert [b["sample_ids"] for b in first + rest] == [b["sample_ids"] for b in full]


def test_packing_plans_from_headers_and_decodes_row_by_row(dataset, tmp_path):
    # An image whose header is intact but whose data is cut: packing plans its sample into a row
    # from the header, the decode fails afterwards, and the sample is dropped from that row and
    # reported; the serial and concurrent modes deliver the same rows.
    manifest, victim = copy_with_damaged_image(dataset, tmp_path / "data", 3, lambda raw: raw[: len(raw) // 2])
    lines = manifest.read_text().splitlines()
    padded = load(dataset, seed=4, batch_size=100)[0][0]
    budget = int(padded["attention_mask"].sum(axis=1).max()) + 50  # every sample fits, two or three a row
    options = dict(seed=4, token_budget=budget, pack_window=12, trace_path=str(tmp_path / "trace.json"))
    rows, errors, _ = load(manifest, workers=2, **options)
    assert [(e["sample_id"], e["stage"]) for e in errors] == [(victim["id"], "image")]
    assert sorted(flat(rows)) == sorted(
        json.loads(line)["id"] for line in lines if json.loads(line)["id"] != victim["id"]
    )
    serial, serial_errors, _ = load(manifest, mode="serial", **dict(options, trace_path=""))
    assert [r["sample_ids"] for r in serial] == [r["sample_ids"] for r in rows] and serial_errors == errors
    for a, b in zip(rows, serial):
        np.testing.assert_array_equal(a["pixel_values"], b["pixel_values"])
    # The first window's media were decoded row by row, in the order the rows are delivered:
    # every sample of its first row before any of its last (the pool takes tasks in order).
    window = set(padded["sample_ids"][:12])
    window_rows = [r["sample_ids"] for r in rows if set(r["sample_ids"]) <= window]
    assert len(window_rows) >= 3, window_rows
    starts = {
        e["args"]["detail"]: e["ts"]
        for e in json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
        if e.get("name") == "decode media"
    }
    assert max(starts[sid] for sid in window_rows[0]) < min(starts[sid] for sid in window_rows[-1])
    with pytest.raises(ValueError, match=victim["id"]):
        load(manifest, on_error="fail", **dict(options, trace_path=""))


def test_oversized_samples_are_reported_when_packing(dataset):
    padded, _, _ = load(dataset, batch_size=100)
    lengths = sorted(int(m.sum()) for m in padded[0]["attention_mask"])
    budget = lengths[len(lengths) // 2]
    rows, errors, _ = load(dataset, token_budget=budget, pack_window=8)
    assert len(errors) == sum(1 for n in lengths if n > budget) > 0
    assert all(f"more than token_budget {budget}" in e["reason"] and e["stage"] == "text" for e in errors)
    assert len(flat(rows)) + len(errors) == 23


def test_mrope_positions_in_batches_match_the_conversation_encoder(dataset):
    batches, _, _ = load(dataset, shuffle=False, mrope=True, batch_size=3)
    tok = mmfeed.Tokenizer.from_file(TOKENIZER)
    proc = mmfeed.ImageProcessor("qwen2-vl", max_pixels=MAX_PIXELS)
    samples = {json.loads(line)["id"]: json.loads(line) for line in dataset.read_text().splitlines()}
    b = batches[0]
    assert b["position_ids"].shape == (3,) + b["input_ids"].shape
    for i, sid in enumerate(b["sample_ids"]):
        paths = [
            str(dataset.parent / c["image"])
            for m in samples[sid]["messages"]
            if isinstance(m["content"], list)
            for c in m["content"]
            if c["type"] == "image"
        ]
        enc = mmfeed.encode_conversation(samples[sid], proc(paths)["image_grid_thw"].tolist(), tok, mrope=True)
        n = len(enc["input_ids"])
        np.testing.assert_array_equal(b["position_ids"][:, i, :n], enc["position_ids"])


def test_gzip_manifest_gives_the_same_batches(dataset, tmp_path):
    import gzip

    packed = dataset.parent / "manifest.jsonl.gz"
    packed.write_bytes(gzip.compress(dataset.read_bytes()))
    a, _, _ = load(dataset, seed=2)
    b, _, _ = load(packed, seed=2)
    assert [x["sample_ids"] for x in a] == [x["sample_ids"] for x in b]
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(packed.read_bytes()[:100])
    with pytest.raises(ValueError, match="gzip data is (truncated|corrupt)"):
        load(broken)


def test_a_byte_order_mark_does_not_cost_the_first_sample(dataset, tmp_path):
    marked = dataset.parent / "manifest-bom.jsonl"  # beside the images it names
    marked.write_bytes(b"\xef\xbb\xbf" + dataset.read_bytes().replace(b"\n", b"\r\n"))
    a, _, _ = load(dataset, seed=2)
    b, errors, _ = load(marked, seed=2)
    assert errors == [] and [x["sample_ids"] for x in a] == [x["sample_ids"] for x in b]


def test_zstd_manifest_in_two_frames_gives_the_same_batches(dataset, tmp_path):
    # Two frames, as `zstd` writes for concatenated inputs, decompressing to more than the
    # decoder's output chunk (blank lines are skipped); a cut-off copy is reported.
    text = dataset.read_bytes()
    half = text.index(b"\n", len(text) // 2) + 1
    frames = b""
    for i, part in enumerate((text[:half] + b"\n" * 400_000, text[half:])):
        (tmp_path / f"part{i}").write_bytes(part)
        frames += subprocess.run(
            ["zstd", "-q", "-c", str(tmp_path / f"part{i}")], check=True, capture_output=True
        ).stdout
    assert frames[:4] == b"\x28\xb5\x2f\xfd" and frames.count(b"\x28\xb5\x2f\xfd") >= 2
    packed = dataset.parent / "manifest.jsonl.zst"
    packed.write_bytes(frames)
    a, _, _ = load(dataset, seed=2)
    b, _, _ = load(packed, seed=2)
    assert [x["sample_ids"] for x in a] == [x["sample_ids"] for x in b]
    broken = tmp_path / "broken.jsonl.zst"
    broken.write_bytes(frames[: len(frames) // 3])
    with pytest.raises(ValueError, match="zstd data is (truncated|corrupt)"):
        load(broken)


def test_manifest_over_http_resolves_images_against_its_url(dataset, tmp_path):
    from servers import Nginx

    server = Nginx(dataset.parent, tmp_path / "nginx").start()
    try:
        remote, errors, _ = load(server.url("ok", "manifest.jsonl"), seed=1)
    finally:
        server.stop()
    local, _, _ = load(dataset, seed=1)
    assert not errors
    for a, b in zip(local, remote):
        assert a["sample_ids"] == b["sample_ids"]
        np.testing.assert_array_equal(a["pixel_values"], b["pixel_values"])


def test_manifest_and_images_in_s3(dataset, moto_s3, monkeypatch):
    s3 = moto_s3.client()
    s3.create_bucket(Bucket="loader-data")
    for path in dataset.parent.rglob("*"):
        if path.is_file():
            s3.put_object(Bucket="loader-data", Key=f"train/{path.relative_to(dataset.parent)}", Body=path.read_bytes())
    for key, value in moto_s3.env().items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)
    remote, errors, _ = load("s3://loader-data/train/manifest.jsonl", seed=1)
    local, _, _ = load(dataset, seed=1)
    assert not errors
    assert [x["sample_ids"] for x in remote] == [x["sample_ids"] for x in local]
    np.testing.assert_array_equal(remote[0]["pixel_values"], local[0]["pixel_values"])


def test_storage_faults_are_retried_and_every_sample_arrives(dataset, tmp_path):
    from servers import Nginx, rewrite_images

    # Every image's first four requests fail, one in each quick way (faulty.lua); the fetcher's five
    # attempts always reach the fifth, so the test cannot fail by chance.
    server = Nginx(dataset.parent, tmp_path / "nginx").start()
    try:
        manifest = rewrite_images(
            dataset,
            lambda ref: server.url("faulty", ref) + "?faults=slowdown,500,truncate,reset",
            tmp_path / "faulty.jsonl",
        )
        faulty, errors, _ = load(manifest, seed=1)
    finally:
        server.stop()
    clean, _, _ = load(dataset, seed=1)
    assert not errors
    for a, b in zip(clean, faulty):
        assert a["sample_ids"] == b["sample_ids"]
        np.testing.assert_array_equal(a["pixel_values"], b["pixel_values"])


def test_cli_inspect_marks_the_trained_spans(cli, dataset):

    run = subprocess.run(
        [cli, "inspect", dataset, "--tokenizer", TOKENIZER, "--max-pixels", str(MAX_PIXELS), "--batch-size", "2"],
        capture_output=True,
        text=True,
        check=True,
    )
    out = run.stdout
    assert "input_ids       int64   [2, " in out and "pixel_values    float32 [" in out
    assert "<|im_start|>assistant\n[[" in out and "<|im_end|>\n]]" in out
    assert "<|image_pad|>x" in out


RSS_SCRIPT = """
import itertools, sys, time, mmfeed
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
def prefetched(loader):
    return loader.metrics()["gauges"]["loader.prefetched_batches"]["value"]
budget, hold_all = int(sys.argv[1]), sys.argv[4] == "hold-all"
largest = total = 0
with mmfeed.Loader(sys.argv[2], tokenizer=sys.argv[3], max_pixels=1_000_000, batch_size=4, prefetch_batches=16,
                   tensors="np", workers=2, max_buffered_bytes=budget) as loader:
    base = rss("VmRSS")
    batches = iter(loader)
    first = [next(batches)]
    if hold_all:  # the control: the trainer takes nothing more until every other batch is prefetched
        deadline = time.monotonic() + 600
        while prefetched(loader) < 11:
            assert time.monotonic() < deadline, "the loader never prefetched every batch"
            time.sleep(0.05)
    for batch in itertools.chain(first, batches):
        size = sum(v.nbytes for v in batch.values() if hasattr(v, "nbytes"))
        largest, total = max(largest, size), total + size
        time.sleep(0.3)  # a slow trainer: without a budget the loader would run far ahead
        del batch
    print(rss("VmHWM") - base, largest, total, len(loader.errors()))
"""


def test_byte_budget_bounds_peak_memory(tmp_path):
    import sys

    data = tmp_path / "big"
    datagen.generate(data, samples=48, seed=1, max_megapixels=3, workers=2)

    def growth_with(budget, hold_all=False):
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                RSS_SCRIPT,
                str(budget),
                data / "manifest.jsonl",
                TOKENIZER,
                "hold-all" if hold_all else "stream",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return tuple(map(int, run.stdout.split()))

    budget = 100_000_000  # more than any one sample's pixel rows here (a larger one would be refused)
    growth, largest_batch, total, failed = growth_with(budget)
    assert failed == 0
    # Stated overhead beyond the budget: the batch being assembled, the one the trainer holds and
    # the samples gathered for the next (3 batches), two workers' decode and resize buffers for a
    # 3 MP image (~60 MB each), the process-wide cache of released scratch buffers (128 MiB,
    # core/scratch.h) and allocator slack (100 MB).
    overhead = 3 * largest_batch + 2 * 60_000_000 + (128 << 20) + 100_000_000
    assert growth < budget + overhead, (growth, budget, overhead)
    # The control, from the same data in the same run and independent of the machine's speed:
    # without a budget, a trainer that waits until all 12 batches are prefetched holds them all at
    # once, which this data set makes larger than the bound above.
    assert total > budget + overhead, (total, budget, overhead)
    unbounded, _, _, _ = growth_with(1 << 40, hold_all=True)
    assert unbounded >= total, (unbounded, total)


def test_unordered_mode_delivers_each_epoch_once_and_refuses_resume(dataset):
    ordered, _, _ = load(dataset, seed=5, epochs=2)
    unordered, errors, state = load(dataset, seed=5, epochs=2, ordered=False, workers=3)
    assert not errors
    for epoch in (0, 1):
        a = sorted(sid for b in ordered if b["epoch"] == epoch for sid in b["sample_ids"])
        b = sorted(sid for x in unordered if x["epoch"] == epoch for sid in x["sample_ids"])
        assert a == b
    loader = mmfeed.Loader(dataset, tokenizer=TOKENIZER, ordered=False)
    loader.load_state_dict({"seed": 0, "rank": 0, "world_size": 1, "epoch": 0, "position": 4})
    with pytest.raises(ValueError, match="an unordered run cannot be resumed"):
        next(loader)


def stop_every_rank(dataset, world, taken, options):
    """Each rank of `world` takes `taken` batches and stops: the ids delivered, the states."""
    delivered, states = [], []
    for rank in range(world):
        with mmfeed.Loader(dataset, rank=rank, world_size=world, **options) as loader:
            for _ in range(taken):
                delivered += next(loader)["sample_ids"]
            states.append(loader.state_dict())
    return delivered, states


def resume_resharded(dataset, states, world, options, delivered):
    """Every rank of the new `world` resumes from the old states and runs to the end; ids per epoch."""
    by_epoch = {0: list(delivered), 1: []}
    for rank in range(world):
        loader = mmfeed.Loader(dataset, rank=rank, world_size=world, **options)
        loader.load_state_dict(mmfeed.Loader.reshard_states(states, rank, world))
        with loader:
            for batch in loader:
                by_epoch[batch["epoch"]] += batch["sample_ids"]
    return by_epoch


# Balanced by cost (issue 52), the old world's steps as it balanced them, the rest balanced anew.
@pytest.mark.parametrize("balance", ["none", "compute"])
@pytest.mark.parametrize("old_world,new_world,taken", [(2, 3, 2), (3, 2, 1), (2, 1, 3)])
def test_resume_after_a_change_of_world_size(dataset, old_world, new_world, taken, balance):
    options = dict(
        tokenizer=TOKENIZER,
        max_pixels=MAX_PIXELS,
        batch_size=2,
        seed=7,
        epochs=2,
        shard_remainder="keep",
        balance=balance,
        gradient_accumulation_steps=2,
    )
    taken_ids, states = stop_every_rank(dataset, old_world, taken, options)
    delivered = resume_resharded(dataset, states, new_world, options, taken_ids)
    ids = sorted(json.loads(line)["id"] for line in dataset.read_text().splitlines())
    assert sorted(delivered[0]) == ids  # the interrupted epoch: every sample exactly once
    assert sorted(delivered[1]) == ids  # the next epoch, sharded over the new world


@pytest.mark.parametrize("balance", ["none", "tokens"])
@pytest.mark.parametrize("old_world,new_world,taken", [(2, 3, 1), (3, 2, 2)])
def test_resume_after_a_change_of_world_size_inside_packing_windows(dataset, old_world, new_world, taken, balance):
    options = dict(
        tokenizer=TOKENIZER,
        max_pixels=MAX_PIXELS,
        token_budget=700,
        pack_window=8,
        seed=7,
        epochs=2,
        shard_remainder="keep",
        balance=balance,
    )
    taken_ids, states = stop_every_rank(dataset, old_world, taken, options)
    inside = [s for s in states if s["packed_delivered"] > 0]
    assert inside, states  # at least one rank stopped inside a window
    assert all(len(s["window_delivered"]) > 0 for s in inside)
    delivered = resume_resharded(dataset, states, new_world, options, taken_ids)
    ids = sorted(json.loads(line)["id"] for line in dataset.read_text().splitlines())
    assert sorted(delivered[0]) == ids  # the interrupted epoch: every sample exactly once
    assert sorted(delivered[1]) == ids


def test_reshard_refuses_incomplete_sets(dataset):
    state = {"seed": 0, "rank": 0, "world_size": 2, "epoch": 0, "position": 4}
    with pytest.raises(ValueError, match="needs the states of all 2 old ranks"):
        mmfeed.Loader.reshard_states([state], 0, 3)
    with pytest.raises(ValueError, match="stopped inside a packing window"):
        mmfeed.Loader.reshard_states([dict(state, packed_delivered=1), dict(state, rank=1)], 0, 3)


@pytest.mark.parametrize("packing", [{}, {"token_budget": 4096, "pack_window": 8}], ids=["padded", "packed"])
def test_parts_of_epochs_deliver_the_full_runs_batches_and_states(dataset, packing):
    """A run started at a resume state and ended at end_position delivers exactly the full run's
    batches of those positions, with the full run's states (how mmfeed.ray's actors split a run)."""
    options = dict(seed=6, epochs=2, workers=2, **packing)
    with mmfeed.Loader(
        dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, batch_size=4, tensors="np", **options
    ) as loader:
        full = [(dict(b), loader.state_dict()) for b in loader]
    group = packing.get("pack_window", 4)
    parts, size = [], 23
    for epoch in range(2):
        for start in range(0, size, 2 * group):
            end = start + 2 * group if start + 2 * group < size else 0  # 0: the epoch's end
            part = mmfeed.Loader(
                dataset,
                tokenizer=TOKENIZER,
                max_pixels=MAX_PIXELS,
                batch_size=4,
                tensors="np",
                **{**options, "epochs": epoch + 1, "end_position": end},
            )
            part.load_state_dict(
                {**full[0][1], "epoch": epoch, "position": start, "packed_delivered": 0, "window_delivered": []}
            )
            with part:
                parts += [(dict(b), part.state_dict()) for b in part]
    assert [b["sample_ids"] for b, _ in parts] == [b["sample_ids"] for b, _ in full]
    for (a, state_a), (b, state_b) in zip(full, parts):
        for key in a.keys() - {"buffer_address", "index"}:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        assert state_a == state_b


def test_a_skipped_sample_makes_its_batch_smaller_and_moves_no_other(dataset, tmp_path):
    """A batch is a group of positions: the damaged sample's batch holds the rest of its group,
    every other batch is the clean run's, concurrent and serial alike."""
    damaged, victim = copy_with_damaged_image(dataset, tmp_path / "damaged", line=7, damage=lambda b: b[:40])
    clean, _, _ = load(dataset, seed=2)
    for mode in ("concurrent", "serial"):
        got, errors, _ = load(damaged, seed=2, mode=mode)
        assert [e["sample_id"] for e in errors] == [victim["id"]]
        assert len(got) == len(clean)
        for a, b in zip(got, clean):
            assert a["sample_ids"] == [s for s in b["sample_ids"] if s != victim["id"]], mode
