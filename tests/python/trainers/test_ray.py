"""mmfeed.ray (issue 21): the per-sample work on Ray actors, the batches mmfeed.Loader's. On a Ray
instance started here (ray.init with a few CPUs) and a two-node Cluster (ray.cluster_utils): the
same bytes, order, sample_ids and states for 1, 2 and 3 actors, padded and packed; an actor killed
mid-epoch and the epoch still complete, each sample once, errors accounted once; resume under
another number of actors (and into mmfeed.Loader); actors placed by a custom resource; the parts
queued bounded."""

import json
import time

import datagen
import numpy as np
import pytest
from conftest import ROOT, copy_with_damaged_image

import mmfeed

ray = pytest.importorskip("ray")
import mmfeed.ray  # noqa: E402

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = dict(tokenizer=str(TOKENIZER), max_pixels=100_000, batch_size=3, seed=4, epochs=2, workers=1)
PACKED = dict(OPTIONS, token_budget=3000, pack_window=6)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("ray-data")
    datagen.generate(out / "clean", samples=17, seed=9, max_megapixels=0.4, workers=2)
    # One sample whose image is damaged: reported by whichever actor runs its part.
    manifest, victim = copy_with_damaged_image(
        out / "clean" / "manifest.jsonl", out / "damaged", line=5, damage=lambda b: b[: len(b) // 3]
    )
    return manifest, victim


def reference(manifest, options):
    with mmfeed.Loader(manifest, tensors="np", **options) as loader:
        batches = [(dict(b), loader.state_dict()) for b in loader]
        return batches, loader.errors()


def ray_loader(manifest, options, **pool):
    """An mmfeed.ray.Loader of numpy batches over actors of half a CPU each."""
    return mmfeed.ray.Loader(manifest, tensors="np", actor_options={"num_cpus": 0.5}, **pool, **options)


def collect(loader, after=None):
    """Every batch with the state after it; after[i](loader) runs once batch i is taken."""
    got = []
    for i, b in enumerate(loader):
        got.append((b, loader.state_dict()))
        if after and i in after:
            after[i](loader)
    return got


def assert_same(got, want):
    assert [b["sample_ids"] for b, _ in got] == [b["sample_ids"] for b, _ in want]
    for (a, state_a), (b, state_b) in zip(got, want):
        assert a.keys() - {"buffer_address"} == b.keys() - {"buffer_address"}
        for key in a.keys() - {"buffer_address"}:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        assert state_a == state_b


@pytest.mark.parametrize("options", [OPTIONS, PACKED], ids=["padded", "packed"])
@pytest.mark.parametrize("actors", [1, 2, 3])
def test_batches_equal_the_local_loaders_for_any_number_of_actors(local_ray, dataset, options, actors):
    manifest, victim = dataset
    want, want_errors = reference(manifest, options)
    with ray_loader(manifest, options, num_actors=actors, part_groups=2) as loader:
        got = [(b, loader.state_dict()) for b in loader]
        errors = loader.errors()
        metrics = loader.metrics()
    assert_same(got, want)
    assert errors == want_errors and [e["sample_id"] for e in errors] == [victim["id"]] * 2  # once an epoch
    assert metrics["batches"] == len(want) and metrics["actors_died"] == 0
    assert sum(a["samples"] for a in metrics["actors"]) == sum(len(b["sample_ids"]) for b, _ in want)


@pytest.mark.parametrize("store_bytes", [None, 64 << 20], ids=["batches", "store-bytes"])
def test_an_actor_killed_mid_epoch_loses_nothing_and_delivers_nothing_twice(local_ray, dataset, store_bytes):
    # store_bytes: the batches' credits in the streams too, read or abandoned with a dead actor's.
    manifest, victim = dataset
    want, want_errors = reference(manifest, OPTIONS)
    with ray_loader(manifest, OPTIONS, num_actors=2, part_groups=2, store_bytes=store_bytes) as loader:
        # After batch 1: the first actor, holding parts 0, 2 and 4 (of 6), part 2 read next from it.
        # After batch 6: the newest live actor, which may or may not hold a part still to be read.
        got = collect(
            loader, {1: lambda l: ray.kill(l.actor_handles()[0]), 6: lambda l: ray.kill(l.actor_handles()[-1])}
        )
        metrics = loader.metrics()
        errors = loader.errors()
    assert_same(got, want)
    assert errors == want_errors
    # A death is seen when a part of the dead actor is read, and then it is replaced.
    assert metrics["actors_died"] in (1, 2) and metrics["actors_started"] == 2 + metrics["actors_died"]


def test_without_replacements_a_dead_actors_part_never_waits_behind_a_later_one(local_ray, dataset):
    # A part the trainer needs before the survivor's queued parts cannot go behind them (each
    # waits for the trainer to take its batches): one actor is started for it all the same.
    manifest, _ = dataset
    want, _ = reference(manifest, OPTIONS)
    with ray_loader(manifest, OPTIONS, num_actors=2, part_groups=2, replace_dead=False) as loader:
        got = collect(loader, {1: lambda l: ray.kill(l.actor_handles()[0])})
        metrics = loader.metrics()
    assert_same(got, want)
    assert metrics["actors_died"] == 1 and metrics["actors_started"] == 3


def test_resume_under_another_number_of_actors_and_into_the_local_loader(local_ray, dataset):
    manifest, _ = dataset
    want, _ = reference(manifest, PACKED)
    taken = len(want) // 2 + 1  # past the first epoch's middle, inside a packing window or not
    with ray_loader(manifest, PACKED, num_actors=3, part_groups=1) as loader:
        for _ in range(taken):
            next(loader)
        state = loader.state_dict()
    assert state == want[taken - 1][1]
    resumed = ray_loader(manifest, PACKED, num_actors=1, part_groups=3)
    resumed.load_state_dict(state)
    with resumed:
        rest = [(b, resumed.state_dict()) for b in resumed]
    want_rest = want[taken:]
    for b, _ in want_rest:  # counted from the resumed run's start, as mmfeed.Loader counts
        b["index"] = None
    for b, _ in rest:
        b["index"] = None
    assert_same(rest, want_rest)
    local = mmfeed.Loader(manifest, tensors="np", **PACKED)
    local.load_state_dict(state)
    with local:
        assert [b["sample_ids"] for b in local] == [b["sample_ids"] for b, _ in want_rest]


def test_the_parts_queued_stay_bounded_with_a_slow_trainer(local_ray, dataset):
    manifest, _ = dataset
    with ray_loader(manifest, OPTIONS, num_actors=2, part_groups=1, parts_in_flight=1) as loader:
        queued = []
        for _ in loader:
            queued.append(sum(a["queued_parts"] for a in loader.metrics()["actors"]))
        assert max(queued) <= loader.metrics()["max_parts_queued"] == 2


@pytest.mark.parametrize("ahead", [1, 2])
def test_an_actor_stops_batches_ahead_of_a_slow_trainer(local_ray, dataset, ahead):
    # The object store holds at most batches_ahead untaken batches per actor: the actor's part
    # (an epoch: 6 batches) waits for the trainer, however long it sleeps.
    manifest, _ = dataset
    with ray_loader(manifest, OPTIONS, num_actors=1, part_groups=6, batches_ahead=ahead) as loader:
        loader.wait_ready()
        for _ in loader:
            time.sleep(0.4)
        (actor,) = loader.metrics()["actors"]
        assert loader.metrics()["batches_ahead"] == ahead
        assert 1 <= actor["most_batches_ahead"] <= ahead, actor


def test_store_bytes_bound_the_bytes_an_actor_holds_ahead(local_ray, dataset):
    # Each part's share of store_bytes (here one and a half of the largest batch) holds the
    # actor back before batches_ahead (6, a whole part) does; the batches are the same.
    manifest, _ = dataset
    want, _ = reference(manifest, OPTIONS)
    sizes = [sum(v.nbytes for v in b.values() if isinstance(v, np.ndarray)) for b, _ in want]
    share = 3 * max(sizes) // 2
    assert share < 6 * min(sizes)  # the byte bound is the tighter one
    with ray_loader(
        manifest, OPTIONS, num_actors=1, part_groups=6, batches_ahead=6, parts_in_flight=2, store_bytes=2 * share
    ) as loader:
        loader.wait_ready()
        got = []
        for b in loader:
            got.append((b, loader.state_dict()))
            time.sleep(0.4)
        metrics = loader.metrics()
    assert_same(got, want)
    (actor,) = metrics["actors"]
    assert metrics["store_bytes"] == 2 * share and metrics["largest_batch_bytes"] == max(sizes)
    assert max(sizes) <= actor["most_bytes_ahead"] <= share, actor
    assert 1 <= actor["most_batches_ahead"] < 6, actor


def test_actors_can_be_added_and_removed_between_batches(local_ray, dataset):
    manifest, _ = dataset
    want, _ = reference(manifest, OPTIONS)
    with ray_loader(manifest, OPTIONS, num_actors=1, part_groups=1) as loader:
        got = collect(loader, {1: lambda l: l.add_actors(2), 5: lambda l: l.remove_actors(2)})
        assert len(loader.actor_handles()) == 1
    assert_same(got, want)


def test_torch_tensors_share_the_object_stores_memory(local_ray, dataset):
    torch = pytest.importorskip("torch")
    manifest, _ = dataset
    with mmfeed.ray.Loader(manifest, num_actors=1, actor_options={"num_cpus": 0.5}, **OPTIONS) as loader:
        b = next(loader)
    assert isinstance(b["input_ids"], torch.Tensor) and b["input_ids"].dtype == torch.int64
    assert b["pixel_values"].shape[1] == 1176
    options = dict(OPTIONS, pixels="bfloat16")
    with mmfeed.ray.Loader(manifest, num_actors=1, actor_options={"num_cpus": 0.5}, **options) as loader:
        got = next(loader)
    with mmfeed.Loader(manifest, **options) as loader:
        want = next(iter(loader))
    assert got["pixel_values"].dtype == want["pixel_values"].dtype == torch.bfloat16
    assert torch.equal(got["pixel_values"], want["pixel_values"])


def test_uint8_pixels_cross_the_object_store_in_an_eighth_of_the_bytes(local_ray, dataset):
    """pixels="uint8" is the compact form for the store: the same batches as mmfeed.Loader's with
    that option, which normalize_pixels turns into the float32 run's."""
    manifest, _ = dataset
    options = dict(OPTIONS, pixels="uint8")
    want, _ = reference(manifest, options)
    with ray_loader(manifest, options, num_actors=2, part_groups=2) as loader:
        got = collect(loader)
    assert_same(got, want)
    floats, _ = reference(manifest, OPTIONS)
    for (b, _), (f, _) in zip(got, floats):
        assert b["pixel_values"].nbytes * 8 == f["pixel_values"].nbytes
        np.testing.assert_array_equal(mmfeed.normalize_pixels(b)["pixel_values"], f["pixel_values"])


def test_engine_errors_reach_the_trainer_and_bad_options_are_refused(local_ray, dataset):
    manifest, victim = dataset
    with pytest.raises(ValueError, match=victim["id"]):
        with ray_loader(manifest, dict(OPTIONS, on_error="fail"), num_actors=1) as loader:
            list(loader)
    with pytest.raises(ValueError, match="end_position"):
        mmfeed.ray.Loader(manifest, end_position=3, **OPTIONS)
    with pytest.raises(ValueError, match="unknown"):
        mmfeed.ray.Loader(manifest, no_such_option=1, **OPTIONS)


def test_actors_are_placed_by_a_custom_resource_on_a_cluster(dataset, local_ray):
    """Two simulated nodes, one of them carrying "preprocess": every actor lands there."""
    from ray.cluster_utils import Cluster

    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        worker = cluster.add_node(num_cpus=2, resources={"preprocess": 2})
        ray.init(address=cluster.address, log_to_driver=False)
        manifest, _ = dataset
        want, _ = reference(manifest, OPTIONS)
        with mmfeed.ray.Loader(
            manifest,
            num_actors=2,
            tensors="np",
            actor_options={"num_cpus": 0.5, "resources": {"preprocess": 1}},
            **OPTIONS,
        ) as loader:
            nodes = set(loader.wait_ready(timeout=120))
            got = [(b, loader.state_dict()) for b in loader]
        assert nodes == {worker.node_id}
        assert_same(got, want)
    finally:
        ray.shutdown()
        cluster.shutdown()
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, object_store_memory=300 * 1024 * 1024)


def test_a_node_lost_mid_epoch_loses_nothing(dataset, local_ray):
    """Three simulated nodes: the head (the trainer) and two carrying "preprocess". The node of the
    actor holding the part being read is removed mid-epoch (its processes killed, its object store
    gone): its parts run again on the other node, each sample once, the error once."""
    from ray.cluster_utils import Cluster

    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        nodes = [cluster.add_node(num_cpus=2, resources={"preprocess": 2}) for _ in range(2)]
        ray.init(address=cluster.address, log_to_driver=False)
        manifest, _ = dataset
        want, want_errors = reference(manifest, OPTIONS)
        with mmfeed.ray.Loader(
            manifest,
            num_actors=2,
            tensors="np",
            part_groups=2,
            actor_options={"num_cpus": 0.5, "resources": {"preprocess": 1}, "scheduling_strategy": "SPREAD"},
            **OPTIONS,
        ) as loader:
            # SPREAD puts one actor on each node as a rule; if both share one, both go with it.
            placed = loader.wait_ready(timeout=120)
            lost = next(n for n in nodes if n.node_id == placed[0])  # part 0's actor's node
            # Removed once part 0's first batch is taken, with the part's other batches in its store.
            got = collect(loader, {0: lambda _: cluster.remove_node(lost, allow_graceful=False)})
            metrics, errors = loader.metrics(), loader.errors()
            survivors = set(loader.wait_ready(timeout=120))
        assert_same(got, want)
        assert errors == want_errors
        assert metrics["actors_died"] >= 1 and survivors == {n.node_id for n in nodes if n is not lost}
    finally:
        ray.shutdown()
        cluster.shutdown()
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, object_store_memory=300 * 1024 * 1024)


def test_ray_data_reads_the_local_loaders_batches(local_ray, dataset):
    manifest, victim = dataset
    want, want_errors = reference(manifest, OPTIONS)
    context = ray.data.DataContext.get_current()
    kept, context.execution_options.preserve_order = context.execution_options.preserve_order, True
    try:
        rows = list(mmfeed.ray.read(manifest, concurrency=2, num_cpus=0.5, part_groups=2, **OPTIONS).iter_rows())
    finally:
        context.execution_options.preserve_order = kept
    batches = [r for r in rows if r.get("sample_ids")]
    errors = [e for r in rows if r.get("errors") for e in json.loads(r["errors"])]
    assert len(batches) == len(want)
    for row, (b, state) in zip(batches, want):
        assert json.loads(row["sample_ids"]) == b["sample_ids"] and json.loads(row["state"]) == state
        for key in ("input_ids", "labels", "attention_mask", "pixel_values", "image_grid_thw"):
            np.testing.assert_array_equal(np.asarray(row[key]), b[key], err_msg=key)
    assert errors == want_errors and [e["sample_id"] for e in errors] == [victim["id"]] * 2
