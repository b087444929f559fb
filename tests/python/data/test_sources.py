"""Issue 49: sources as users name them. A glob (`train-*.parquet`, local and in S3), a hub
dataset's folder (`ov/data`, or its root beside README.md), `datasets.save_to_disk`'s folder of
Arrow files, and a glob of JSONL files give the batches of the same conversations as one JSONL
manifest; a glob over http(s), a folder of several layouts or splits, one of no layout, a
DatasetDict's folder and a glob matching nothing are refused by name."""

import shutil

import datagen
import pytest
from conftest import ROOT, assert_same_batches, run_loader

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = {"tensors": "np", "tokenizer": TOKENIZER, "max_pixels": 60_000, "batch_size": 4, "seed": 5}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """One data set as a JSONL manifest, a hub repository (hub/README.md, hub/data/train-0000X-of-
    00002.parquet), a save_to_disk folder of two Arrow files, and two JSONL files."""
    import datasets

    out = tmp_path_factory.mktemp("sources")
    datagen.generate(out / "jsonl", samples=13, seed=49, max_megapixels=0.3, workers=2)
    manifest = out / "jsonl" / "manifest.jsonl"
    written = datagen.write_parquet(manifest, out / "written", per_file=7)
    (out / "hub" / "data").mkdir(parents=True)
    (out / "hub" / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n")
    (out / "hub" / ".gitattributes").write_text("*.parquet filter=lfs\n")
    for i, path in enumerate(written):
        shutil.copy(path, out / "hub" / "data" / f"train-{i:05d}-of-{len(written):05d}.parquet")
    table = datasets.concatenate_datasets([datasets.Dataset.from_parquet(str(p)) for p in written])
    table.save_to_disk(str(out / "saved"), num_shards=2)
    lines = manifest.read_text().splitlines()
    (manifest.parent / "part-a.jsonl").write_text("\n".join(lines[:5]) + "\n")
    (manifest.parent / "part-b.jsonl").write_text("\n".join(lines[5:]) + "\n")
    return manifest, out


def load(source, **options):
    r = run_loader(source, **{**OPTIONS, **options})
    assert not r["errors"], r["errors"]
    return r["batches"]


def test_the_layouts_on_disk_are_what_users_have(data):
    _, out = data
    saved = sorted(p.name for p in (out / "saved").iterdir())
    assert saved == ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow", "dataset_info.json", "state.json"]
    assert (out / "saved" / "data-00000-of-00002.arrow").read_bytes()[:6] != b"ARROW1"  # the streaming format


@pytest.mark.parametrize(
    "source",
    [
        "hub/data/train-*.parquet",
        "hub/data/train-0000?-of-00002.parquet",
        "hub/*/train-*.parquet",
        "hub/data",
        "hub/data/",
        "hub",
        "saved",
        "jsonl/part-*.jsonl",
    ],
)
def test_globs_and_folders_give_the_batches_of_the_manifest(data, source):
    manifest, out = data
    want = load(manifest)
    assert_same_batches(load(f"{out}/{source}"), want)


def test_a_glob_of_jsonl_files_names_each_file_in_errors(data, tmp_path):
    manifest, _ = data
    shutil.copytree(manifest.parent, tmp_path / "d")
    part = tmp_path / "d" / "part-b.jsonl"
    lines = part.read_text().splitlines()
    lines[2] = '{"id": "broken", "messages": 3}'
    part.write_text("\n".join(lines) + "\n")
    r = run_loader(str(tmp_path / "d" / "part-*.jsonl"), **OPTIONS)
    (error,) = r["errors"]
    assert error["sample_id"] == "broken" and "part-b.jsonl:3" in error["reason"] + error.get("where", "")
    assert sum(len(b["sample_ids"]) for b in r["batches"]) >= 12


def test_a_glob_and_a_folder_in_s3(data, moto_s3, monkeypatch):
    manifest, out = data
    s3 = moto_s3.client()
    s3.create_bucket(Bucket="hub")
    for path in (out / "hub").rglob("*"):
        if path.is_file():
            s3.put_object(Bucket="hub", Key="ov/" + str(path.relative_to(out / "hub")), Body=path.read_bytes())
    for key, value in moto_s3.env().items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)
    want = load(manifest)
    assert_same_batches(load("s3://hub/ov/data/train-*.parquet"), want)
    assert_same_batches(load("s3://hub/ov/data/"), want)
    with pytest.raises(ValueError, match="matches no file"):
        load("s3://hub/ov/data/test-*.parquet")


def test_what_cannot_be_read_is_refused_by_name(data, tmp_path):
    manifest, out = data

    def refused(source, message):
        with pytest.raises(ValueError, match=message):
            load(source)

    refused(
        "https://example.com/data/train-*.parquet", r"a glob \('\*', '\?'\) needs a listing, which http\(s\) has not"
    )
    refused(str(out / "hub" / "data" / "validation-*.parquet"), "matches no file")
    mixed = tmp_path / "mixed"
    shutil.copytree(out / "hub" / "data", mixed)
    shutil.copy(manifest, mixed / "extra.jsonl")
    refused(str(mixed), r"names files of several layouts: JSONL/JSON \(.*extra.jsonl\), Parquet")
    splits = tmp_path / "splits"
    shutil.copytree(out / "hub" / "data", splits)
    shutil.copy(splits / "train-00000-of-00002.parquet", splits / "test-00000-of-00001.parquet")
    refused(str(splits), r"holds the files of several splits \(test, train\): name one split's")
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "images.zip").write_bytes(b"PK")
    refused(str(unknown), "is a folder of no layout mmfeed reads")
    import datasets

    saved = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"id": ["a"]})})
    saved.save_to_disk(str(tmp_path / "dict"))
    refused(str(tmp_path / "dict"), r"is a DatasetDict saved by save_to_disk: name one split's folder \(train\)")
