"""The demo data set generator: deterministic, well-formed, every promised encoding real."""

import hashlib
import json
import subprocess

import datagen
import pytest
from PIL import Image, ImageOps


def tree_digest(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "dataset.json":
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    summary = datagen.generate(out, samples=12, seed=3, max_megapixels=1.5, workers=2)
    return out, summary


def test_same_arguments_write_identical_files(small_set, tmp_path):
    out, _ = small_set
    datagen.generate(tmp_path, samples=12, seed=3, max_megapixels=1.5, workers=1)
    assert tree_digest(tmp_path) == tree_digest(out)


def test_another_seed_writes_another_set(small_set, tmp_path):
    out, _ = small_set
    datagen.generate(tmp_path, samples=12, seed=4, max_megapixels=1.5, workers=2)
    assert tree_digest(tmp_path) != tree_digest(out)


def test_manifest_lines_are_conversations_over_existing_images(small_set):
    out, summary = small_set
    lines = (out / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == summary["samples"] == 12
    ids, images_seen = set(), 0
    for line in lines:
        sample = json.loads(line)
        assert set(sample) == {"id", "messages"}
        ids.add(sample["id"])
        roles = [m["role"] for m in sample["messages"]]
        if roles[0] == "system":
            roles = roles[1:]
        assert roles == ["user", "assistant"] * (len(roles) // 2) and 1 <= len(roles) // 2 <= 4
        n_images = 0
        for m in sample["messages"]:
            for item in m["content"]:
                assert item["type"] in ("text", "image")
                if item["type"] == "image":
                    assert m["role"] == "user"
                    with Image.open(out / item["image"]) as im:
                        im.load()
                    n_images += 1
                else:
                    assert item["text"]
        assert 1 <= n_images <= 3
        images_seen += n_images
    assert len(ids) == 12
    assert images_seen == summary["images"]


def test_sizes_stay_within_the_requested_megapixels(small_set):
    out, summary = small_set
    info = json.loads((out / "dataset.json").read_text())
    for rec in info["images"]:
        assert 0.18 <= rec["width"] * rec["height"] / 1e6 <= 1.5 * 1.01, rec
        assert hashlib.sha256((out / rec["path"]).read_bytes()).hexdigest() == rec["sha256"]
    assert summary["megapixels"]["max"] <= 1.52


EXPECTED_MODE = {
    "jpeg-baseline-420": "RGB",
    "jpeg-baseline-444": "RGB",
    "jpeg-progressive-420": "RGB",
    "jpeg-progressive-444": "RGB",
    "jpeg-gray": "L",
    "jpeg-cmyk": "CMYK",
    "jpeg-exif-rotated": "RGB",
    "png-rgb": "RGB",
    "png-rgba": "RGBA",
    "png-gray": "L",
    "png-gray16": "I;16",
    "png-palette": "P",
    "png-palette-alpha": "P",
    "webp-lossy": "RGB",
    "webp-lossless": "RGB",
    "webp-alpha": "RGBA",
}


@pytest.mark.parametrize("kind", sorted(datagen.KINDS))
def test_every_encoding_is_what_it_claims(kind, tmp_path):
    assert set(EXPECTED_MODE) == set(datagen.KINDS)
    sources = datagen.source_photos()
    spec = datagen.plan_image(7, 11, sources, max_megapixels=0.5, kind=kind)
    path = tmp_path / f"x.{spec.ext}"
    path.write_bytes(datagen.encode_image(spec, 11))
    with Image.open(path) as im:
        im.load()
        assert im.mode == EXPECTED_MODE[kind]
        assert im.format == {"jpg": "JPEG", "png": "PNG", "webp": "WEBP"}[spec.ext]
        if kind.startswith("jpeg-progressive"):
            assert im.info.get("progressive") or im.info.get("progression")
        if kind.endswith("444") and kind.startswith("jpeg"):
            assert [l[1:3] for l in im.layer] == [(1, 1)] * 3
        if kind.endswith("420") and kind.startswith("jpeg"):
            assert im.layer[0][1:3] == (2, 2)
        if kind == "png-palette-alpha":
            assert "transparency" in im.info
        if kind in ("png-rgba", "webp-alpha"):
            lo, hi = im.getchannel("A").getextrema()
            assert lo == 0 and hi == 255
        if kind == "jpeg-exif-rotated":
            orientation = im.getexif()[0x0112]
            assert orientation == spec.options["orientation"]
            upright = ImageOps.exif_transpose(im)
            assert upright.size == spec.size
        else:
            assert im.size == spec.size


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown image kind 'tiff'"):
        datagen.plan_image(0, 0, datagen.source_photos(), 1.0, kind="tiff")


def test_existing_set_is_reused_and_a_damaged_one_rebuilt(small_set, tmp_path):
    datagen.generate(tmp_path, samples=3, seed=5, max_megapixels=0.5, workers=1)
    assert datagen.generate(tmp_path, samples=3, seed=5, max_megapixels=0.5)["reused"] is True
    victim = next((tmp_path / "images").iterdir())
    victim.write_bytes(b"")
    assert datagen.generate(tmp_path, samples=3, seed=5, max_megapixels=0.5)["reused"] is False
    assert victim.stat().st_size > 0


def test_cli_writes_the_set_and_prints_a_json_summary(cli, tmp_path):
    run = subprocess.run(
        [cli, "make-dataset", "--out", tmp_path, "--samples", "2", "--seed", "1", "--max-megapixels", "0.4", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(run.stdout)
    assert summary["samples"] == 2 and summary["images"] >= 2
    assert (tmp_path / "manifest.jsonl").is_file()


def test_cli_rejects_bad_arguments_with_a_message(cli, tmp_path):
    run = subprocess.run([cli, "make-dataset", "--out", tmp_path, "--samples", "0"], capture_output=True, text=True)
    assert run.returncode == 1
    assert "--samples must be positive" in run.stderr


@pytest.fixture(scope="module")
def video_set(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-videos")
    summary = datagen.generate(out, samples=3, seed=8, max_megapixels=0.4, workers=2, videos=4)
    return out, summary


def test_videos_are_deterministic_and_reused(video_set, tmp_path):
    out, summary = video_set
    assert summary["videos"]["count"] == 4
    datagen.generate(tmp_path, samples=3, seed=8, max_megapixels=0.4, workers=1, videos=4)
    assert tree_digest(tmp_path) == tree_digest(out)
    assert datagen.generate(tmp_path, samples=3, seed=8, max_megapixels=0.4, videos=4)["reused"] is True
    # A set with videos serves a caller that asks for none (the benchmark); not one that asks for more.
    assert datagen.generate(tmp_path, samples=3, seed=8, max_megapixels=0.4)["reused"] is True
    assert datagen.generate(tmp_path, samples=3, seed=8, max_megapixels=0.4, videos=5)["reused"] is False


def test_video_conversations_name_clips_of_the_planned_size(video_set):
    import av

    out, _ = video_set
    info = json.loads((out / "dataset.json").read_text())
    by_path = {rec["path"]: rec for rec in info["videos"]}
    lines = [json.loads(line) for line in (out / "videos.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [s["id"] for s in lines] == [f"video-{i:06d}" for i in range(4)]
    for sample in lines:
        items = [c for m in sample["messages"] if isinstance(m["content"], list) for c in m["content"]]
        (video,) = [c for c in items if c["type"] == "video"]
        rec = by_path[video["video"]]
        assert hashlib.sha256((out / rec["path"]).read_bytes()).hexdigest() == rec["sha256"]
        with av.open(str(out / rec["path"])) as container:
            stream = container.streams.video[0]
            assert (stream.codec_context.width, stream.codec_context.height) == (rec["width"], rec["height"])
            assert stream.codec_context.name == rec["kind"].split("-")[0]
            frames = sum(1 for _ in container.decode(video=0))
        assert frames == round(rec["fps"] * rec["seconds"]), rec
        for image in (c["image"] for c in items if c["type"] == "image"):
            assert (out / image).is_file()
