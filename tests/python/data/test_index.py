"""Issue 51, the dataset index (first part): `mmfeed index` writes MANIFEST.mmidx beside a JSONL or
JSON manifest; a Loader over that manifest opens from the index (the text read by byte range, per
sample, as the rank reaches it) and delivers byte for byte the batches it delivers without one —
padded, packed hf and thd, ranks, resume, blends, the serial mode. A stale index
is refused by name, a damaged block is the error of each sample it holds; samples that are no conversation are named by the index and by the Loader.
Without an index beside it, `cache_dir=` has a node's first rank index it once for all; a remote
manifest (S3, HTTP) opens from its index in that node cache, fetched from beside it or built there,
each sample's line read by a ranged GET pinned to the version indexed."""

import gzip
import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import datagen
import numpy as np
import pytest
from conftest import ROOT, run_ranks

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
CONFIGS = {
    "padded": dict(batch_size=4, seed=3, epochs=2),
    "packed hf": dict(token_budget=3000, pack_window=8, seed=5, mrope=True),
    "packed thd": dict(token_budget=3000, pack_window=8, seed=5, packed_format="thd", pad_to_multiple_of=8),
    "rank 1 of 3": dict(batch_size=2, rank=1, world_size=3, seed=7),
    "serial": dict(batch_size=4, seed=3, mode="serial"),
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("index-data")
    datagen.generate(out, samples=20, seed=11, max_megapixels=0.3, workers=2)
    manifest = out / "manifest.jsonl"
    # A byte-order mark, a blank line and a sample that is no conversation, as users' files have.
    lines = manifest.read_text().splitlines()
    lines.insert(5, "")
    lines.insert(9, '{"id": "not-a-conversation", "text": "no messages"}')
    manifest.write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
    return manifest


def index(cli, *args):
    proc = subprocess.run([str(cli), "index", "--json", *map(str, args)], capture_output=True, text=True, timeout=120)
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def batches(manifest, **options):
    with mmfeed.Loader(manifest, tokenizer=TOKENIZER, max_pixels=80_000, tensors="np", **options) as loader:
        out = [dict(b) for b in loader]
        return out, loader.errors(), loader.state_dict()


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x["sample_ids"] == y["sample_ids"]
        assert x.keys() == y.keys()
        for key in x.keys() - {"sample_ids", "epoch", "index", "buffer_address"}:
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)


def test_the_index_names_what_it_found(cli, dataset):
    rc, (summary,), err = index(cli, dataset)
    assert rc == 0, err
    assert summary["index"] == f"{dataset}.mmidx"
    assert summary["samples"] == 21
    assert summary["images"] == sum(
        1
        for line in dataset.read_text(encoding="utf-8-sig").splitlines()
        if line.strip()
        for m in json.loads(line).get("messages", [])
        for c in (m["content"] if isinstance(m["content"], list) else [])
        if c.get("type") == "image"
    )
    assert summary["bad_count"] == 1 and "manifest.jsonl:10" in summary["bad"][0]
    media = summary["images"] + summary["videos"] + summary["audio"]
    assert summary["index_bytes"] == 96 + 16 + 40 * 21 + 16 * media == Path(summary["index"]).stat().st_size
    assert summary["media_unreadable"] == 0 and summary["media_not_probed"] == 0


def image_refs(line: str) -> list[str]:
    """The images a manifest line's conversation names, in order."""
    return [
        c["image"]
        for m in json.loads(line)["messages"]
        if isinstance(m["content"], list)
        for c in m["content"]
        if c.get("type") == "image"
    ]


def write_media_manifest(path, kind: str, names: list[str]) -> None:
    """A JSONL manifest of one sample for each medium `names` (of `kind`), a question about it."""
    lines = [
        json.dumps(
            {
                "id": f"{kind}{i}",
                "messages": [
                    {"role": "user", "content": [{"type": kind, kind: name}, {"type": "text", "text": "?"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": "A pattern."}]},
                ],
            }
        )
        for i, name in enumerate(names)
    ]
    path.write_text("\n".join(lines) + "\n")


def read_index(path):
    """The index's records and media entries, read from its documented layout (docs/data.md),
    every checksum it holds checked with zlib's CRC-32."""
    data = Path(path).read_bytes()
    magic, version, record_size, samples = struct.unpack_from("<8sIIQ", data, 0)
    assert (magic, version, record_size) == (b"mmfeedIX", 3, 40)
    assert struct.unpack_from("<I", data, 92)[0] == zlib.crc32(data[:92])
    (table_crc,) = struct.unpack_from("<I", data, 44)
    (media,) = struct.unpack_from("<Q", data, 56)
    block, media_size, entry_size = struct.unpack_from("<III", data, 64)
    assert (block, media_size, entry_size) == (256, 16, 16)
    blocks = (samples + block - 1) // block
    table = [struct.unpack_from("<IIQ", data, 96 + 16 * b) for b in range(blocks)]
    assert zlib.crc32(data[96 : 96 + 16 * blocks]) == table_crc
    at = 96 + 16 * blocks
    records = [struct.unpack_from("<QQQIIHHHH", data, at + 40 * i) for i in range(samples)]
    media_at = at + 40 * samples
    entries = [struct.unpack_from("<IIIHBB", data, media_at + 16 * j) for j in range(media)]
    for b, (records_crc, media_crc, first_media) in enumerate(table):
        first, end = b * block, min(samples, (b + 1) * block)
        assert first_media == records[first][2]
        media_end = records[end][2] if end < samples else media
        assert zlib.crc32(data[at + 40 * first : at + 40 * end]) == records_crc
        assert zlib.crc32(data[media_at + 16 * first_media : media_at + 16 * media_end]) == media_crc
    return records, entries


def test_image_facts_are_pillows_sizes(cli, dataset, tmp_path):
    # Each image's width and height in the index are Pillow's, upright (EXIF transposed) as the
    # Hugging Face processors load it; the records' media counts lay the entries out in order.
    from PIL import Image, ImageOps

    copy = tmp_path / "facts"
    shutil.copytree(dataset.parent, copy)
    manifest = copy / dataset.name
    assert index(cli, manifest)[0] == 0
    records, entries = read_index(f"{manifest}.mmidx")
    lines = [line for line in manifest.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    checked = 0
    for record, line in zip(records, lines):
        _, _, first, _, _, images, _, _, flags = record
        if flags & 1:
            continue
        refs = image_refs(line)
        assert len(refs) == images
        for j, ref in enumerate(refs):
            width, height, _, _, kind, known = entries[first + j]
            with Image.open(copy / ref) as img:
                upright = ImageOps.exif_transpose(img)
                assert (kind, known, width, height) == (1, 0, *upright.size), ref
            checked += 1
    assert checked == sum(r[5] for r in records) > 0


@pytest.mark.parametrize("name", CONFIGS)
def test_indexed_batches_are_the_unindexed_ones(cli, dataset, tmp_path, name):
    copy = tmp_path / "indexed"
    shutil.copytree(dataset.parent, copy)
    assert index(cli, copy / dataset.name)[0] == 0
    want, want_errors, want_state = batches(dataset, **CONFIGS[name])
    got, got_errors, got_state = batches(copy / dataset.name, **CONFIGS[name])
    assert_same(want, got)
    assert [e["sample_id"] for e in got_errors] == [e["sample_id"] for e in want_errors]
    # The same fingerprint (its size, count and CRC-32 of the manifest): an index changes nothing a
    # resume checks; only the copy's path differs.
    assert json.dumps(got_state).replace(str(copy), str(dataset.parent)) == json.dumps(want_state)


def resumed(manifest, state, rank, world):
    with mmfeed.Loader(
        manifest,
        tokenizer=TOKENIZER,
        max_pixels=80_000,
        batch_size=2,
        seed=4,
        tensors="np",
        rank=rank,
        world_size=world,
    ) as loader:
        loader.load_state_dict(state)
        return [dict(b) for b in loader]


def test_resume_and_blends_through_the_index(cli, dataset):
    # States taken without the index (rank 0 of 1, rank 1 of 3) resume from it into the batches
    # they resume into without it; the index lies beside the manifest (the resume state names the
    # manifest's path) for this test only.
    states = {}
    for rank, world in ((0, 1), (1, 3)):
        with mmfeed.Loader(
            dataset,
            tokenizer=TOKENIZER,
            max_pixels=80_000,
            batch_size=2,
            seed=4,
            rank=rank,
            world_size=world,
            tensors="np",
        ) as loader:
            next(loader)
            next(loader)
            states[rank, world] = loader.state_dict()
    other = dataset.parent / "other.jsonl"  # beside the images its lines name
    other.write_text("".join(line + "\n" for line in dataset.read_text(encoding="utf-8-sig").splitlines()[:7]))
    blend = dict(weights=[0.4, 0.6], blend_samples=30, batch_size=3, seed=2)
    want = {key: resumed(dataset, state, *key) for key, state in states.items()}
    want_blend = batches([dataset, other], **blend)[0]
    assert all(want.values())
    assert index(cli, dataset)[0] == 0
    try:
        for key, state in states.items():
            assert_same(want[key], resumed(dataset, state, *key))
        assert_same(want_blend, batches([dataset, other], **blend)[0])
    finally:
        Path(f"{dataset}.mmidx").unlink()


def test_a_stale_index_is_refused_by_name(cli, dataset, tmp_path):
    copy = tmp_path / "stale"
    shutil.copytree(dataset.parent, copy)
    manifest = copy / dataset.name
    assert index(cli, manifest)[0] == 0
    with manifest.open("a") as f:
        f.write(dataset.read_text(encoding="utf-8-sig").splitlines()[0] + "\n")
    with pytest.raises(ValueError, match=r"manifest\.jsonl\.mmidx.*stale.*build it again"):
        with mmfeed.Loader(manifest, tokenizer=TOKENIZER) as loader:
            next(loader)
    assert index(cli, manifest)[0] == 0  # rebuilt: the Loader opens again
    with mmfeed.Loader(manifest, tokenizer=TOKENIZER, max_pixels=80_000, batch_size=4) as loader:
        assert sum(len(b["sample_ids"]) for b in loader) == 21
    rc, _, err = index(cli, tmp_path / "missing.jsonl")
    assert rc == 1 and "missing.jsonl" in err


def test_a_damaged_block_is_each_of_its_samples_error_naming_the_index(cli, dataset, tmp_path):
    # 300 samples, two blocks of the index: the header and block table check out at open; block 1
    # is checked when its first sample is read, and each sample it holds fails naming the index
    # and the block, while block 0's samples are delivered.
    copy = tmp_path / "damaged"
    shutil.copytree(dataset.parent, copy)
    manifest = copy / dataset.name
    good = [line for line in dataset.read_text(encoding="utf-8-sig").splitlines() if '"messages"' in line]
    manifest.write_text("\n".join(good[i % len(good)] for i in range(300)) + "\n")
    assert index(cli, manifest)[0] == 0
    path = Path(f"{manifest}.mmidx")
    data = bytearray(path.read_bytes())
    data[96 + 2 * 16 + 40 * 299 + 24] ^= 1  # the last sample's length, in block 1
    path.write_bytes(bytes(data))
    with mmfeed.Loader(
        manifest, tokenizer=TOKENIZER, max_pixels=20_000, batch_size=8, max_error_fraction=1.0, tensors="np"
    ) as loader:
        delivered = sum(len(b["sample_ids"]) for b in loader)
        errors = loader.errors()
    assert delivered == 256 and len(errors) == 44
    assert all(f"{path}: block 1 (samples 256-299) is damaged (CRC-32)" in e["reason"] for e in errors), errors[0]


def test_a_node_cache_indexes_the_manifest_once_for_its_ranks(dataset, tmp_path):
    # Four rank processes of one node open the same manifest (no index beside it) with one
    # cache_dir: one of them builds the index, all open from it, the ranks' samples are the ones
    # they take without it; a later open builds nothing.
    copy = tmp_path / "data"
    shutil.copytree(dataset.parent, copy)
    manifest, cache = copy / dataset.name, tmp_path / "cache"
    results = run_ranks(manifest, cache, 4, tokenizer=str(TOKENIZER), max_pixels=80_000, batch_size=2, seed=1)
    assert sum(r["built"] for r in results) == 1
    assert len(list(cache.glob("*.mmidx"))) == 1 and not Path(f"{manifest}.mmidx").exists()
    for rank, r in enumerate(results):
        with mmfeed.Loader(
            dataset, tokenizer=TOKENIZER, max_pixels=80_000, batch_size=2, seed=1, rank=rank, world_size=4
        ) as loader:
            assert r["ids"] == [i for b in loader for i in b["sample_ids"]]
    with mmfeed.Loader(manifest, tokenizer=TOKENIZER, max_pixels=80_000, batch_size=4, cache_dir=cache) as loader:
        assert sum(len(b["sample_ids"]) for b in loader) == 20
        assert loader.metrics()["counters"]["loader.indexes_built"] == 0
    # A compressed manifest is read whole: no index can serve it by byte range.
    packed = copy / "packed.jsonl.gz"
    packed.write_bytes(gzip.compress(manifest.read_bytes()))
    with mmfeed.Loader(packed, tokenizer=TOKENIZER, max_pixels=80_000, batch_size=4, cache_dir=cache) as loader:
        assert sum(len(b["sample_ids"]) for b in loader) == 20
        assert loader.metrics()["counters"]["loader.indexes_built"] == 0
    assert len(list(cache.glob("*.mmidx"))) == 1


def test_text_tokens_are_the_loaders_with_the_same_tokenizer_and_template(cli, dataset, tmp_path):
    # `mmfeed index --tokenizer` counts each sample's text tokens as the Loader encodes its
    # conversation: a sample's tokens are its text tokens plus its images' (t * h * w / 4 each).
    # The header binds them to the tokenizer's bytes and the template's name: a Loader with another
    # template neither checks nor balances by them.
    copy = tmp_path / "tokens"
    shutil.copytree(dataset.parent, copy)
    manifest = copy / dataset.name
    rc, (summary,), err = index(cli, manifest, "--tokenizer", TOKENIZER, "--model", "qwen2-vl")
    assert rc == 0, err
    records, _ = read_index(f"{manifest}.mmidx")
    (key,) = struct.unpack_from("<I", Path(f"{manifest}.mmidx").read_bytes(), 76)
    assert key == zlib.crc32(b"\0Qwen2-VL", zlib.crc32(TOKENIZER.read_bytes()))
    good = [r for r in records if not r[8] & 1]
    assert summary["text_tokens"] == sum(r[4] for r in good) > 0
    assert all(r[4] > 0 for r in good)
    options = dict(tokenizer=TOKENIZER, max_pixels=80_000, tensors="np", batch_size=1, shuffle=False)
    with mmfeed.Loader(manifest, **options) as loader:
        batches = list(loader)
        counters = loader.metrics()["counters"]
    assert len(batches) == len(good)
    images_only = 0
    for r, b in zip(good, batches):
        if r[6] or r[7]:
            continue  # videos' and clips' tokens are theirs to count
        images_only += 1
        grids = b.get("image_grid_thw")
        image_tokens = int(np.prod(grids, axis=-1).sum()) // 4 if grids is not None else 0
        assert int(b["attention_mask"].sum()) == r[4] + image_tokens, b["sample_ids"]
    assert counters["index.tokens_checked"] == images_only > 0
    assert counters["index.tokens_disagreed"] == 0
    with mmfeed.Loader(manifest, chat_template="qwen3-vl", **options) as loader:
        next(loader)
        assert loader.metrics()["counters"]["index.tokens_checked"] == 0


def test_the_loader_counts_whether_the_index_facts_agree(cli, dataset, tmp_path):
    # Each image's header, probed as the Loader processes it, is checked against the size the index
    # read: all agree; an image replaced since the index was built (the manifest unchanged, so the
    # index is not stale) is counted, not trusted.
    from PIL import Image

    copy = tmp_path / "agree"
    shutil.copytree(dataset.parent, copy)
    manifest = copy / dataset.name
    assert index(cli, manifest)[0] == 0

    def counters():
        with mmfeed.Loader(manifest, tokenizer=TOKENIZER, max_pixels=80_000, tensors="np", batch_size=4) as loader:
            for _ in loader:
                pass
            return loader.metrics()["counters"]

    records, entries = read_index(f"{manifest}.mmidx")
    images = sum(r[5] for r in records if not r[8] & 1)
    first = counters()
    assert first["index.facts_checked"] == images > 0
    assert first["index.facts_disagreed"] == 0
    line = next(json.loads(x) for x in manifest.read_text(encoding="utf-8-sig").splitlines()[1:] if "image" in x)
    ref = next(
        c["image"]
        for m in line["messages"]
        if isinstance(m["content"], list)
        for c in m["content"]
        if c.get("type") == "image"
    )
    with Image.open(copy / ref) as img:
        img.resize((img.width // 2 + 1, img.height // 2 + 1)).save(copy / ref, format=img.format)
    second = counters()
    assert second["index.facts_checked"] == images
    assert second["index.facts_disagreed"] >= 1


def upload(s3, bucket, folder: Path, prefix: str) -> str:
    s3.create_bucket(Bucket=bucket)
    for path in folder.rglob("*"):
        if path.is_file():
            s3.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(folder)}", Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}"


def remote_batches(source, **options):
    with mmfeed.Loader(source, tokenizer=TOKENIZER, max_pixels=80_000, tensors="np", **options) as loader:
        out = [dict(b) for b in loader]
        return out, loader.errors(), loader.metrics()


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_remote_manifest_opens_from_its_index_in_the_node_cache(dataset, moto_s3, monkeypatch, tmp_path, name):
    # An S3 manifest with cache_dir: the node's first reader indexes it into the cache (reading it
    # once), every later one opens from that index; each sample's line is then read by a ranged
    # GET pinned to the version indexed: the batches and errors are those read whole.
    for key, value in moto_s3.env().items():
        monkeypatch.setenv(key, value)
    s3 = moto_s3.client()
    source = upload(s3, f"idx-{name.replace(' ', '-')}", dataset.parent, "d") + "/" + dataset.name
    whole, whole_errors, _ = remote_batches(source, **CONFIGS[name])
    cache = tmp_path / "cache"
    for built in (1, 0):
        got, errors, metrics = remote_batches(source, cache_dir=cache, **CONFIGS[name])
        assert_same(got, whole)
        assert errors == whole_errors
        assert metrics["counters"]["loader.indexes_built"] == built
        gauges = metrics["gauges"]
        assert gauges["manifest.text_requests"]["value"] > 0
        if name in ("padded", "serial"):  # lines asked for ahead together, in either driver: adjacent ones one GET
            assert gauges["manifest.text_requests"]["value"] < 10, gauges
        if name == "rank 1 of 3":  # a rank reads its share of the text, not the file
            assert gauges["manifest.text_bytes"]["value"] < dataset.stat().st_size / 2
    assert len(list(cache.glob("*.mmidx"))) == 1


def test_a_remote_index_uploaded_beside_is_fetched_and_checked(cli, dataset, moto_s3, monkeypatch, tmp_path):
    for key, value in moto_s3.env().items():
        monkeypatch.setenv(key, value)
    s3 = moto_s3.client()
    source = upload(s3, "idx-beside", dataset.parent, "d") + "/" + dataset.name
    key = f"d/{dataset.name}"
    rc, _, err = index(cli, source)  # where to write it is the user's to say
    assert rc == 1 and "--out FILE" in err
    built = tmp_path / "built.mmidx"
    rc, (summary,), err = index(cli, "--out", built, source)
    assert rc == 0, err
    assert summary["samples"] == 21 and summary["bad_count"] == 1
    s3.put_object(Bucket="idx-beside", Key=key + ".mmidx", Body=built.read_bytes())
    whole, _, _ = remote_batches(source, batch_size=4, seed=3)
    got, _, metrics = remote_batches(source, batch_size=4, seed=3, cache_dir=tmp_path / "a")
    assert_same(got, whole)
    assert metrics["counters"]["loader.indexes_built"] == 0  # fetched, not built
    # `mmfeed index --cache-dir` fills a node cache ahead of the ranks.
    rc, (summary,), err = index(cli, "--cache-dir", tmp_path / "b", source)
    assert rc == 0 and Path(summary["index"]).parent == tmp_path / "b", err
    # Damaged or stale, an uploaded index is refused by name, never used.
    damaged = bytearray(built.read_bytes())
    damaged[30] ^= 1
    s3.put_object(Bucket="idx-beside", Key=key + ".mmidx", Body=bytes(damaged))
    with pytest.raises(Exception, match=r"s3://idx-beside/d/manifest\.jsonl\.mmidx.*header is damaged"):
        remote_batches(source, batch_size=4, cache_dir=tmp_path / "c")
    s3.put_object(Bucket="idx-beside", Key=key + ".mmidx", Body=built.read_bytes())
    lines = dataset.read_bytes().split(b"\n")
    lines[1], lines[2] = lines[2], lines[1]  # the same size, another version
    s3.put_object(Bucket="idx-beside", Key=key, Body=b"\n".join(lines))
    with pytest.raises(Exception, match=r"manifest\.jsonl\.mmidx.*stale: .*another ETag"):
        remote_batches(source, batch_size=4, cache_dir=tmp_path / "c")
    # Without one beside it, the node cache's stale index is built again from the new text.
    s3.delete_object(Bucket="idx-beside", Key=key + ".mmidx")
    whole, _, _ = remote_batches(source, batch_size=4, seed=3)
    got, _, metrics = remote_batches(source, batch_size=4, seed=3, cache_dir=tmp_path / "a")
    assert_same(got, whole)
    assert metrics["counters"]["loader.indexes_built"] == 1


def test_a_remote_manifest_replaced_after_open_fails_its_samples_by_name(dataset, moto_s3, monkeypatch, tmp_path):
    # The text read is the version indexed (If-Match on each ranged GET): a manifest replaced
    # under a running Loader fails the samples read since, naming it, never mixing two versions.
    # Ten copies of the data set: more samples than the reader asks for ahead (at most 96).
    for key, value in moto_s3.env().items():
        monkeypatch.setenv(key, value)
    s3 = moto_s3.client()
    big = tmp_path / "data" / dataset.name
    big.parent.mkdir()
    big.write_text(dataset.read_text(encoding="utf-8-sig") * 10, encoding="utf-8")
    source = upload(s3, "idx-replaced", big.parent, "d") + "/" + dataset.name
    with mmfeed.Loader(
        source,
        tokenizer=TOKENIZER,
        max_pixels=80_000,
        batch_size=4,
        mode="serial",
        max_error_fraction=1.0,
        cache_dir=tmp_path / "cache",
        media_root=str(dataset.parent),
        allow_local_media_from_remote_manifest=True,
    ) as loader:
        batches = iter(loader)
        first = next(batches)  # opened from its index
        s3.put_object(Bucket="idx-replaced", Key=f"d/{dataset.name}", Body=big.read_bytes() + b"\n")
        after = sum(len(b["sample_ids"]) for b in batches)
        errors = loader.errors()
    assert len(first["sample_ids"]) + after + len(errors) == 210
    replaced = [e for e in errors if f"{source}: replaced since it was indexed" in e["reason"]]
    others = [e for e in errors if e not in replaced]
    assert all("not-a-conversation" in e["sample_id"] or "messages" in e["reason"] for e in others), others
    assert len(replaced) >= 210 - 4 - 96 - 10, len(replaced)  # every sample read after, bar the no-conversations


def test_an_http_manifest_opens_from_its_index_in_the_node_cache(dataset, nginx, object_dir, tmp_path):
    shutil.copytree(dataset.parent, object_dir / "index-data", dirs_exist_ok=True)
    source = nginx.url("ok", f"index-data/{dataset.name}")
    whole, whole_errors, _ = remote_batches(source, batch_size=2, rank=1, world_size=3, seed=7)
    got, errors, metrics = remote_batches(source, batch_size=2, rank=1, world_size=3, seed=7, cache_dir=tmp_path)
    assert_same(got, whole)
    assert errors == whole_errors
    assert metrics["counters"]["loader.indexes_built"] == 1
    assert 0 < metrics["gauges"]["manifest.text_bytes"]["value"] < dataset.stat().st_size / 2


def test_remote_images_facts_are_read_from_their_first_bytes(cli, dataset, moto_s3, monkeypatch, tmp_path):
    # An index of a manifest in S3 naming images in S3 holds each image's upright size, read by
    # ranged GETs of the image's first bytes (Pillow's sizes); the Loader checks them against the
    # headers it probes and finds them all agreeing; an image missing is counted and named.
    from PIL import Image, ImageOps

    for key, value in moto_s3.env().items():
        monkeypatch.setenv(key, value)
    s3 = moto_s3.client()
    source = upload(s3, "idx-facts", dataset.parent, "d") + "/" + dataset.name
    built = tmp_path / "built.mmidx"
    rc, (summary,), err = index(cli, "--out", built, source)
    assert rc == 0, err
    assert summary["media_unreadable"] == 0 and summary["media_not_probed"] == 0
    records, entries = read_index(built)
    lines = [line for line in dataset.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    checked = 0
    for (_, _, first, _, _, _, _, _, flags), line in zip(records, lines):
        if flags & 1:
            continue
        refs = image_refs(line)
        for j, ref in enumerate(refs):
            with Image.open(dataset.parent / ref) as img:
                assert entries[first + j][:2] == ImageOps.exif_transpose(img).size and entries[first + j][5] == 0
            checked += 1
    assert checked == summary["images"] > 0
    s3.put_object(Bucket="idx-facts", Key=f"d/{dataset.name}.mmidx", Body=built.read_bytes())
    _, _, metrics = remote_batches(source, batch_size=4, cache_dir=tmp_path / "cache")
    counters = metrics["counters"]
    assert counters["loader.indexes_built"] == 0
    assert counters["index.facts_checked"] == summary["images"] and counters["index.facts_disagreed"] == 0
    missing = next(ref for line in lines[:3] for ref in re.findall(r'"image": "([^"]+)"', line))
    s3.delete_object(Bucket="idx-facts", Key=f"d/{missing}")
    rc, (summary,), err = index(cli, "--out", built, source)
    assert rc == 0 and summary["media_unreadable"] >= 1, err
    assert any(missing in u and "404" in u for u in summary["unreadable"]), summary["unreadable"]


def test_remote_videos_facts_are_read_from_their_container_headers(cli, nginx, object_dir, tmp_path):
    # A manifest over HTTP naming videos over HTTP: each video's frame size, frame rate and
    # duration in its index come from its container's header, read by ranged GETs of its first
    # MiB (and its last 4 MiB where the header is not first: an MP4 written without faststart),
    # agreeing with the facts of the same videos indexed as local files (probed whole, their
    # packets counted) within one frame. A short clip inside the first MiB is probed whole.
    from conftest import make_test_video

    folder = object_dir / "video-facts"
    folder.mkdir()
    h264 = ["-c:v", "libx264", "-pix_fmt", "yuv420p"]
    make_test_video(folder / "short.mp4", "160x120", 25, 2, h264)  # a few KB: whole
    # Noise at a high bitrate: over 6 MiB, so only its ends are fetched (1 and 4 MiB: a gap of MiBs).
    noise = ["-f", "lavfi", "-i", "nullsrc=size=320x240:rate=30:duration=7", "-vf", "noise=alls=100:allf=t"]
    # One encoder thread: the same bytes on any machine (sizes well past the 6 MiB asked for).
    ffmpeg = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *noise, *h264, "-threads", "1", "-b:v", "8M"]
    subprocess.run([*ffmpeg, str(folder / "moov-last.mp4")], check=True, timeout=300)
    subprocess.run([*ffmpeg, "-movflags", "+faststart", str(folder / "moov-first.mp4")], check=True, timeout=300)
    subprocess.run([*ffmpeg, str(folder / "clip.mkv")], check=True, timeout=300)  # Matroska: no frame count
    names = ["short.mp4", "moov-last.mp4", "moov-first.mp4", "clip.mkv"]
    sizes = [(folder / n).stat().st_size for n in names]
    assert sizes[0] < 1 << 20 and all(size > 6 << 20 for size in sizes[1:]), sizes
    write_media_manifest(folder / "videos.jsonl", "video", names)
    rc, (local,), err = index(cli, folder / "videos.jsonl")
    assert rc == 0 and local["videos"] == 4 and local["media_not_probed"] == 0, err
    _, local_entries = read_index(folder / "videos.jsonl.mmidx")
    (folder / "videos.jsonl.mmidx").unlink()
    built = tmp_path / "remote.mmidx"
    rc, (remote,), err = index(cli, "--out", built, nginx.url("ok", "video-facts/videos.jsonl"))
    assert rc == 0, err
    assert remote["media_not_probed"] == 0 and remote["media_unreadable"] == 0, remote
    _, entries = read_index(built)
    for name, got, want in zip(names, entries, local_entries):
        width, height, duration_ms, fps_centi, kind, known = got
        assert (kind, known) == (2, 0), name
        assert (width, height, fps_centi) == want[:2] + (want[3],), (name, got, want)
        assert abs(duration_ms - want[2]) <= 100_000 / fps_centi, (name, got, want)  # one frame


def test_remote_audio_facts_are_read_from_their_container_headers(cli, nginx, object_dir, tmp_path):
    # A manifest over HTTP naming audio clips over HTTP: each clip's duration in its index comes
    # from its container's header, read by ranged GETs of its first MiB (and last MiBs where the
    # header needs them: an M4A written without faststart ends with moov, an Ogg file states its
    # length in its last page), equal to the local probe's; a clip under a MiB is probed whole.
    from mmfeed import _mmfeed

    folder = object_dir / "audio-facts"
    folder.mkdir()
    # Noise, so that each is over 6 MiB: only its ends are fetched (1 and 4 MiB, a gap of MiBs).
    encodings = {
        "long.wav": (45, ["-c:a", "pcm_s16le", "-ac", "2"]),
        "long.flac": (70, ["-c:a", "flac"]),
        "long.mp3": (170, ["-c:a", "libmp3lame", "-b:a", "320k", "-ac", "2"]),
        "long.m4a": (45, ["-c:a", "alac", "-ac", "2"]),  # moov at its end
        "long.ogg": (70, ["-c:a", "flac"]),  # FLAC in Ogg: its length in its last page
    }
    for name, (seconds, codec) in encodings.items():
        noise = [
            "-f",
            "lavfi",
            "-i",
            f"anoisesrc=color=white:amplitude=0.5:duration={seconds}:sample_rate=44100:seed=7",
        ]
        ffmpeg = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *noise, "-threads", "1"]
        subprocess.run([*ffmpeg, *codec, str(folder / name)], check=True, timeout=300)
    shutil.copy(ROOT / "tests" / "data" / "corpus" / "audio" / "tone.wav", folder / "short.wav")
    names = [*encodings, "short.wav"]
    sizes = {n: (folder / n).stat().st_size for n in names}
    assert sizes["short.wav"] < 1 << 20 and all(sizes[n] > 6 << 20 for n in encodings), sizes
    write_media_manifest(folder / "clips.jsonl", "audio", names)
    built = tmp_path / "remote.mmidx"
    rc, (remote,), err = index(cli, "--out", built, nginx.url("ok", "audio-facts/clips.jsonl"))
    assert rc == 0, err
    assert remote["audio"] == len(names) and remote["media_not_probed"] == 0 and remote["media_unreadable"] == 0
    _, entries = read_index(built)
    for name, (_, _, duration_ms, _, kind, known) in zip(names, entries):
        assert (kind, known) == (3, 0), name
        local = _mmfeed.probe_audio((folder / name).read_bytes())["duration_s"]
        assert duration_ms == round(local * 1000), (name, duration_ms, local)


def test_a_build_stopped_part_way_resumes_from_its_journal(cli, tmp_path):
    """Killed while it reads the images of its fourth chunk (the request for one held by this
    test's own HTTP server), `mmfeed index` resumes from its journal: the three chunks before are
    taken, the index is byte for byte a fresh build's. A journal cut short loses its last chunk
    alone; one of other options is not taken."""
    import io
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 10, 10)).save(png, "PNG")
    body = png.getvalue()
    asked, release = threading.Event(), threading.Event()

    class Images(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/held.png":
                asked.set()
                release.wait(60)
            first, last = 0, len(body) - 1
            if m := re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "")):
                first, last = int(m[1]), min(last, int(m[2] or last))
            self.send_response(206 if self.headers.get("Range") else 200)
            if self.headers.get("Range"):
                self.send_header("Content-Range", f"bytes {first}-{last}/{len(body)}")
            self.send_header("Content-Length", str(last - first + 1))
            self.end_headers()
            self.wfile.write(body[first : last + 1])

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Images)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        manifest = tmp_path / "remote-images.jsonl"
        manifest.write_text(
            "".join(
                json.dumps(
                    {
                        "id": f"s{i}",
                        "messages": [
                            {
                                "role": "user",
                                "content": [{"type": "image", "image": f"{url}/{'held' if i == 13 else i}.png"}],
                            },
                            {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]},
                        ],
                    }
                )
                + "\n"
                for i in range(20)
            )
        )
        out, journal = tmp_path / "stopped.mmidx", tmp_path / "stopped.mmidx.journal"
        args = ["--checkpoint-every", "4", "--out", out, manifest]
        build = subprocess.Popen([str(cli), "index", "--json", *map(str, args)], stdout=subprocess.DEVNULL)
        try:
            assert asked.wait(60), "the build never asked for sample 13's image"
        finally:
            build.kill()
            build.wait(60)
        release.set()
        assert journal.is_file() and not out.exists()
        kept = journal.read_bytes()
        rc, (fresh,), err = index(cli, "--checkpoint-every", "4", "--out", tmp_path / "fresh.mmidx", manifest)
        assert rc == 0 and fresh["resumed_samples"] == 0 and fresh["media_unreadable"] == 0, err
        rc, (resumed,), err = index(cli, *args)
        assert rc == 0, err
        assert resumed["resumed_samples"] == 12  # samples 0-11: the chunks before the one it was stopped in
        assert not journal.exists()
        assert out.read_bytes() == (tmp_path / "fresh.mmidx").read_bytes()
        same = ("samples", "images", "index_bytes", "media_unreadable", "media_not_probed", "bad_count")
        assert {k: resumed[k] for k in same} == {k: fresh[k] for k in same}
        # Its last chunk cut short: that chunk is described again; other options: started anew.
        for cut, options, taken in (
            (kept[:-3], ["--checkpoint-every", "4"], 8),
            (kept, ["--checkpoint-every", "5"], 0),
        ):
            out.unlink()
            journal.write_bytes(cut)
            rc, (again,), err = index(cli, *options, "--out", out, manifest)
            assert rc == 0 and again["resumed_samples"] == taken, (err, again)
            assert out.read_bytes() == (tmp_path / "fresh.mmidx").read_bytes()
    finally:
        server.shutdown()


def test_a_remote_manifest_is_indexed_from_a_copy_in_parts(cli, dataset, moto_s3, monkeypatch, tmp_path):
    """A remote manifest is copied beside the index by ranged GETs of 16 MiB, several at once,
    each pinned to the version stamped, then indexed as a local file is (no max_manifest_bytes
    bounds it): the records of an 18 MB manifest are those of the same file indexed locally, and
    the copy is gone after."""
    for key, value in moto_s3.env().items():
        monkeypatch.setenv(key, value)
    lines = dataset.read_text(encoding="utf-8-sig").splitlines()
    big = tmp_path / "big.jsonl"
    with big.open("w") as f:
        while f.tell() < 18 << 20:
            f.write("\n".join(lines) + "\n")
    s3 = moto_s3.client()
    s3.create_bucket(Bucket="idx-big")
    s3.put_object(Bucket="idx-big", Key="big.jsonl", Body=big.read_bytes())
    out = tmp_path / "remote.mmidx"
    rc, (remote,), err = index(cli, "--no-media", "--out", out, "s3://idx-big/big.jsonl")
    assert rc == 0, err
    rc, (local,), err = index(cli, "--no-media", big)
    assert rc == 0, err
    assert remote["samples"] == local["samples"] > 12_000 and remote["bad_count"] == local["bad_count"] > 0
    assert read_index(out) == read_index(str(big) + ".mmidx")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("remote")) == ["remote.mmidx"]
