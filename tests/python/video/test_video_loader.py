"""Videos in the Loader (issue 20): whole samples with videos (and images beside them) from
mmfeed.Loader against transformers' own processors (video_sample_oracle.py, run in .venv-tv:
Qwen2VLProcessor, Qwen2_5_VLProcessor, Qwen3VLProcessor — also with the Qwen3.5 tokenizer and
template, issue 35 — given mmfeed's decoded frames) -
input_ids with the video tokens expanded (Qwen3-VL's timestamps included), pixel_values_videos bit
for bit, video_grid_thw, second_per_grid_ts, the images' pixel_values within 1e-6, labels, and
mrope ids equal to the models' get_rope_index; padded and packed, concurrent and serial; and bad
videos reported by name while the rest of the epoch is delivered. The videos are made here with
the ffmpeg command."""

import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import ffmpeg, make_test_video
from PIL import Image
from tiny_vl import tokenizer_of

import mmfeed
from mmfeed import _mmfeed

pytestmark = pytest.mark.skipif(
    not _mmfeed.video_libraries().startswith("libavformat"), reason="built without video (MMFEED_VIDEO=OFF)"
)

ROOT = Path(__file__).resolve().parents[3]
ORACLE_PYTHON = ROOT / ".venv-tv" / "bin" / "python"
TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
TEMPLATES = {
    "qwen2-vl": "qwen2_vl.jinja",
    "qwen2.5-vl": "qwen2_vl.jinja",
    "qwen3-vl": "qwen3_vl.jinja",
    "qwen3.5": "qwen3_5.jinja",
}
MAX_PIXELS = 200_704  # the images' budget, a multiple of 28^2 and 32^2, to keep the test small
TOLERANCE = 1e-6  # images, as the image parity tests (test_vision.py); videos are bit for bit

# name: (size, rate, seconds, codec arguments)
VIDEOS = {
    "odd.mp4": ("318x182", 25, 3, ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "12"]),
    "vp9.webm": ("320x240", 30, 2, ["-c:v", "libvpx-vp9", "-b:v", "300k", "-deadline", "realtime"]),
    "wide.mkv": ("480x200", 24, 4, ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
}


def video(name, **keys):
    return {"type": "video", "video": f"videos/{name}", **keys}


def text(t):
    return {"type": "text", "text": t}


def turn(role, content):
    return {"role": role, "content": content}


# Per model, samples of one to two videos (with the items' keys the recipe reads) and an image.
QWEN2_SAMPLES = [
    [turn("user", [video("odd.mp4"), text("What happens?")]), turn("assistant", "Colours move.")],
    [turn("user", [text("Describe"), video("vp9.webm", nframes=8)]), turn("assistant", "A test pattern.")],
    [
        turn("system", "Be brief."),
        turn(
            "user",
            [
                video("wide.mkv", fps=1.0),
                {"type": "image", "image": "photo.jpg"},
                video("odd.mp4", max_pixels=150_000),
                text("Compare."),
            ],
        ),
        turn("assistant", "The first is wider."),
        turn("user", "And the colours?"),
        turn("assistant", "Bright."),
    ],
    [
        turn("user", [video("wide.mkv", min_pixels=4096, max_pixels=20_000), text("Zähle. 数一数。")]),
        turn("assistant", "Three."),
    ],
]
QWEN3_SAMPLES = [
    [turn("user", [video("odd.mp4"), text("What happens?")]), turn("assistant", "Colours move.")],
    [turn("user", [text("Describe"), video("vp9.webm", nframes=6)]), turn("assistant", "A test pattern.")],
    [
        turn("user", [video("wide.mkv"), {"type": "image", "image": "photo.jpg"}, video("odd.mp4"), text("Compare.")]),
        turn("assistant", "The first is wider."),
    ],
    [turn("user", [video("wide.mkv", fps=4), text("Zähle. 数一数。")]), turn("assistant", "Three.")],
]
SAMPLES = {"qwen2-vl": QWEN2_SAMPLES, "qwen2.5-vl": QWEN2_SAMPLES, "qwen3-vl": QWEN3_SAMPLES, "qwen3.5": QWEN3_SAMPLES}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The videos, a photograph, each model's manifest, every video's frames as mmfeed decodes them."""
    root = tmp_path_factory.mktemp("video-loader")
    (root / "videos").mkdir()
    fps = {}
    for name, (size, rate, seconds, codec) in VIDEOS.items():
        path = root / "videos" / name
        make_test_video(path, size, rate, seconds, codec)
        raw = path.read_bytes()
        info = mmfeed.probe_video(raw)
        np.save(root / f"{name}.npy", mmfeed.decode_video(raw, list(range(info["frames"]))))
        fps[str(root / f"{name}.npy")] = info["fps"]
    import skimage.data

    Image.fromarray(skimage.data.astronaut()).resize((300, 260)).save(root / "photo.jpg", quality=90)
    for model, samples in SAMPLES.items():
        lines = [json.dumps({"id": f"{model}-{i}", "messages": m}, ensure_ascii=False) for i, m in enumerate(samples)]
        (root / f"{model}.jsonl").write_text("\n".join(lines) + "\n")
    return SimpleNamespace(root=root, fps=fps)


def oracle_messages(messages, root):
    """The messages as the oracle reads them: each video its .npy of frames, each image its path."""
    out = []
    for m in messages:
        if isinstance(m["content"], list):
            content = []
            for c in m["content"]:
                if c["type"] == "video":
                    c = {**c, "video": str(root / (Path(c["video"]).name + ".npy"))}
                elif c["type"] == "image":
                    c = {**c, "image": str(root / c["image"])}
                content.append(c)
            m = {**m, "content": content}
        out.append(m)
    return out


@pytest.fixture(scope="module")
def reference(data):
    """transformers' processors on every sample of every model, run once in the torchvision environment."""
    if not ORACLE_PYTHON.exists():
        pytest.fail(f"{ORACLE_PYTHON} is missing: scripts/setup.sh makes the torchvision environment")
    jobs, keys = [], []
    for model, samples in SAMPLES.items():
        for i, messages in enumerate(samples):
            jobs.append(
                {
                    "model": model,
                    "template": str(ROOT / "src" / "text" / "templates" / TEMPLATES[model]),
                    "tokenizer": str(tokenizer_of(model)),
                    "messages": oracle_messages(messages, data.root),
                    "fps": data.fps,
                    "max_pixels": MAX_PIXELS,
                }
            )
            keys.append(f"{model}-{i}")
    (data.root / "jobs.json").write_text(json.dumps(jobs))
    out = data.root / "oracle"
    out.mkdir()
    run = subprocess.run(
        [
            str(ORACLE_PYTHON),
            str(Path(__file__).with_name("video_sample_oracle.py")),
            str(data.root / "jobs.json"),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=Path(__file__).parent,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    refs = {}
    for i, key in enumerate(keys):
        assert not (out / f"{i}.err").exists(), f"{key}: " + (out / f"{i}.err").read_text()
        refs[key] = dict(np.load(out / f"{i}.npz"))
    return refs


def labels_of(ids: np.ndarray, model: str) -> np.ndarray:
    """The Qwen recipe's labels: each assistant reply, its <|im_end|> and the newline after it."""
    tok = mmfeed.Tokenizer.from_file(tokenizer_of(model))
    IM_START, IM_END = tok.token_to_id("<|im_start|>"), tok.token_to_id("<|im_end|>")  # noqa: N806
    ASSISTANT, NEWLINE = tok.encode("assistant\n")  # noqa: N806
    labels = np.full(len(ids), -100)
    i = 0
    while i + 2 < len(ids):
        if ids[i] == IM_START and ids[i + 1] == ASSISTANT and ids[i + 2] == NEWLINE:
            j = i + 3
            while ids[j] != IM_END:
                j += 1
            end = j + 2 if j + 1 < len(ids) and ids[j + 1] == NEWLINE else j + 1
            labels[i + 3 : end] = ids[i + 3 : end]
            i = end
        else:
            i += 1
    return labels


def rope_index(model: str, ref: dict) -> np.ndarray:
    """The model's own get_rope_index for the reference sample (positions [3, L])."""
    if model == "qwen3-vl":
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel as cls

        vision = {}
    elif model == "qwen3.5":
        from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5Model as cls

        vision = {}
    elif model == "qwen2.5-vl":
        from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel as cls

        vision = {"tokens_per_second": 2}
    else:
        from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel as cls

        vision = {}
    fake = SimpleNamespace(config=SimpleNamespace(vision_config=SimpleNamespace(spatial_merge_size=2, **vision)))
    fake.get_vision_position_ids = lambda *a, **k: cls.get_vision_position_ids(fake, *a, **k)
    kwargs = {}
    if len(ref["image_grid_thw"]):
        kwargs["image_grid_thw"] = torch.from_numpy(ref["image_grid_thw"])
    if len(ref["video_grid_thw"]):
        kwargs["video_grid_thw"] = torch.from_numpy(ref["video_grid_thw"])
    if "second_per_grid_ts" in ref:
        kwargs["second_per_grid_ts"] = torch.from_numpy(ref["second_per_grid_ts"])
    positions, _ = cls.get_rope_index(
        fake, torch.from_numpy(ref["input_ids"])[None], torch.from_numpy(ref["mm_token_type_ids"])[None].int(), **kwargs
    )
    return positions[:, 0].numpy()


def load(data, model, **options):
    options = {"shuffle": False, **options}
    with mmfeed.Loader(
        data.root / f"{model}.jsonl",
        tokenizer=tokenizer_of(model),
        model=model,
        max_pixels=MAX_PIXELS,
        mrope=True,
        tensors="np",
        **options,
    ) as loader:
        return [dict(b) for b in loader], loader.errors()


@pytest.mark.parametrize("model", list(SAMPLES))
def test_samples_equal_the_transformers_processor(data, reference, model):
    batches, errors = load(data, model, batch_size=1)
    assert errors == []
    assert [b["sample_ids"][0] for b in batches] == [f"{model}-{i}" for i in range(len(SAMPLES[model]))]
    for b in batches:
        ref = reference[b["sample_ids"][0]]
        np.testing.assert_array_equal(b["input_ids"][0], ref["input_ids"])
        np.testing.assert_array_equal(b["video_grid_thw"], ref["video_grid_thw"])
        assert b["pixel_values_videos"].shape == ref["pixel_values_videos"].shape
        np.testing.assert_array_equal(b["pixel_values_videos"], ref["pixel_values_videos"])
        if len(ref["image_grid_thw"]) == 0:  # videos alone: no image tensors, as the processor
            assert "pixel_values" not in b and "image_grid_thw" not in b
        else:
            np.testing.assert_array_equal(b["image_grid_thw"], ref["image_grid_thw"])
            assert (
                np.abs(b["pixel_values"] - ref["pixel_values"].reshape(b["pixel_values"].shape)).max(initial=0.0)
                <= TOLERANCE
            )
        np.testing.assert_array_equal(b["labels"][0], labels_of(ref["input_ids"], model))
        np.testing.assert_array_equal(b["position_ids"][:, 0], rope_index(model, ref))
        if model == "qwen2.5-vl":
            np.testing.assert_array_equal(b["second_per_grid_ts"], ref["second_per_grid_ts"].astype(np.float32))
        else:
            assert "second_per_grid_ts" not in b


def test_a_batch_without_videos_has_no_video_tensors(data):
    manifest = data.root / "images-only.jsonl"
    manifest.write_text(
        json.dumps(
            {
                "id": "p",
                "messages": [
                    turn("user", [{"type": "image", "image": "photo.jpg"}]),
                    turn("assistant", "An astronaut."),
                ],
            }
        )
        + "\n"
    )
    with mmfeed.Loader(manifest, tokenizer=TOKENIZER, model="qwen2.5-vl", tensors="np") as loader:
        (b,) = list(loader)
    assert "pixel_values_videos" not in b and "video_grid_thw" not in b and "second_per_grid_ts" not in b


@pytest.mark.parametrize("model", ["qwen2.5-vl", "qwen3-vl"])
def test_padded_packed_serial_and_worker_counts_agree(data, model):
    """A video's rows and tokens are the same whichever way the batch is made."""
    single, _ = load(data, model, batch_size=1)
    by_id = {b["sample_ids"][0]: b for b in single}
    padded, _ = load(data, model, batch_size=3, workers=2)
    assert len(padded[0]["sample_ids"]) == 3
    for mode, workers in (("concurrent", 1), ("concurrent", 3), ("serial", 1)):
        again, _ = load(data, model, batch_size=3, workers=workers, mode=mode)
        for a, b in zip(padded, again):
            for key in a:
                if key != "buffer_address":
                    np.testing.assert_array_equal(a[key], b[key], err_msg=f"{mode} x{workers}: {key}")
    rows = padded[0]["pixel_values_videos"]
    expected = np.concatenate([by_id[s]["pixel_values_videos"] for s in padded[0]["sample_ids"]])
    np.testing.assert_array_equal(rows, expected)
    packed, errors = load(data, model, token_budget=8192, pack_window=4)
    assert errors == []
    for b in packed:
        ids = b["sample_ids"]
        np.testing.assert_array_equal(
            b["pixel_values_videos"], np.concatenate([by_id[s]["pixel_values_videos"] for s in ids])
        )
        np.testing.assert_array_equal(b["video_grid_thw"], np.concatenate([by_id[s]["video_grid_thw"] for s in ids]))
        np.testing.assert_array_equal(
            b["input_ids"][0, : b["cu_seq_lens_q"][len(ids)]], np.concatenate([by_id[s]["input_ids"][0] for s in ids])
        )
    # mm_token_type_ids, as the processors return it: 2 at video pads, 1 at image pads
    for b in padded + packed:
        np.testing.assert_array_equal(
            b["mm_token_type_ids"], np.where(b["input_ids"] == 151656, 2, np.where(b["input_ids"] == 151655, 1, 0))
        )
    assert any((b["mm_token_type_ids"] == 2).any() for b in padded)


@pytest.mark.parametrize("packing", [{}, {"token_budget": 4096, "pack_window": 4}], ids=["padded", "packed"])
def test_a_run_resumed_mid_epoch_delivers_the_same_video_batches(data, packing):
    options = dict(batch_size=1, epochs=2, seed=5, shuffle=True, **packing)
    whole, _ = load(data, "qwen2.5-vl", **options)
    taken = len(whole) // 2  # inside the first epoch's last window, or the second epoch
    assert taken >= 1
    with mmfeed.Loader(
        data.root / "qwen2.5-vl.jsonl",
        tokenizer=TOKENIZER,
        model="qwen2.5-vl",
        max_pixels=MAX_PIXELS,
        mrope=True,
        tensors="np",
        workers=2,
        **options,
    ) as loader:
        for _ in range(taken):
            next(loader)
        state = loader.state_dict()
    resumed = mmfeed.Loader(
        data.root / "qwen2.5-vl.jsonl",
        tokenizer=TOKENIZER,
        model="qwen2.5-vl",
        max_pixels=MAX_PIXELS,
        mrope=True,
        tensors="np",
        workers=3,
        **options,
    )
    resumed.load_state_dict(state)
    with resumed:
        rest = [dict(b) for b in resumed]
    assert [b["sample_ids"] for b in rest] == [b["sample_ids"] for b in whole[taken:]]
    for a, b in zip(whole[taken:], rest):
        for key in a.keys() - {"buffer_address", "index"}:  # index: counted from the resumed run's start
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def damaged(data) -> dict:
    """Videos no recipe can use, each for its reason."""
    odd = (data.root / "videos" / "odd.mp4").read_bytes()
    bad = data.root / "bad"
    bad.mkdir(exist_ok=True)
    files = {
        "truncated.mp4": odd[: len(odd) // 3],
        "garbage.mp4": bytes(range(256)) * 40,
        "empty.mp4": b"",
    }
    for name, raw in files.items():
        (bad / name).write_bytes(raw)
    # Cut with its index in front (faststart): the container declares more frames than it holds.
    ffmpeg("-i", data.root / "videos" / "odd.mp4", "-c", "copy", "-movflags", "+faststart", bad / "faststart.mp4")
    whole = (bad / "faststart.mp4").read_bytes()
    (bad / "cut.mp4").write_bytes(whole[: len(whole) * 3 // 5])
    # One frame: too short for Qwen3-VL's sampling, and for the 8 frames qwen-vl-utils is asked for.
    make_test_video(bad / "one-frame.mp4", "64x36", 30, 1 / 30, ["-c:v", "libx264"])
    # An aspect ratio over 200.
    make_test_video(bad / "thin.avi", "1200x4", 10, 1, ["-c:v", "mpeg4"])
    # A codec id no decoder knows (Matroska names it in text).
    mkv = (data.root / "videos" / "wide.mkv").read_bytes()
    assert b"V_MPEG4/ISO/AVC" in mkv
    (bad / "unknown-codec.mkv").write_bytes(mkv.replace(b"V_MPEG4/ISO/AVC", b"V_MMFEED/NOPE/X"))
    # No video stream at all.
    ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "pcm_s16le", bad / "audio.wav")
    return files


@pytest.mark.parametrize("model", ["qwen2-vl", "qwen3-vl"])
def test_bad_videos_are_reported_by_name_and_the_rest_delivered(data, model):
    damaged(data)
    cases = {
        "truncated": (video("../bad/truncated.mp4"), "video"),
        "cut": (video("../bad/cut.mp4"), "video"),
        "garbage": (video("../bad/garbage.mp4"), "video"),
        "empty": (video("../bad/empty.mp4"), "video"),
        "missing": (video("../bad/nowhere.mp4"), "fetch"),
        # Qwen3-VL repeats frames to meet an nframes (as its processor does), so there the default sampling.
        "too-few-frames": (video("../bad/one-frame.mp4", **({} if model == "qwen3-vl" else {"nframes": 8})), "video"),
        "thin": (video("../bad/thin.avi"), "video"),
        "no-video-stream": (video("../bad/audio.wav"), "video"),
        "unknown-codec": (video("../bad/unknown-codec.mkv"), "video"),
        "not-a-number": ({"type": "video", "video": "videos/odd.mp4", "fps": "fast"}, "manifest"),
        "fixed-size": ({"type": "video", "video": "videos/odd.mp4", "resized_height": 56}, "manifest"),
    }
    good = [f"good-{i}" for i in range(3)]
    lines = [
        json.dumps({"id": g, "messages": [turn("user", [video("odd.mp4"), text("?")]), turn("assistant", "!")]})
        for g in good
    ]
    for sid, (item, _) in cases.items():
        lines.append(json.dumps({"id": sid, "messages": [turn("user", [item, text("?")]), turn("assistant", "!")]}))
    manifest = data.root / f"bad-{model}.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    with mmfeed.Loader(
        manifest, tokenizer=TOKENIZER, model=model, batch_size=2, shuffle=False, tensors="np", max_error_fraction=1.0
    ) as loader:
        delivered = [s for b in loader for s in b["sample_ids"]]
        errors = {e["sample_id"]: e for e in loader.errors()}
    assert delivered == good
    assert set(errors) == set(cases)
    for sid, (_, stage) in cases.items():
        assert errors[sid]["stage"] == stage, errors[sid]
    for sid in ("truncated", "cut", "garbage", "empty", "thin", "no-video-stream", "unknown-codec", "too-few-frames"):
        assert "bad/" in errors[sid]["reason"], errors[sid]  # the video named
    assert "truncated: the container declares 75 frames, the file holds" in errors["cut"]["reason"]
    assert "aspect ratio" in errors["thin"]["reason"]
    assert "no video stream" in errors["no-video-stream"]["reason"]
    assert (
        "no decoder for codec" in errors["unknown-codec"]["reason"] and errors["unknown-codec"]["code"] == "unsupported"
    )
    assert "fps must be a number" in errors["not-a-number"]["reason"]
    assert "resized_height" in errors["fixed-size"]["reason"]


def test_a_video_over_the_byte_budget_is_refused_by_name(data):
    manifest = data.root / "budget.jsonl"
    manifest.write_text(
        json.dumps({"id": "big", "messages": [turn("user", [video("wide.mkv")]), turn("assistant", "!")]}) + "\n"
    )
    with mmfeed.Loader(
        manifest,
        tokenizer=TOKENIZER,
        model="qwen3-vl",
        tensors="np",
        max_buffered_bytes=1 << 20,
        max_error_fraction=1.0,
    ) as loader:
        with pytest.raises(ValueError, match="every sample"):
            list(loader)
        (error,) = loader.errors()
    assert error["stage"] == "video"
    assert "1 video needs" in error["reason"] and "max_buffered_bytes (1048576)" in error["reason"]


@pytest.mark.parametrize("model", list(SAMPLES))
def test_the_demo_sets_videos_load_with_every_model(tmp_path, model):
    import datagen

    datagen.generate(tmp_path, samples=2, seed=20, max_megapixels=0.3, workers=2, videos=5)
    lines = (tmp_path / "videos.jsonl").read_text().splitlines()
    with mmfeed.Loader(
        tmp_path / "videos.jsonl", tokenizer=TOKENIZER, model=model, batch_size=2, tensors="np", shuffle=False
    ) as loader:
        batches = list(loader)
        assert loader.errors() == []
    assert sum(len(b["sample_ids"]) for b in batches) == len(lines) == 5
    for b in batches:
        assert len(b["video_grid_thw"]) == len(b["sample_ids"])
        assert len(b["pixel_values_videos"]) == int(np.prod(b["video_grid_thw"], axis=1).sum())
        assert (b["input_ids"] == 151656).sum() == int(np.prod(b["video_grid_thw"], axis=1).sum()) // 4


def test_the_cli_shows_and_counts_videos(cli, data):
    manifest = data.root / "qwen3-vl.jsonl"
    shown = subprocess.run(
        [cli, "inspect", manifest, "--tokenizer", TOKENIZER, "--model", "qwen3-vl", "--batch-size", "2"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "pixel_values_videos float32" in shown and "video_grid_thw" in shown
    assert re.search(r"<\|vision_start\|><0\.3 seconds><\|vision_start\|><\|video_pad\|>x\d+<\|vision_end\|>", shown)
    run = subprocess.run(
        [cli, "run", "--manifest", manifest, "--tokenizer", TOKENIZER, "--model", "qwen3-vl", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(run.stdout)
    with mmfeed.Loader(manifest, tokenizer=TOKENIZER, model="qwen3-vl", tensors="np") as loader:
        grids = np.concatenate([b["video_grid_thw"] for b in loader])
    assert summary["videos"] == len(grids) == 5 and summary["video_frames"] == 2 * grids[:, 0].sum()


@pytest.mark.parametrize("model", list(SAMPLES))
def test_uint8_pixels_normalize_to_the_float32_and_bfloat16_batches(data, model):
    """pixels="uint8" carries an eighth of the images' bytes and a quarter of the videos';
    mmfeed.normalize_pixels turns them into pixels="float32"'s rows and pixels="bfloat16"'s, bit for
    bit, from numpy arrays and from torch tensors, and leaves every other tensor as it is."""
    f32, _ = load(data, model, batch_size=2)
    bf16, _ = load(data, model, batch_size=2, pixels="bfloat16")
    u8, _ = load(data, model, batch_size=2, pixels="uint8")
    for a, b, c in zip(f32, bf16, u8):
        assert a.keys() == b.keys() == c.keys()
        if "pixel_values" in a:  # a batch of videos alone has none
            assert c["pixel_values"].dtype == np.uint8 and b["pixel_values"].dtype == np.uint16
            assert c["pixel_values"].nbytes * 8 == a["pixel_values"].nbytes
        if "pixel_values_videos" in a:
            assert c["pixel_values_videos"].nbytes * 4 == a["pixel_values_videos"].nbytes
        as_f32 = mmfeed.normalize_pixels(c, model=model)
        as_bf16 = mmfeed.normalize_pixels(c, model=model, dtype="bfloat16")
        torch_c = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in c.items()}
        torch_f32 = mmfeed.normalize_pixels(torch_c, model=model)
        torch_bf16 = mmfeed.normalize_pixels(torch_c, model=model, dtype=torch.bfloat16)
        for key in a:
            if key == "buffer_address":
                continue
            if key.startswith("pixel_values"):
                np.testing.assert_array_equal(as_f32[key], a[key], err_msg=key)
                np.testing.assert_array_equal(torch_f32[key].numpy(), a[key], err_msg=key)
                np.testing.assert_array_equal(as_bf16[key], b[key], err_msg=key)
                assert torch_bf16[key].dtype == torch.bfloat16
                np.testing.assert_array_equal(torch_bf16[key].view(torch.int16).numpy().view(np.uint16), b[key])
            else:
                np.testing.assert_array_equal(c[key], a[key], err_msg=key)
                np.testing.assert_array_equal(b[key], a[key], err_msg=key)
    with pytest.raises(TypeError, match="uint8 rows"):
        mmfeed.normalize_pixels(f32[0], model=model)
    other = "qwen2-vl" if model in ("qwen3-vl", "qwen3.5") else "qwen3-vl"  # patch 14 against 16: another row width
    with pytest.raises(ValueError, match=f"with model='{other}'"):
        mmfeed.normalize_pixels(u8[0], model=other)
    with pytest.raises(ValueError, match="dtype must be float32 or bfloat16"):
        mmfeed.normalize_pixels(u8[0], model=model, dtype=torch.float16)


def test_bfloat16_pixels_are_torch_bfloat16_tensors(data):
    with mmfeed.Loader(
        data.root / "qwen3-vl.jsonl",
        tokenizer=TOKENIZER,
        model="qwen3-vl",
        max_pixels=MAX_PIXELS,
        pixels="bfloat16",
        batch_size=4,
    ) as loader:
        b = next(iter(loader))
    assert b["pixel_values"].dtype == torch.bfloat16 and b["pixel_values_videos"].dtype == torch.bfloat16
