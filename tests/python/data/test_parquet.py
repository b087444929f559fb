"""Issue 33: Parquet sources. Files written by Hugging Face datasets (Image() features: the
images' bytes inline, uncompressed, a page index) and by pyarrow's defaults (dictionary pages,
snappy, no page index) load into batches byte-identical to the same samples as a JSONL manifest
beside their images: padded and packed, over 3 ranks, resumed mid-epoch and with another world
size, from local files, S3 (moto) and HTTP (nginx); a damaged cell or file is named, and every
other sample delivered."""

import json

import datagen
import pytest
from conftest import ROOT, assert_same_batches, run_loader

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = {"tensors": "np", "tokenizer": TOKENIZER, "max_pixels": 60_000, "batch_size": 4, "seed": 3}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("parquet-data")
    datagen.generate(out / "jsonl", samples=22, seed=6, max_megapixels=0.4, workers=2, videos=2)
    manifest = out / "jsonl" / "manifest.jsonl"
    lines = manifest.read_text().splitlines() + (out / "jsonl" / "videos.jsonl").read_text().splitlines()
    manifest.write_text("\n".join(lines) + "\n")
    datagen.write_parquet(manifest, out / "hf", per_file=10)
    # pyarrow's defaults, rows in groups of 4; and with a page index over dictionary pages.
    datagen.write_parquet(manifest, out / "pa", per_file=10, writer="pyarrow", row_group_size=4)
    datagen.write_parquet(
        manifest,
        out / "pa-index",
        per_file=24,
        writer="pyarrow",
        write_page_index=True,
        data_page_size=64 << 10,
        dictionary_pagesize_limit=256 << 10,
    )
    return manifest, out


def files(folder, count=3):
    return str(folder / f"train-{{00000..{count - 1:05d}}}.parquet")


def load(source, state=None, **options):
    r = run_loader(source, state, **{**OPTIONS, **options})
    return r["batches"], r["errors"], r["state"]


def with_root(manifest):
    """The videos' paths (not embedded) are relative to the JSONL's folder: the media root."""
    return {"media_root": str(manifest.parent)}


def test_the_writers_write_what_the_tests_mean(dataset):
    import pyarrow.parquet as pq

    _, out = dataset
    hf = pq.ParquetFile(out / "hf" / "train-00000.parquet").metadata.row_group(0)
    image = next(
        hf.column(i) for i in range(hf.num_columns) if hf.column(i).path_in_schema == "images.list.element.bytes"
    )
    assert image.compression == "UNCOMPRESSED" and not image.has_dictionary_page and image.has_offset_index
    pa = pq.ParquetFile(out / "pa" / "train-00000.parquet").metadata
    assert pa.num_row_groups == 3
    image = next(
        pa.row_group(0).column(i)
        for i in range(pa.num_columns)
        if pa.row_group(0).column(i).path_in_schema == "images.list.element.bytes"
    )
    assert image.compression == "SNAPPY" and image.has_dictionary_page and not image.has_offset_index
    indexed = pq.ParquetFile(out / "pa-index" / "train-00000.parquet").metadata.row_group(0)
    image = next(
        indexed.column(i)
        for i in range(indexed.num_columns)
        if indexed.column(i).path_in_schema == "images.list.element.bytes"
    )
    assert image.has_dictionary_page and image.has_offset_index and "PLAIN" in image.encodings


@pytest.mark.parametrize("writer", ["hf", "pa", "pa-index"])
@pytest.mark.parametrize("packing", [{}, {"token_budget": 4000, "pack_window": 8}], ids=["padded", "packed"])
def test_parquet_gives_the_batches_of_its_manifest(dataset, writer, packing):
    manifest, out = dataset
    want, errors, _ = load(manifest, **packing)
    assert not errors
    count = 1 if writer == "pa-index" else 3
    got, errors, _ = load(files(out / writer, count), **with_root(manifest), **packing)
    assert not errors, errors
    assert_same_batches(got, want)
    if writer == "hf":
        assert_same_batches(load(files(out / writer), mode="serial", **with_root(manifest), **packing)[0], want)


def test_parquet_shards_resumes_and_reshards_as_a_manifest_does(dataset):
    manifest, out = dataset
    source, root = files(out / "hf"), with_root(manifest)
    for rank in range(3):
        assert_same_batches(
            load(source, rank=rank, world_size=3, **root)[0], load(manifest, rank=rank, world_size=3)[0]
        )
    whole, _, _ = load(source, epochs=2, **root)
    with mmfeed.Loader(source, epochs=2, **{**OPTIONS, **root}) as loader:
        head = [next(loader) for _ in range(4)]
        state = loader.state_dict()
    assert_same_batches(head + load(source, state=state, epochs=2, **root)[0], whole)
    options = dict(OPTIONS, batch_size=2, shard_remainder="keep", **root)
    delivered, states = [], []
    for rank in range(2):
        with mmfeed.Loader(source, rank=rank, world_size=2, **options) as loader:
            delivered += next(loader)["sample_ids"]
            states.append(loader.state_dict())
    for rank in range(3):
        loader = mmfeed.Loader(source, rank=rank, world_size=3, **options)
        loader.load_state_dict(mmfeed.Loader.reshard_states(states, rank, 3))
        with loader:
            delivered += [i for b in loader for i in b["sample_ids"]]
    assert sorted(delivered) == sorted(json.loads(l)["id"] for l in manifest.read_text().splitlines())


def upload(moto_s3, monkeypatch, folder, bucket):
    s3 = moto_s3.client()
    s3.create_bucket(Bucket=bucket)
    for path in folder.glob("*.parquet"):
        s3.put_object(Bucket=bucket, Key="train/" + path.name, Body=path.read_bytes())
    for key, value in moto_s3.env().items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)


def test_parquet_in_s3_and_over_http(dataset, moto_s3, nginx, monkeypatch, tmp_path):
    from servers import Nginx

    manifest, out = dataset
    root = with_root(manifest)
    want, _, _ = load(manifest)
    upload(moto_s3, monkeypatch, out / "hf", "parquet-set")
    with mmfeed.Loader("s3://parquet-set/train/train-{00000..00002}.parquet", **{**OPTIONS, **root}) as loader:
        got = list(loader)
        assert not loader.errors()
        fetched = loader.metrics()["counters"]["fetch.objects_ok"]
    assert_same_batches(got, want)
    # One ranged GET per sample with images (its data page), however many images it has; the
    # videos are files of their own.
    samples = [json.loads(l) for l in manifest.read_text().splitlines()]
    with_images = sum(
        1
        for s in samples
        if any(i.get("type") == "image" for m in s["messages"] if isinstance(m["content"], list) for i in m["content"])
    )
    videos = sum(
        1
        for s in samples
        for m in s["messages"]
        if isinstance(m["content"], list)
        for i in m["content"]
        if i.get("type") == "video"
    )
    images = sum(
        1
        for s in samples
        for m in s["messages"]
        if isinstance(m["content"], list)
        for i in m["content"]
        if i.get("type") == "image"
    )
    assert fetched == with_images + videos < images + videos, (fetched, with_images, videos, images)
    server = Nginx(out / "pa", tmp_path / "nginx").start()
    try:
        got, errors, _ = load(server.url("ok", "train-{00000..00002}.parquet"), **root)
    finally:
        server.stop()
    assert not errors
    assert_same_batches(got, want)


def llava_table(manifest, count):
    """LLaVA's shape as a Parquet table: one Image() column "image", the conversation a JSON string."""
    import pyarrow as pa

    rows, jsonl = [], []
    for line in manifest.read_text().splitlines():
        sample = json.loads(line)
        tagged = datagen.tagged_form(sample, shape="conversations")
        if len(tagged.get("images", [])) != 1 or "videos" in tagged or "system" in tagged:
            continue
        path = tagged.pop("images")[0]
        rows.append(
            {
                "id": tagged["id"],
                "image": {"bytes": (manifest.parent / path).read_bytes(), "path": path},
                "conversations": json.dumps(tagged["conversations"]),
            }
        )
        jsonl.append(json.dumps({**tagged, "image": path}))
        if len(rows) == count:
            break
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("id", pa.string()), ("image", image), ("conversations", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema), jsonl


def test_a_single_image_column_and_a_json_conversation(dataset, tmp_path):
    import pyarrow.parquet as pq

    manifest, _ = dataset
    table, jsonl = llava_table(manifest, 6)
    assert len(jsonl) == 6
    pq.write_table(table, tmp_path / "llava.parquet", write_page_index=True)
    (manifest.parent / "llava.jsonl").write_text("\n".join(jsonl) + "\n")
    want, errors, _ = load(manifest.parent / "llava.jsonl")
    assert not errors
    got, errors, _ = load(tmp_path / "llava.parquet")
    assert not errors
    assert_same_batches(got, want)
    # Paths only (no bytes in the file): the images are read from the files they name, relative
    # to the file's folder.
    import pyarrow as pa

    paths = table.column("image").combine_chunks().field("path")
    structs = pa.StructArray.from_arrays([pa.nulls(len(table), pa.binary()), paths], names=["bytes", "path"])
    pq.write_table(table.set_column(1, "image", structs), manifest.parent / "paths.parquet")
    got, errors, _ = load(manifest.parent / "paths.parquet")
    assert not errors
    assert_same_batches(got, want)


def test_a_damaged_cell_or_file_is_named(dataset, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    manifest, out = dataset
    table, _ = llava_table(manifest, 6)
    images = table.column("image").combine_chunks()
    data = images.field("bytes").to_pylist()
    data[3] = data[3][:200]  # a truncated JPEG
    structs = pa.StructArray.from_arrays([pa.array(data, pa.binary()), images.field("path")], names=["bytes", "path"])
    pq.write_table(table.set_column(1, "image", structs), tmp_path / "cut.parquet", write_page_index=True)
    batches, errors, _ = load(tmp_path / "cut.parquet", on_error="skip", max_error_fraction=1.0)
    assert [e["sample_id"] for e in errors] == [table.column("id")[3].as_py()]
    assert "cut.parquet[row 3, image]" in errors[0]["reason"], errors
    assert sorted(i for b in batches for i in b["sample_ids"]) == sorted(
        x for k, x in enumerate(table.column("id").to_pylist()) if k != 3
    )
    # A file cut short is refused at open, by name.
    whole = (out / "hf" / "train-00000.parquet").read_bytes()
    (tmp_path / "short.parquet").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"short\.parquet"):
        load(tmp_path / "short.parquet")
    # A cell's page larger than max_object_bytes is refused before it is fetched.
    with pytest.raises(ValueError, match=r"\[row \d+, images\[0\]\]: its page of \d+ bytes exceeds max_object_bytes"):
        load(files(out / "hf"), max_object_bytes=1000, **with_root(manifest))
    # What is read at open (the footer, then the columns) is bounded by max_manifest_bytes before
    # it is read (the columns' bound: tests/dataset/parquet_test.cc).
    with pytest.raises(
        ValueError, match=r"train-00000.parquet: its footer says it is \d+ bytes, more than max_manifest_bytes"
    ):
        load(files(out / "hf"), max_manifest_bytes=1000, **with_root(manifest))


def test_trl_s_format_places_the_listed_images(dataset, tmp_path):
    """TRL's vision format (HuggingFaceH4/llava-instruct-mix-vsft and others): content items
    {"type": "image"} naming no image, the images in an Image() list; datasets stores every item
    with every key, null where unused."""
    import datasets

    manifest, _ = dataset
    rows, jsonl = [], []
    for line in manifest.read_text().splitlines():
        sample = json.loads(line)
        items = [i for m in sample["messages"] if isinstance(m["content"], list) for i in m["content"]]
        if any(i.get("type") == "video" for i in items):
            continue
        messages, images = [], []
        for m in sample["messages"]:
            content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            turn = []
            for item in content:
                if item["type"] == "image":
                    images.append(item["image"])
                    turn.append({"type": "image", "text": None})
                else:
                    turn.append({"type": "text", "text": item["text"]})
            messages.append({"role": m["role"], "content": turn})
        rows.append(
            {
                "id": sample["id"],
                "messages": messages,
                "images": [{"bytes": (manifest.parent / p).read_bytes(), "path": None} for p in images],
            }
        )
        named = iter(images)
        jsonl.append(
            json.dumps(
                {
                    "id": sample["id"],
                    "messages": [
                        {
                            "role": m["role"],
                            "content": [
                                {"type": "image", "image": next(named)} if i["type"] == "image" else i
                                for i in m["content"]
                            ],
                        }
                        for m in messages
                    ],
                }
            )
        )
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "messages": datasets.List(
                {
                    "role": datasets.Value("string"),
                    "content": datasets.List({"type": datasets.Value("string"), "text": datasets.Value("string")}),
                }
            ),
            "images": datasets.List(datasets.Image()),
        }
    )
    datasets.Dataset.from_list(rows, features=features).to_parquet(str(tmp_path / "trl.parquet"))
    (manifest.parent / "trl.jsonl").write_text("\n".join(jsonl) + "\n")
    want, errors, _ = load(manifest.parent / "trl.jsonl")
    assert not errors and len(jsonl) >= 18
    got, errors, _ = load(tmp_path / "trl.parquet")
    assert not errors
    assert_same_batches(got, want)


def test_openssl_s_users_work_beside_the_parquet_libraries():
    """Regression: libparquet carries its own OpenSSL, symbols exported; linked before the system's
    libcrypto, the latter's calls bound to that copy and `import hashlib` after mmfeed crashed."""
    import subprocess
    import sys

    code = (
        "import mmfeed, hashlib, ssl; assert hashlib.sha256(b'x').hexdigest().startswith('2d711642'); "
        "ssl.create_default_context(); print('ok')"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", (run.returncode, run.stderr[-2000:])


def foreign_bindings(args, env=None):
    """The symbols a library outside the pyarrow wheel binds to one of the wheel's libraries,
    other than Arrow's and Parquet's own: every binding made at load (LD_BIND_NOW), as the dynamic
    linker reports it (LD_DEBUG=bindings)."""
    import os
    import re
    import subprocess

    run = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {}), "LD_BIND_NOW": "1", "LD_DEBUG": "bindings"},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    found = set()
    for line in run.stderr.splitlines():
        m = re.search(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: \w+ symbol `([^']+)'", line)
        if m and "/pyarrow/" in m[2] and "/pyarrow/" not in m[1]:
            if not re.match(r"_Z(T[VIS])?N?K?(5arrow|7parquet)", m[3]):
                found.add((m[1].rsplit("/", 1)[-1], m[3]))
    return found


def test_nothing_outside_arrow_binds_to_its_bundled_libraries(cli):
    """libparquet exports the OpenSSL and simdjson it carries: our code and the system's libraries
    must bind to the system's copies (the link order does it: cmake/dependencies.cmake)."""
    import sys

    assert foreign_bindings([sys.executable, "-c", "import mmfeed; mmfeed.linked_libraries()"]) == set()
    assert foreign_bindings([cli, "version"]) == set()
