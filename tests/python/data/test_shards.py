"""Issue 33: WebDataset tar shards. Shards written by webdataset's own TarWriter (a third of the
samples in LLaMA-Factory's tagged shape) load into batches byte-identical to the same samples as a
JSONL manifest beside their images: padded and packed, over 3 ranks, resumed mid-epoch and with
another world size, from local files, S3 (moto) and HTTP (nginx); damaged shards cost only the
samples they touch, each named."""

import json
import shutil

import datagen
import pytest
from conftest import ROOT, assert_same_batches, run_loader, run_ranks

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = {"tensors": "np", "tokenizer": TOKENIZER, "max_pixels": 60_000, "batch_size": 4, "seed": 3}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("shard-data")
    datagen.generate(out / "jsonl", samples=22, seed=6, max_megapixels=0.4, workers=2, videos=2)
    manifest = out / "jsonl" / "manifest.jsonl"
    # The images' samples and the videos' in one manifest, then in shards of 5.
    lines = manifest.read_text().splitlines() + (out / "jsonl" / "videos.jsonl").read_text().splitlines()
    manifest.write_text("\n".join(lines) + "\n")
    datagen.write_shards(manifest, out / "wds", per_shard=5, tagged_every=3)
    return manifest, out / "wds"


def pattern(shards):
    return str(shards / "shard-{000..004}.tar")


def load(source, state=None, **options):
    r = run_loader(source, state, **{**OPTIONS, **options})
    return r["batches"], r["errors"], r["state"]


def upload_shards(moto_s3, monkeypatch, folder, bucket, prefix=""):
    """The folder's shards into a new bucket of the moto S3 server, which this test's Loaders then use."""
    s3 = moto_s3.client()
    s3.create_bucket(Bucket=bucket)
    for path in folder.glob("*.tar"):
        s3.put_object(Bucket=bucket, Key=prefix + path.name, Body=path.read_bytes())
    for key, value in moto_s3.env().items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)


def test_webdataset_reads_the_sample_set_the_loader_reads(dataset):
    import webdataset

    manifest, shards = dataset
    keys = [s["__key__"] for s in webdataset.WebDataset(pattern(shards), shardshuffle=False)]
    assert len(keys) == len(manifest.read_text().splitlines()) == 24
    batches, errors, _ = load(pattern(shards), shuffle=False, batch_size=24)
    assert not errors
    assert batches[0]["sample_ids"] == [json.loads(l)["id"] for l in manifest.read_text().splitlines()]


@pytest.mark.parametrize("packing", [{}, {"token_budget": 4000, "pack_window": 8}], ids=["padded", "packed"])
def test_shards_give_the_batches_of_their_manifest(dataset, packing):
    manifest, shards = dataset
    want, errors, _ = load(manifest, **packing)
    assert not errors
    got, errors, _ = load(pattern(shards), **packing)
    assert not errors
    assert_same_batches(got, want)
    assert_same_batches(load(pattern(shards), mode="serial", **packing)[0], want)


def test_shards_shard_resume_and_reshard_as_a_manifest_does(dataset):
    manifest, shards = dataset
    for rank in range(3):
        assert_same_batches(
            load(pattern(shards), rank=rank, world_size=3)[0], load(manifest, rank=rank, world_size=3)[0]
        )
    whole, _, _ = load(pattern(shards), epochs=2)
    with mmfeed.Loader(pattern(shards), epochs=2, **OPTIONS) as loader:
        head = [next(loader) for _ in range(4)]
        state = loader.state_dict()
    assert_same_batches(head + load(pattern(shards), state=state, epochs=2)[0], whole)
    # Two ranks stop after a batch each; three ranks take the rest: the epoch, each sample once.
    options = dict(OPTIONS, batch_size=2, shard_remainder="keep")
    delivered, states = [], []
    for rank in range(2):
        with mmfeed.Loader(pattern(shards), rank=rank, world_size=2, **options) as loader:
            delivered += next(loader)["sample_ids"]
            states.append(loader.state_dict())
    for rank in range(3):
        loader = mmfeed.Loader(pattern(shards), rank=rank, world_size=3, **options)
        loader.load_state_dict(mmfeed.Loader.reshard_states(states, rank, 3))
        with loader:
            delivered += [i for b in loader for i in b["sample_ids"]]
    assert sorted(delivered) == sorted(json.loads(l)["id"] for l in manifest.read_text().splitlines())


def test_shards_in_s3_and_over_http(dataset, moto_s3, nginx, monkeypatch, tmp_path):
    from servers import Nginx

    manifest, shards = dataset
    want, _, _ = load(pattern(shards))
    upload_shards(moto_s3, monkeypatch, shards, "wds", "train/")
    got, errors, _ = load("s3://wds/train/shard-{000..004}.tar")
    assert not errors
    assert_same_batches(got, want)
    # A sample's media, adjacent in its shard, come in one GET: one per sample, not one per medium.
    media = sum(
        len(
            [
                i
                for m in s["messages"]
                if isinstance(m["content"], list)
                for i in m["content"]
                if i.get("type") in ("image", "video")
            ]
        )
        for s in map(json.loads, manifest.read_text().splitlines())
    )
    with mmfeed.Loader("s3://wds/train/shard-{000..004}.tar", **OPTIONS) as loader:
        again = list(loader)
        fetched = loader.metrics()["counters"]["fetch.objects_ok"]  # (requests would count hedges and retries)
    assert fetched == 24 < media, (fetched, media)
    assert_same_batches(again, want)
    server = Nginx(shards, tmp_path / "nginx").start()
    try:
        got, errors, _ = load(server.url("ok", "shard-{000..004}.tar"))
    finally:
        server.stop()
    assert not errors
    assert_same_batches(got, want)


def end_of_members(path):
    """The offset where the last member's padded data ends (the end-of-archive blocks start)."""
    import tarfile

    with tarfile.open(path) as tar:
        last = tar.getmembers()[-1]
    return last.offset_data + (last.size + 511) // 512 * 512


def test_a_shard_without_end_blocks_is_read_whole_locally_and_remotely(dataset, moto_s3, monkeypatch, tmp_path):
    _, shards = dataset
    copy = tmp_path / "bare"
    shutil.copytree(shards, copy)
    for path in copy.glob("*.tar"):
        path.write_bytes(path.read_bytes()[: end_of_members(path)])
    want, _, _ = load(pattern(shards))
    got, errors, _ = load(pattern(copy))
    assert not errors
    assert_same_batches(got, want)
    upload_shards(moto_s3, monkeypatch, copy, "bare")
    got, errors, _ = load("s3://bare/shard-{000..004}.tar")
    assert not errors
    assert_same_batches(got, want)


def test_damaged_shards_cost_only_the_samples_they_touch(dataset, tmp_path):
    import tarfile

    manifest, shards = dataset
    ids = [json.loads(l)["id"] for l in manifest.read_text().splitlines()]
    copy = tmp_path / "damaged"
    shutil.copytree(shards, copy)
    # shard-001: cut in the middle of its last image member (samples 5-9; the cut one is 9).
    with tarfile.open(shards / "shard-001.tar") as tar:
        image = [m for m in tar.getmembers() if not m.name.endswith(".json")][-1]
    cut_key = image.name.split(".")[0]
    cut = copy / "shard-001.tar"
    cut.write_bytes(cut.read_bytes()[: image.offset_data + image.size // 2])
    # shard-003 (samples 15-19): the header of its third sample's first member corrupted.
    with tarfile.open(shards / "shard-003.tar") as tar:
        members = tar.getmembers()
    firsts = [m for i, m in enumerate(members) if i == 0 or m.name.split(".")[0] != members[i - 1].name.split(".")[0]]
    victim = firsts[2]
    data = bytearray((copy / "shard-003.tar").read_bytes())
    data[victim.offset + 10] ^= 0xFF
    (copy / "shard-003.tar").write_bytes(bytes(data))
    batches, errors, _ = load(pattern(copy), on_error="skip", max_error_fraction=1.0)
    reasons = {e["sample_id"]: e["reason"] for e in errors}
    assert len(errors) == 2, reasons
    failed_cut = next(k for k in reasons if k.endswith(f"shard-001.tar[{cut_key}]"))  # no .json read: named by place
    assert "the shard ends before byte" in reasons[failed_cut], reasons
    lost = next(k for k in reasons if k.endswith(f"shard-003.tar[from byte {victim.offset}]"))
    assert "not a tar header (its checksum does not match)" in reasons[lost]
    assert f"unreadable from byte {victim.offset} on" in reasons[lost]
    # Every other sample arrives: shard-003's first two, and every sample of the other shards.
    delivered = [i for b in batches for i in b["sample_ids"]]
    assert sorted(delivered) == sorted(set(ids) - {cut_key} - set(ids[17:20]))


def test_a_reference_to_a_missing_member_names_what_the_sample_has(dataset, tmp_path):
    import webdataset

    manifest, _ = dataset
    sample = json.loads(manifest.read_text().splitlines()[0])
    key, members = datagen.shard_form(sample, manifest.parent)
    conversation = json.loads(members["json"])
    conversation["messages"][0]["content"][0]["image"] = "7.jpg"
    members["json"] = json.dumps(conversation).encode()
    good = datagen.shard_form(json.loads(manifest.read_text().splitlines()[1]), manifest.parent)
    with webdataset.TarWriter(str(tmp_path / "one.tar")) as writer:
        writer.write({"__key__": key, **members})
        writer.write({"__key__": good[0], **good[1]})
    batches, errors, _ = load(tmp_path / "one.tar", on_error="skip", max_error_fraction=1.0)
    assert [i for b in batches for i in b["sample_ids"]] == [good[0]]
    assert len(errors) == 1
    assert f"names 7.jpg, but sample {key} of" in errors[0]["reason"]
    assert "its members: 0." in errors[0]["reason"]
    # A member larger than max_object_bytes is refused before it is fetched.
    with pytest.raises(
        ValueError, match=r"one.tar\[demo-000001\.0\.\w+\]: member of \d+ bytes exceeds max_object_bytes"
    ):
        load(tmp_path / "one.tar", on_error="skip", max_error_fraction=1.0, max_object_bytes=100)


def test_a_bad_pattern_is_refused_by_name(dataset):
    _, shards = dataset
    with pytest.raises(ValueError, match=r"a '\{' not closed"):
        load(str(shards / "shard-{000..004.tar"))
    with pytest.raises(ValueError, match="shard-005.tar: cannot open: No such file"):
        load(str(shards / "shard-{000..009}.tar"))


def energon_prepare(root, *split_parts):
    """Runs Megatron-Energon's own `energon prepare` (installed beside .venv in .oracles/energon)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(ROOT / ".oracles" / "energon"))
    args = [
        sys.executable,
        "-m",
        "megatron.energon.cli.main",
        "prepare",
        str(root),
        "--non-interactive",
        "--skip-dataset-yaml",
        "--num-workers",
        "1",
    ]
    for part in split_parts:
        args += ["--split-parts", part]
    run = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert (root / ".nv-meta" / "split.yaml").is_file()


def test_an_energon_prepared_dataset_loads_by_its_directory(dataset, tmp_path):
    manifest, shards = dataset
    root = tmp_path / "energon"
    shutil.copytree(shards, root)
    energon_prepare(root, "train:shard-{000..003}.tar", "val:shard-004.tar")
    ids = [json.loads(l)["id"] for l in manifest.read_text().splitlines()]
    # Opened from the .tar.idx energon prepare wrote beside each shard (each sample's headers read by
    # its range as it is prepared), the train split, shards 0-3: the same batches as those shards
    # named by a pattern, scanned whole.
    assert all((root / f"shard-{i:03d}.tar.idx").is_file() for i in range(4))
    got, errors, _ = load(root)
    assert not errors
    assert_same_batches(got, load(str(shards / "shard-{000..003}.tar"))[0])
    assert sorted(i for b in got for i in b["sample_ids"]) == sorted(ids[:20])
    # Excluded samples ("shard.tar/key") are left out, as Energon leaves them out (known by their
    # keys: these shards are scanned).
    split = root / ".nv-meta" / "split.yaml"
    split.write_text(split.read_text().replace("exclude: []", f"exclude:\n- shard-001.tar/{ids[6]}\n- shard-002.tar"))
    got, errors, _ = load(root)
    assert not errors
    assert sorted(i for b in got for i in b["sample_ids"]) == sorted(set(ids[:10] + ids[15:20]) - {ids[6]})


def test_mmfeed_index_writes_energons_tar_idx_and_a_pattern_opens_from_it(dataset, cli, tmp_path):
    import os
    import subprocess

    import webdataset

    manifest, shards = dataset
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    shutil.copytree(shards, ours)
    # One more shard whose second sample's names outgrow a ustar header (a PAX header before each
    # of its members: the sample starts at the first of those).
    first, second = (datagen.shard_form(json.loads(l), manifest.parent) for l in manifest.read_text().splitlines()[:2])
    long_key = "d/" + "k" * 120
    with webdataset.TarWriter(str(ours / "shard-005.tar")) as writer:
        writer.write({"__key__": first[0] + "-x", **first[1]})
        writer.write({"__key__": long_key, **second[1]})
    shutil.copytree(ours, theirs)
    energon_prepare(theirs, "train:shard-{000..005}.tar")

    def index(*args):
        proc = subprocess.run(
            [str(cli), "index", "--json", *map(str, args)], capture_output=True, text=True, timeout=120
        )
        return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr

    source = str(ours / "shard-{000..005}.tar")
    rc, (summary,), err = index(source)
    assert rc == 0, err
    assert (summary["samples"], summary["shards_indexed"], summary["shards_kept"]) == (26, 6, 0)
    # Byte for byte what energon prepare writes.
    for i in range(6):
        assert (ours / f"shard-{i:03d}.tar.idx").read_bytes() == (theirs / f"shard-{i:03d}.tar.idx").read_bytes(), i
    assert summary["index_bytes"] == sum(p.stat().st_size for p in ours.glob("*.tar.idx"))
    # The pattern opens from them: the batches of the same shards scanned.
    scanned = tmp_path / "scanned"
    shutil.copytree(ours, scanned, ignore=shutil.ignore_patterns("*.idx"))
    got, errors, _ = load(source, batch_size=26, shuffle=False)
    assert not errors
    assert_same_batches(got, load(str(scanned / "shard-{000..005}.tar"), batch_size=26, shuffle=False)[0])
    assert len(got[0]["sample_ids"]) == 26  # the long-named sample among them
    # Interrupted (an index missing) or stale (its shard written since, which a Loader refuses by
    # name), a second run writes only those and keeps the rest.
    (ours / "shard-002.tar.idx").unlink()
    later = (ours / "shard-004.tar.idx").stat().st_mtime_ns + 10**9
    os.utime(ours / "shard-004.tar", ns=(later, later))
    with pytest.raises(ValueError, match=r"shard-004\.tar\.idx: stale: its shard was written after it"):
        load(source)
    rc, (summary,), err = index(source)
    assert rc == 0, err
    assert (summary["samples"], summary["shards_indexed"], summary["shards_kept"]) == (26, 2, 4)
    for i in range(6):
        assert (ours / f"shard-{i:03d}.tar.idx").read_bytes() == (theirs / f"shard-{i:03d}.tar.idx").read_bytes(), i
    # A damaged shard gets no index, named, exit status 1; the others are written.
    cut = scanned / "shard-001.tar"
    cut.write_bytes(cut.read_bytes()[: end_of_members(cut) - 700])
    rc, (summary,), err = index(scanned / "shard-{000..002}.tar")
    assert rc == 1
    assert (summary["shards_indexed"], summary["shards_damaged"]) == (2, 1)
    assert any("shard-001.tar: the shard ends before byte" in b for b in summary["bad"]), summary["bad"]
    assert sorted(p.name for p in scanned.glob("*.idx")) == ["shard-000.tar.idx", "shard-002.tar.idx"]
    # Into a node cache: refused by name (a Loader looks for a shard's .tar.idx beside it).
    rc, _, err = index("--cache-dir", tmp_path / "x", source)
    assert rc == 1 and "no --cache-dir" in err


def test_remote_shards_open_from_the_tar_idx_beside_them(dataset, cli, moto_s3, monkeypatch, tmp_path):
    """Shards in S3 with a .tar.idx beside each (mmfeed index's, uploaded; an Energon dataset's
    own) open from those: each rank reads its samples' headers by ranged GETs, not the shards,
    and the batches are those of the same shards scanned; a .tar.idx that does not match its shard
    fails the samples it misplaces, each named."""
    import subprocess

    manifest, shards = dataset
    local = tmp_path / "wds"
    shutil.copytree(shards, local)
    run = subprocess.run([str(cli), "index", pattern(local)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    upload_shards(moto_s3, monkeypatch, local, "remote-idx")
    s3 = moto_s3.client()
    for idx in local.glob("*.tar.idx"):
        s3.put_object(Bucket="remote-idx", Key=idx.name, Body=idx.read_bytes())
    source = "s3://remote-idx/shard-{000..004}.tar"
    # mmfeed index of the remote shards writes the same .tar.idx files into --out DIR.
    run = subprocess.run(
        [str(cli), "index", "--out", tmp_path / "written", source], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in (tmp_path / "written").iterdir()) == sorted(p.name for p in local.glob("*.idx"))
    for idx in local.glob("*.tar.idx"):
        assert (tmp_path / "written" / idx.name).read_bytes() == idx.read_bytes()
    for options in ({}, {"token_budget": 4000, "pack_window": 8}, {"rank": 1, "world_size": 3, "batch_size": 2}):
        want = run_loader(pattern(shards), **{**OPTIONS, **options})
        got = run_loader(source, **{**OPTIONS, **options})
        assert not got["errors"]
        assert_same_batches(got["batches"], want["batches"])
    # Rank 1 of 3 read headers and .json by ranges: a small part of the shards, never all of them.
    gauges = got["metrics"]["gauges"]
    shard_bytes = sum(p.stat().st_size for p in local.glob("*.tar"))
    assert 0 < gauges["manifest.text_bytes"]["value"] < shard_bytes / 4, gauges
    # Resumed mid-epoch as from local shards.
    first = run_loader(source, **{**OPTIONS, "batch_size": 2})
    mid = mmfeed.Loader(source, **{**OPTIONS, "batch_size": 2})
    with mid:
        it = iter(mid)
        next(it), next(it)
        state = mid.state_dict()
    rest = run_loader(source, state, **{**OPTIONS, "batch_size": 2})
    assert_same_batches(rest["batches"], first["batches"][2:])
    # An Energon dataset in S3, by its prefix: its own .tar.idx read, its train split loaded.
    root = tmp_path / "energon"
    shutil.copytree(shards, root)
    energon_prepare(root, "train:shard-{000..003}.tar", "val:shard-004.tar")
    for path in root.rglob("*"):
        if path.is_file():
            s3.put_object(Bucket="remote-idx", Key=f"energon/{path.relative_to(root)}", Body=path.read_bytes())
    got = run_loader("s3://remote-idx/energon/", **OPTIONS)
    assert not got["errors"]
    assert_same_batches(got["batches"], load(root)[0])
    # shard-000's .tar.idx replaced by shard-001's: the samples it misplaces fail, named; the rest arrive.
    s3.put_object(Bucket="remote-idx", Key="shard-000.tar.idx", Body=(local / "shard-001.tar.idx").read_bytes())
    batches, errors, _ = load(source, on_error="skip", max_error_fraction=1.0)
    assert errors and all("shard-000.tar[#" in e["sample_id"] for e in errors), errors
    delivered = [i for b in batches for i in b["sample_ids"]]
    ids = [json.loads(l)["id"] for l in manifest.read_text().splitlines()]
    assert set(ids[5:]) <= set(delivered)


def test_a_node_cache_reads_local_shards_once_for_its_ranks(dataset, tmp_path):
    """Three rank processes of one node open the same shards (no .tar.idx beside them) with one
    cache_dir: one scans them and writes their .tar.idx into the cache, all open from those, each
    rank's samples the ones it takes scanning; a shard rewritten since has its .tar.idx written again."""
    import os

    _, shards = dataset
    local, cache = tmp_path / "wds", tmp_path / "cache"
    shutil.copytree(shards, local)
    results = run_ranks(
        pattern(local), cache, 3, tokenizer=str(OPTIONS["tokenizer"]), max_pixels=60_000, batch_size=2, seed=3
    )
    assert sum(r["built"] for r in results) == 1
    assert len(list(cache.glob("*.tar.idx"))) == 5 and not list(local.glob("*.idx"))
    for rank, r in enumerate(results):
        scanned, errors, _ = load(pattern(shards), batch_size=2, rank=rank, world_size=3)
        assert not errors and r["ids"] == [i for b in scanned for i in b["sample_ids"]]
    got = run_loader(pattern(local), **{**OPTIONS, "cache_dir": cache})
    assert got["metrics"]["counters"]["loader.indexes_built"] == 0
    assert_same_batches(got["batches"], load(pattern(shards))[0])
    later = max(p.stat().st_mtime_ns for p in cache.glob("*.tar.idx")) + 10**9
    os.utime(local / "shard-002.tar", ns=(later, later))
    got = run_loader(pattern(local), **{**OPTIONS, "cache_dir": cache})
    assert got["metrics"]["counters"]["loader.indexes_built"] == 1
    assert_same_batches(got["batches"], load(pattern(shards))[0])
