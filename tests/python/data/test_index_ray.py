"""Issue 51: a manifest's index built on a Ray cluster (mmfeed.ray.build_index, `mmfeed index --ray`):
the text cut into byte ranges of at least 1 MiB, each described by a Ray task that reads its range
alone, then taken in order here: the index is the bytes `mmfeed index` writes on one machine (a
local manifest, one over HTTP, text tokens counted with a tokenizer sent to the tasks), and its
summary names the same bad samples and unreadable media at their own lines. Shard and Parquet
sets get an index a file, a task each. What cannot be indexed is refused by name."""

import json
import shutil
import subprocess

import datagen
import pytest
from conftest import ROOT

ray = pytest.importorskip("ray")
import mmfeed.ray  # noqa: E402  (needs Ray)

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    """Over 4.5 MB of JSONL over 12 generated samples' images (a byte-order mark, blank lines, a sample
    that is no conversation, an image missing far into the text): four parts of 1 MiB or more."""
    out = tmp_path_factory.mktemp("index-ray")
    datagen.generate(out / "gen", samples=12, seed=4, max_megapixels=0.2, workers=2)
    lines = [line for line in (out / "gen" / "manifest.jsonl").read_text().splitlines() if line.strip()]
    text, n = [], 0
    while sum(map(len, text)) < 4_500_000:
        text.append(lines[n % len(lines)])
        n += 1
    text.insert(3, "")
    text.insert(len(text) // 3, '{"id": "not-a-conversation"}')
    missing = next(i for i in range(3 * len(text) // 4, len(text)) if '"image": "' in text[i])
    ref = text[missing].split('"image": "')[1].split('"')[0]
    text[missing] = text[missing].replace(ref, "images/missing.jpg", 1)
    path = out / "gen" / "big.jsonl"
    path.write_text("\ufeff" + "\n\n".join(text[:10]) + "\n" + "\n".join(text[10:]) + "\n", encoding="utf-8")
    return path


def index(cli, *args):
    proc = subprocess.run([str(cli), "index", "--json", *map(str, args)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_parts_make_the_index_one_machine_makes(cli, local_ray, manifest, tmp_path):
    whole = index(cli, "--out", tmp_path / "whole.mmidx", manifest)
    assert whole["bad_count"] == 1 and whole["media_unreadable"] == 1
    assert "missing.jpg" in whole["unreadable"][0]
    got = mmfeed.ray.build_index(str(manifest), out=str(tmp_path / "ray.mmidx"), parts=64)
    assert got["parts"] == (manifest.stat().st_size - 3) // 2**20 >= 4  # parts of at least 1 MiB
    assert (tmp_path / "ray.mmidx").read_bytes() == (tmp_path / "whole.mmidx").read_bytes()
    for key in ("samples", "images", "bad", "bad_count", "unreadable", "media_unreadable", "text_bytes"):
        assert got[key] == whole[key], key
    # Beside the manifest by default, as `mmfeed index` writes it; a Loader opens from it.
    beside = mmfeed.ray.build_index(str(manifest), parts=2)
    assert beside["index"] == f"{manifest}.mmidx" and beside["parts"] == 2
    assert (tmp_path / "whole.mmidx").read_bytes() == manifest.with_name(manifest.name + ".mmidx").read_bytes()


def test_text_tokens_are_counted_by_the_tokenizer_sent_to_the_tasks(cli, local_ray, manifest, tmp_path):
    whole = index(cli, "--out", tmp_path / "whole.mmidx", "--no-media", "--tokenizer", TOKENIZER, manifest)
    got = mmfeed.ray.build_index(
        str(manifest), out=str(tmp_path / "ray.mmidx"), probe_media=False, tokenizer=str(TOKENIZER), parts=3
    )
    assert got["text_tokens"] == whole["text_tokens"] > 0 and got["media_not_probed"] == whole["media_not_probed"]
    assert (tmp_path / "ray.mmidx").read_bytes() == (tmp_path / "whole.mmidx").read_bytes()


def test_an_http_manifest_is_described_by_ranged_reads(cli, local_ray, manifest, nginx, object_dir, tmp_path):
    shutil.copytree(manifest.parent, object_dir / "index-ray", dirs_exist_ok=True)
    source = nginx.url("ok", f"index-ray/{manifest.name}")
    whole = index(cli, "--out", tmp_path / "whole.mmidx", source)
    got = mmfeed.ray.build_index(source, out=str(tmp_path / "ray.mmidx"), parts=4)
    assert got["parts"] == 4 and got["images"] == whole["images"] > 0
    assert (tmp_path / "ray.mmidx").read_bytes() == (tmp_path / "whole.mmidx").read_bytes()


def test_the_cli_builds_on_ray(cli, manifest, tmp_path):
    whole = index(cli, "--out", tmp_path / "whole.mmidx", manifest)
    got = index(cli, "--ray", "local", "--ray-parts", 3, "--out", tmp_path / "ray.mmidx", manifest)
    assert got["parts"] == 3 and got["samples"] == whole["samples"]
    assert (tmp_path / "ray.mmidx").read_bytes() == (tmp_path / "whole.mmidx").read_bytes()


def test_shard_and_parquet_sets_get_an_index_a_file_a_task(cli, local_ray, manifest, tmp_path):
    # A set's files are indexed a Ray task each: written beside each file by its task, or sent back
    # into `out` here; the indexes are `mmfeed index`'s, byte for byte.
    shutil.copytree(manifest.parent, tmp_path / "src")
    small = tmp_path / "src" / "small.jsonl"
    lines = [line for line in manifest.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    small.write_text("\n".join(lines[:30]) + "\n")
    datagen.write_shards(small, tmp_path / "wds", per_shard=10)
    datagen.write_parquet(small, tmp_path / "pq", per_file=10)
    shards, files = str(tmp_path / "wds" / "shard-{000..002}.tar"), str(tmp_path / "pq" / "train-*.parquet")
    for source in (shards, files):
        index(cli, "--out", tmp_path / "one", source)
        got = mmfeed.ray.build_index(source, out=str(tmp_path / "ray"))
        assert got["files"] == got["parts"] == 3 and got["samples"] == 30 and got["shards_indexed"] == 3, got
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert len(names) == 6 and names == sorted(p.name for p in (tmp_path / "ray").iterdir())
    for name in names:
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
    beside = mmfeed.ray.build_index(shards)  # each task writes beside its shard
    assert beside["shards_indexed"] == 3 and beside["kind"] == "shards"
    for i in range(3):
        name = f"shard-00{i}.tar.idx"
        assert (tmp_path / "wds" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()


def test_what_cannot_be_indexed_is_refused_by_name(local_ray, tmp_path):
    gz = tmp_path / "train.jsonl.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00rest")
    with pytest.raises(ValueError, match="compressed"):
        mmfeed.ray.build_index(str(gz))
    with pytest.raises(ValueError, match="none-.*.tar"):
        mmfeed.ray.build_index(str(tmp_path / "none-{0..2}.tar"))
    with pytest.raises(ValueError, match="none.jsonl"):
        mmfeed.ray.build_index(str(tmp_path / "none.jsonl"))
