"""Issue 51: Parquet files opened from their index (`mmfeed index data-*.parquet` writes FILE.mmidx
beside each: the rows' text and each image's own byte range, found once in its page). The batches
are byte-identical to the files read whole (padded, packed, rank 1 of 3, resumed from a state
saved without the index); nothing of the files is read at open, and a local index's text stays in
it; over HTTP each image is fetched alone, not its page, and a set whose first file has no index is
read whole without looking for the others'; a stale, tampered or truncated index is refused by name; a file whose images
lie in compressed pages is named and gets none."""

import json
import shutil
import subprocess

import datagen
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, assert_same_batches, run_loader

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = {"tensors": "np", "tokenizer": TOKENIZER, "max_pixels": 60_000, "batch_size": 4, "seed": 3}
SOURCE = "train-{00000..00002}.parquet"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The same 24 samples as Parquet files written by Hugging Face datasets (images uncompressed,
    PLAIN) and by pyarrow's defaults (snappy, dictionary pages); and the media root of the videos
    (paths, not embedded)."""
    out = tmp_path_factory.mktemp("parquet-index")
    datagen.generate(out / "jsonl", samples=22, seed=6, max_megapixels=0.4, workers=2, videos=2)
    manifest = out / "jsonl" / "manifest.jsonl"
    lines = manifest.read_text().splitlines() + (out / "jsonl" / "videos.jsonl").read_text().splitlines()
    manifest.write_text("\n".join(lines) + "\n")
    datagen.write_parquet(manifest, out / "hf", per_file=10)
    datagen.write_parquet(manifest, out / "pa", per_file=10, writer="pyarrow")
    return out, {"media_root": str(manifest.parent)}


@pytest.fixture
def hf(written, tmp_path):
    """A copy of the datasets-written files, free to index and alter."""
    out, root = written
    shutil.copytree(out / "hf", tmp_path / "hf")
    return tmp_path / "hf", root


def index(cli, *args):
    proc = subprocess.run([str(cli), "index", "--json", *map(str, args)], capture_output=True, text=True, timeout=120)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def load(source, state=None, **options):
    r = run_loader(str(source), state, **{**OPTIONS, **options})
    return r["batches"], r["errors"], r["state"]


def test_indexed_parquet_gives_the_batches_of_the_files_read_whole(cli, hf):
    folder, root = hf
    whole = {
        "padded": load(folder / SOURCE, **root)[0],
        "packed": load(folder / SOURCE, token_budget=4000, pack_window=8, **root)[0],
        "rank 1 of 3": load(folder / SOURCE, rank=1, world_size=3, **root)[0],
    }
    with mmfeed.Loader(str(folder / SOURCE), epochs=2, **{**OPTIONS, **root}) as loader:
        head = [next(loader) for _ in range(4)]
        state = loader.state_dict()  # saved without the index
    rc, [summary], err = index(cli, folder / SOURCE)
    assert rc == 0, err
    assert summary["shards_indexed"] == 3 and summary["samples"] == 24 and summary["images"] > 0
    assert summary["media_unreadable"] == 0 and not summary["bad"]
    assert sorted(p.name for p in folder.glob("*.mmidx")) == [f"train-0000{i}.parquet.mmidx" for i in range(3)]
    assert summary["index_bytes"] == sum(p.stat().st_size for p in folder.glob("*.mmidx"))
    assert_same_batches(load(folder / SOURCE, **root)[0], whole["padded"])
    assert_same_batches(load(folder / SOURCE, token_budget=4000, pack_window=8, **root)[0], whole["packed"])
    assert_same_batches(load(folder / SOURCE, rank=1, world_size=3, **root)[0], whole["rank 1 of 3"])
    assert_same_batches(load(folder / SOURCE, mode="serial", **root)[0], whole["padded"])
    # The fingerprint is the files' own: a state saved without the index resumes with it.
    both = load(folder / SOURCE, epochs=2, **root)[0]
    assert_same_batches(head + load(folder / SOURCE, state=state, epochs=2, **root)[0], both)
    # Run again, the current indexes are kept.
    rc, [again], _ = index(cli, folder / SOURCE)
    assert rc == 0 and again["shards_kept"] == 3 and again["shards_indexed"] == 0 and again["samples"] == 24


def test_a_local_index_text_is_read_where_it_lies_not_held(cli, hf):
    # Opened from their local indexes, the rows' text stays in the index files (read by range as
    # the samples are reached): max_manifest_bytes, which bounds the text a rank holds, no longer
    # bounds it. Some files indexed and some read whole give the batches of all read whole.
    folder, root = hf
    whole = load(folder / SOURCE, **root)[0]
    small = {"max_manifest_bytes": 3000, **root}  # less than one file's rows
    with pytest.raises(ValueError, match="max_manifest_bytes"):
        load(folder / SOURCE, **small)
    rc, _, err = index(cli, folder / "train-00001.parquet")
    assert rc == 0, err
    assert_same_batches(load(folder / SOURCE, **root)[0], whole)  # files 0 and 2 read whole, 1 from its index
    rc, _, err = index(cli, folder / SOURCE)
    assert rc == 0, err
    got, errors, _ = load(folder / SOURCE, **small)
    assert not errors
    assert_same_batches(got, whole)
    # An index rebuilt while a Loader reads through it: the Loader reads the one it opened.
    with mmfeed.Loader(str(folder / SOURCE), **{**OPTIONS, **root}) as loader:
        first = next(loader)
        built = folder / "train-00000.parquet.mmidx"
        replaced = built.with_suffix(".tmp")
        replaced.write_bytes(b"x" * built.stat().st_size)
        replaced.rename(built)
        rest = list(loader)
        assert not loader.errors()
    assert_same_batches([first, *rest], whole)


def test_a_stale_or_damaged_index_is_refused_by_name(cli, hf):
    folder, root = hf
    rc, _, err = index(cli, folder / SOURCE)
    assert rc == 0, err
    first = folder / "train-00000.parquet.mmidx"
    good = first.read_bytes()

    def refused(why):
        with pytest.raises(Exception) as e:
            load(folder / SOURCE, **root)
        assert "train-00000.parquet.mmidx" in str(e.value) and why in str(e.value), str(e.value)

    # The file rewritten since (another size): stale.
    parquet = folder / "train-00000.parquet"
    original = parquet.read_bytes()
    parquet.write_bytes(original + b"\0")
    refused("stale")
    parquet.write_bytes(original)  # the same bytes, a later mtime: still stale
    refused("modified since")
    rc, [summary], _ = index(cli, folder / SOURCE)  # rebuilt, not kept
    assert rc == 0 and summary["shards_indexed"] == 1 and summary["shards_kept"] == 2
    good = first.read_bytes()
    tampered = bytearray(good)
    tampered[len(good) // 2] ^= 1
    first.write_bytes(bytes(tampered))
    refused("damaged (CRC-32)")
    first.write_bytes(good[:-7])
    refused("truncated")
    first.write_bytes(b"not an index at all")
    refused("not the index of a Parquet file")
    first.write_bytes(good)
    assert not load(folder / SOURCE, **root)[1]


def test_a_file_whose_images_are_compressed_is_named_and_read_whole(cli, written, tmp_path):
    out, root = written
    shutil.copytree(out / "pa", tmp_path / "pa")
    rc, [summary], _ = index(cli, tmp_path / "pa" / SOURCE)
    assert rc == 1 and summary["shards_damaged"] == 3 and summary["shards_indexed"] == 0
    assert all("compressed or dictionary-encoded pages" in b for b in summary["bad"]), summary["bad"]
    assert "train-00000.parquet" in summary["bad"][0]
    assert not list((tmp_path / "pa").glob("*.mmidx"))
    got, errors, _ = load(tmp_path / "pa" / SOURCE, **root)
    assert not errors
    assert_same_batches(got, load(out / "pa" / SOURCE, **root)[0])


def test_over_http_each_image_is_fetched_alone(cli, hf, nginx, tmp_path):
    from servers import Nginx

    folder, root = hf
    server = Nginx(folder, tmp_path / "nginx").start()
    try:
        url = server.url("ok", SOURCE)
        with mmfeed.Loader(url, **{**OPTIONS, **root}) as loader:
            want = list(loader)
            whole = loader.metrics()["counters"]
        # A remote file's index is written into --out DIR, then uploaded beside it.
        rc, _, err = index(cli, url)
        assert rc == 1 and "--out DIR" in err
        rc, [summary], err = index(cli, "--out", tmp_path / "up", url)
        assert rc == 0 and summary["shards_indexed"] == 3, err
        for built in (tmp_path / "up").glob("*.mmidx"):
            shutil.copy(built, folder / built.name)
        with mmfeed.Loader(url, **{**OPTIONS, **root}) as loader:
            got = list(loader)
            assert not loader.errors()
            indexed = loader.metrics()["counters"]
        # With a node cache, the indexes are fetched into it once (a node's first rank) and read
        # there as local ones: with those beside the files gone, a later Loader opens from the cache.
        cache = tmp_path / "node-cache"
        with mmfeed.Loader(url, cache_dir=str(cache), **{**OPTIONS, **root}) as loader:
            assert_same_batches(list(loader), want)
        assert len(list(cache.glob("*.mmidx"))) == 3
        uploaded = {p.name: p.read_bytes() for p in folder.glob("*.mmidx")}
        for name in uploaded:
            (folder / name).unlink()
        with mmfeed.Loader(url, cache_dir=str(cache), **{**OPTIONS, **root}) as loader:
            assert_same_batches(list(loader), want)
            assert loader.metrics()["counters"]["fetch.bytes"] == indexed["fetch.bytes"]
        for name, data in uploaded.items():
            (folder / name).write_bytes(data)
        # Without the first file's index, the others' are not looked for (one GET for a set
        # without indexes, not one a file): all are read whole.
        uploaded = (folder / "train-00000.parquet.mmidx").read_bytes()
        (folder / "train-00000.parquet.mmidx").unlink()
        with mmfeed.Loader(url, **{**OPTIONS, **root}) as loader:
            assert_same_batches(list(loader), want)
            unindexed = loader.metrics()["counters"]
        assert unindexed["fetch.bytes"] == whole["fetch.bytes"]
        (folder / "train-00000.parquet.mmidx").write_bytes(uploaded)
        # An index built from the local files is bound to their mtimes, not the server's ETags.
        index(cli, folder / SOURCE)
        with pytest.raises(Exception, match="built for a local file and a remote one|another ETag"):
            load(url, **root)
    finally:
        server.stop()
    assert_same_batches(got, want)

    images = sum(
        len(i["bytes"])
        for f in sorted(folder.glob("*.parquet"))
        for row in pq.read_table(f, columns=["images"]).to_pylist()
        for i in row["images"]
    )
    # Read whole, each sample with images fetches the data page they lie in; from the index, the
    # images' own bytes (the videos are local files under the media root, not fetched).
    assert images <= indexed["fetch.bytes"] < images + 4096, (indexed["fetch.bytes"], images)
    assert whole["fetch.bytes"] > 3 * images, (whole["fetch.bytes"], images)
