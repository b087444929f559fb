"""Issue 51: a wids dataset descriptor ("wids-shard-index-v1": its shards and their sample counts,
as webdataset's indexed reader takes them) is a source: its shards read as the brace pattern of
them is (the same batches, rank 1 of 3 too), relative URLs against its folder or its "base",
each shard's count checked against its `nsamples` (counted here by webdataset's own reader);
`mmfeed index DESCRIPTOR` writes the shards' .tar.idx, from which it then opens; a descriptor of
another version, or naming another descriptor, is refused by name."""

import json
import shutil
import subprocess

import datagen
import pytest
import webdataset
from conftest import ROOT, assert_same_batches, run_loader

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = {"tensors": "np", "tokenizer": TOKENIZER, "max_pixels": 60_000, "batch_size": 4, "seed": 3}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("wids-data")
    datagen.generate(out / "jsonl", samples=14, seed=4, max_megapixels=0.3, workers=2)
    datagen.write_shards(out / "jsonl" / "manifest.jsonl", out / "wds", per_shard=5)
    return out / "wds"


@pytest.fixture
def shards(written, tmp_path):
    shutil.copytree(written, tmp_path / "wds")
    return tmp_path / "wds"


def counted(shard):
    """The samples in `shard` as webdataset's own reader groups them."""
    return sum(1 for _ in webdataset.WebDataset(str(shard), shardshuffle=False))


def descriptor(shards, urls=None, **extra):
    paths = sorted(shards.glob("*.tar"))
    return {
        "__kind__": "wids-shard-index-v1",
        "wids_version": 1,
        "shardlist": [{"url": url, "nsamples": counted(p)} for url, p in zip(urls or [p.name for p in paths], paths)],
        **extra,
    }


def load(source, **options):
    r = run_loader(str(source), **{**OPTIONS, **options})
    assert not r["errors"], r["errors"]
    return r["batches"]


def test_a_wids_descriptor_reads_its_shards_as_their_pattern(shards, tmp_path):
    pattern = shards / "shard-{000..002}.tar"
    (shards / "train.json").write_text(json.dumps(descriptor(shards), indent=2))
    assert_same_batches(load(shards / "train.json"), load(pattern))
    assert_same_batches(load(shards / "train.json", rank=1, world_size=3), load(pattern, rank=1, world_size=3))
    # Elsewhere, its URLs under a "base"; a component's own shardlist after the top one's.
    elsewhere = tmp_path / "descriptors" / "split.json"
    elsewhere.parent.mkdir()
    whole = descriptor(shards, base=str(shards))
    top, rest = whole["shardlist"][:1], whole["shardlist"][1:]
    elsewhere.write_text(json.dumps({**whole, "shardlist": top, "datasets": [{"shardlist": rest}]}))
    assert_same_batches(load(elsewhere), load(pattern))


def test_a_count_that_disagrees_names_the_shard(shards):
    wrong = descriptor(shards)
    wrong["shardlist"][1]["nsamples"] += 1
    (shards / "train.json").write_text(json.dumps(wrong))
    with pytest.raises(Exception, match=r"shard-001\.tar holds 5 samples, the descriptor says 6") as e:
        load(shards / "train.json")
    assert "train.json" in str(e.value)


def test_mmfeed_index_of_a_descriptor_writes_its_shards_tar_idx(cli, shards):
    (shards / "train.json").write_text(json.dumps(descriptor(shards)))
    scanned = load(shards / "train.json")
    proc = subprocess.run(
        [str(cli), "index", "--json", str(shards / "train.json")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["shards_indexed"] == 3 and summary["samples"] == 14
    assert sorted(p.name for p in shards.glob("*.tar.idx")) == [f"shard-00{i}.tar.idx" for i in range(3)]
    assert_same_batches(load(shards / "train.json"), scanned)


@pytest.mark.parametrize(
    "change, why",
    [
        ({"wids_version": 2}, "another wids_version"),
        ({"datasets": [{"source_url": "other.json"}]}, "source_url"),
        ({"shardlist": [{"url": "shard-000.tar"}]}, "has no url or nsamples"),
        ({"shardlist": [{"url": "a.parquet", "nsamples": 3}]}, "is no .tar"),
    ],
)
def test_a_descriptor_mmfeed_cannot_follow_is_refused_by_name(shards, change, why):
    (shards / "bad.json").write_text(json.dumps({**descriptor(shards), **change}))
    with pytest.raises(Exception, match=why) as e:
        load(shards / "bad.json")
    assert "bad.json" in str(e.value)
