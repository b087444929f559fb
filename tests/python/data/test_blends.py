"""Issue 33: weighted blends. Each source gets its share of an epoch's draws, cycles through its own
shuffled epochs (no sample twice before every sample once), and the blend resumes and reshards
exactly like a single manifest; sources= and config files name the same blend."""

import collections
import json
import subprocess

import datagen
import numpy as np
import pytest
from conftest import ROOT, run_loader

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = {"tensors": "np", "tokenizer": TOKENIZER, "max_pixels": 60_000, "batch_size": 4, "seed": 3}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """One generated data set's samples split in two manifests beside its images: a (14), b (5)."""
    out = tmp_path_factory.mktemp("blend-data")
    datagen.generate(out, samples=19, seed=8, max_megapixels=0.3, workers=2)
    lines = (out / "manifest.jsonl").read_text().splitlines()
    (out / "a.jsonl").write_text("\n".join(lines[:14]) + "\n")
    (out / "b.jsonl").write_text("\n".join(lines[14:]) + "\n")
    ids = {name: [json.loads(l)["id"] for l in part] for name, part in (("a", lines[:14]), ("b", lines[14:]))}
    return out, ids


def run(manifests, state=None, **options):
    r = run_loader(manifests, state, **{**OPTIONS, **options})
    return r["batches"], r["errors"], r["metrics"]


def ids_of(batches):
    return [sid for b in batches for sid in b["sample_ids"]]


def test_each_source_gets_its_share_and_cycles_through_its_own_epochs(sources):
    out, ids = sources
    # 40 draws an epoch: a 0.3 * 40 = 12 (of 14), b 28 (5 samples, 5.6 passes an epoch); 2 epochs.
    batches, errors, metrics = run([out / "a.jsonl", out / "b.jsonl"], weights=[0.3, 0.7], blend_samples=40, epochs=2)
    assert not errors
    delivered = ids_of(batches)
    assert len(delivered) == 80
    for epoch in (0, 1):
        drawn = [sid for b in batches if b["epoch"] == epoch for sid in b["sample_ids"]]
        assert sum(sid in ids["a"] for sid in drawn) == 12 and sum(sid in ids["b"] for sid in drawn) == 28
    assert metrics["counters"]["loader.source0.samples"] == 24
    assert metrics["counters"]["loader.source1.samples"] == 56
    for name in ("a", "b"):
        mine = [sid for sid in delivered if sid in ids[name]]
        n = len(ids[name])
        for start in range(0, len(mine) - n + 1, n):  # each full pass over the source: every sample once
            assert sorted(mine[start : start + n]) == sorted(ids[name]), (name, start)
    # a's 24 draws over two epochs continue one pass into the next: 14 distinct, then 10 more.
    assert len(set(d for d in delivered if d in ids["a"])) == 14


def test_the_blend_is_a_function_of_the_seed(sources):
    out, _ = sources
    manifests = [out / "a.jsonl", out / "b.jsonl"]
    first, _, _ = run(manifests, weights=[1, 1])
    again, _, _ = run(manifests, weights=[1, 1])
    other, _, _ = run(manifests, weights=[1, 1], seed=4)
    assert ids_of(first) == ids_of(again)
    assert ids_of(first) != ids_of(other)
    # Default epoch: the sources' total (19 draws), half each: a 9 or 10 of its 14, b 10 or 9 of its 5.
    assert len(ids_of(first)) == 19
    assert collections.Counter(ids_of(first)).most_common(1)[0][1] == 2  # b upsampled: some twice


def test_a_blend_resumes_exactly(sources):
    out, _ = sources
    manifests = [out / "a.jsonl", out / "b.jsonl"]
    options = dict(weights=[0.4, 0.6], blend_samples=30, epochs=2)
    whole, _, _ = run(manifests, **options)
    with mmfeed.Loader(manifests, **OPTIONS, **options) as loader:
        head = [next(loader) for _ in range(5)]  # into the second epoch (8 batches an epoch)
        state = loader.state_dict()
    rest, _, _ = run(manifests, state=state, **options)
    got = head + rest
    assert len(got) == len(whole)
    for g, w in zip(got, whole):
        assert g["sample_ids"] == w["sample_ids"]
        for key, value in w.items():
            if isinstance(value, np.ndarray):
                assert g[key].tobytes() == value.tobytes(), key
    with pytest.raises(ValueError, match="weights was 0.40000000000000002,0.59999999999999998, now 0.5,0.5"):
        run(manifests, state=state, weights=[0.5, 0.5], blend_samples=30, epochs=2)


@pytest.mark.parametrize("old_world,new_world", [(2, 3), (3, 2)])
def test_a_blend_reshards_to_another_world_size(sources, old_world, new_world):
    out, _ = sources
    manifests = [out / "a.jsonl", out / "b.jsonl"]
    options = dict(OPTIONS, weights=[2, 1], blend_samples=36, batch_size=2, shard_remainder="keep")
    whole = ids_of(run(manifests, **{k: v for k, v in options.items() if k not in OPTIONS})[0])
    delivered, states = [], []
    for rank in range(old_world):
        with mmfeed.Loader(manifests, rank=rank, world_size=old_world, **options) as loader:
            delivered += next(loader)["sample_ids"]
            states.append(loader.state_dict())
    for rank in range(new_world):
        loader = mmfeed.Loader(manifests, rank=rank, world_size=new_world, **options)
        loader.load_state_dict(mmfeed.Loader.reshard_states(states, rank, new_world))
        with loader:
            delivered += ids_of(loader)
    assert collections.Counter(delivered) == collections.Counter(whole)  # the epoch's draws, each once


def test_sources_name_the_same_blend_as_weights(sources):
    out, _ = sources
    by_weights, _, _ = run([out / "a.jsonl", out / "b.jsonl"], weights=[0.25, 0.75], media_root=[out, out])
    by_sources, _, _ = run(
        None,
        sources=[
            {"manifest": out / "a.jsonl", "weight": 0.25, "media_root": out},
            {"manifest": out / "b.jsonl", "weight": 0.75, "media_root": out},
        ],
    )
    assert ids_of(by_sources) == ids_of(by_weights)
    unweighted, _, _ = run(None, sources=[out / "a.jsonl", {"manifest": out / "b.jsonl"}])
    assert sorted(ids_of(unweighted)) == sorted(ids_of(run([out / "a.jsonl", out / "b.jsonl"])[0]))


def test_config_files_take_sources(cli, sources, tmp_path):
    out, _ = sources
    flags = ["--tokenizer", TOKENIZER, "--batch-size", 4, "--max-pixels", 60000, "--seed", 3, "--json"]
    want = json.loads(
        subprocess.run(
            [
                cli,
                "run",
                out / "a.jsonl",
                out / "b.jsonl",
                "--weights",
                "0.3",
                "--weights",
                "0.7",
                "--blend-samples",
                "25",
                *map(str, flags),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert want["samples"] == 25
    config = tmp_path / "blend.json"
    config.write_text(
        json.dumps(
            {
                "blend_samples": 25,
                "sources": [
                    {"manifest": str(out / "a.jsonl"), "weight": 0.3},
                    {"manifest": str(out / "b.jsonl"), "weight": 0.7},
                ],
            }
        )
    )
    toml = tmp_path / "blend.toml"
    toml.write_text(
        f'blend_samples = 25\n[[sources]]\nmanifest = "{out / "a.jsonl"}"\nweight = 0.3\n'
        f'[[sources]]\nmanifest = "{out / "b.jsonl"}"\nweight = 0.7\n'
    )
    for path in (config, toml):
        got = json.loads(
            subprocess.run(
                [cli, "run", "--config", path, *map(str, flags)], capture_output=True, text=True, check=True
            ).stdout
        )
        for key in ("batches", "samples", "tokens", "images"):
            assert got[key] == want[key], (path.name, key)
        # Python reads the same file with the same reader, and loads the same run.
        options = mmfeed.read_config(path)
        assert options == {
            "manifests": [str(out / "a.jsonl"), str(out / "b.jsonl")],
            "weights": [0.3, 0.7],
            "blend_samples": 25,
        }
        batches, _, _ = run(options.pop("manifests"), **options)
        assert (len(batches), len(ids_of(batches))) == (want["batches"], want["samples"]), path.name
    config.write_text(json.dumps({"sources": [{"manifest": "a.jsonl", "weight": 1}, {"manifest": "b.jsonl"}]}))
    bad = subprocess.run([cli, "run", "--config", config, *map(str, flags)], capture_output=True, text=True)
    assert bad.returncode != 0 and "sources[1]: has no weight while others have one" in bad.stderr, bad.stderr
    config.write_text(json.dumps({"sources": [{"manifest": "a.jsonl", "share": 1}]}))
    bad = subprocess.run([cli, "run", "--config", config, *map(str, flags)], capture_output=True, text=True)
    assert "unknown key 'share'" in bad.stderr, bad.stderr
    with pytest.raises(ValueError, match="unknown key 'share'"):
        mmfeed.read_config(config)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"weights": [1]}, "weights: names 1 values for 2 manifests"),
        ({"weights": [1, -1]}, "weights: must be finite and >= 0"),
        ({"weights": [0, 0]}, "weights: are all 0"),
        ({"blend_samples": 10}, "blend_samples: sizes a blend's epoch: give weights"),
        ({"weights": [1, 1], "source_repeats": [1, 1]}, "source_repeats: and weights both blend"),
    ],
)
def test_bad_blends_are_refused_by_name(sources, options, message):
    out, _ = sources
    with pytest.raises(ValueError, match=message):
        run([out / "a.jsonl", out / "b.jsonl"], **options)


def test_sources_refuse_unknown_keys_and_half_weights(sources):
    out, _ = sources
    with pytest.raises(
        ValueError, match=r"sources\[0\] takes the keys manifest, weight, media_root, max_pixels, chat_template .*share"
    ):
        mmfeed.Loader(sources=[{"manifest": out / "a.jsonl", "share": 2}], **OPTIONS)
    with pytest.raises(ValueError, match=r"sources\[1\] has no weight while others have one"):
        mmfeed.Loader(sources=[{"manifest": out / "a.jsonl", "weight": 2}, out / "b.jsonl"], **OPTIONS)


def test_each_source_keeps_its_own_max_pixels_and_chat_template(sources):
    out, _ = sources
    a, b = out / "a.jsonl", out / "b.jsonl"
    one = dict(OPTIONS, batch_size=1, shuffle=False)
    own = {"source_max_pixels": [0, 20_000], "source_chat_template": ["", "qwen3-vl"]}
    mixed, errors, _ = run([a, b], **{**one, **own})
    assert not errors
    alone = run(a, **one)[0] + run(b, **{**one, "max_pixels": 20_000, "chat_template": "qwen3-vl"})[0]
    assert len(mixed) == len(alone) == 19
    for got, want in zip(mixed, alone):
        assert got["sample_ids"] == want["sample_ids"]
        for key in ("input_ids", "labels", "pixel_values", "image_grid_thw"):
            assert got[key].tobytes() == want[key].tobytes(), (got["sample_ids"], key)
    # The same through sources=, and a wrong count refused by name.
    by_sources, _, _ = run(
        None, sources=[{"manifest": a}, {"manifest": b, "max_pixels": 20_000, "chat_template": "qwen3-vl"}], **one
    )
    assert [g["input_ids"].tobytes() for g in by_sources] == [g["input_ids"].tobytes() for g in mixed]
    with pytest.raises(ValueError, match="source_max_pixels: names 1 values for 2 manifests"):
        run([a, b], source_max_pixels=[100])
    with pytest.raises(ValueError, match="source_chat_template"):
        run([a, b], source_chat_template=["", "no-such-template"])


def test_repeats_blend_by_each_sources_size(sources):
    out, ids = sources
    # a (14 samples) half, b (5) twice: 7 + 10 draws an epoch, b's samples each twice.
    batches, errors, metrics = run([out / "a.jsonl", out / "b.jsonl"], source_repeats=[0.5, 2])
    assert not errors
    drawn = collections.Counter(ids_of(batches))
    assert sum(n for sid, n in drawn.items() if sid in ids["a"]) == 7
    assert all(drawn[sid] == 2 for sid in ids["b"])
    assert metrics["counters"]["loader.source1.samples"] == 10
