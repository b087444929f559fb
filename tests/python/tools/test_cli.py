import os
import subprocess

import pytest

import mmfeed


def test_version_lists_the_native_libraries(cli):
    out = subprocess.run([cli, "version"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == f"mmfeed {mmfeed.__version__}"
    for lib in mmfeed.linked_libraries():
        assert lib["name"] in out


def test_unknown_command_fails_with_usage(cli):
    run = subprocess.run([cli, "frobnicate"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "unknown command 'frobnicate'" in run.stderr
    assert "usage: mmfeed" in run.stderr


def test_installed_cli_is_on_the_venv_path():
    import shutil
    import sys
    from pathlib import Path

    found = shutil.which("mmfeed", path=str(Path(sys.executable).parent))
    assert found, "pip install should put the mmfeed CLI next to the venv's python"
    out = subprocess.run([found, "version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("mmfeed ")


@pytest.mark.parametrize(
    "command, script", [("make-dataset", "tests/support/datagen.py"), ("bench", "bench/pipeline.py")]
)
def test_development_commands_without_a_checkout_say_what_they_need(cli, tmp_path, command, script):
    # As from a wheel built from an sdist: the source tree the CLI was built from is gone.
    env = dict(os.environ, MMFEED_SOURCE_DIR=str(tmp_path))
    run = subprocess.run([cli, command, "--out", tmp_path / "out"], capture_output=True, text=True, env=env)
    assert run.returncode == 127
    assert run.stderr.startswith(f"mmfeed {command}: {script} not found in {tmp_path}: ")
    assert "MMFEED_SOURCE_DIR" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()


def test_run_on_ray_delivers_what_run_does(cli, tmp_path):
    # Issue 21: mmfeed run --ray local runs mmfeed.ray.Loader (2 actors on a Ray instance started
    # for the run) over the options the CLI parsed: the same batches, tokens, images and errors.
    import json

    import datagen
    from conftest import ROOT, copy_with_damaged_image

    datagen.generate(tmp_path / "clean", samples=13, seed=2, max_megapixels=0.3, workers=2)
    manifest, victim = copy_with_damaged_image(
        tmp_path / "clean" / "manifest.jsonl", tmp_path / "damaged", line=4, damage=lambda b: b[: len(b) // 3]
    )
    flags = [
        manifest,
        "--tokenizer",
        ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json",
        "--batch-size",
        3,
        "--max-pixels",
        60000,
        "--epochs",
        2,
        "--workers",
        1,
        "--json",
    ]
    local = json.loads(
        subprocess.run([cli, "run", *map(str, flags)], capture_output=True, text=True, check=True).stdout
    )
    run = subprocess.run(
        [
            cli,
            "run",
            *map(str, flags),
            "--ray",
            "local",
            "--ray-actors",
            "2",
            "--ray-actor-cpus",
            "0.5",
            "--ray-store-bytes",
            str(64 << 20),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    on_ray = json.loads(run.stdout.splitlines()[-1])
    for key in ("batches", "samples", "tokens", "images", "videos", "skipped", "errors"):
        assert on_ray[key] == local[key], key
    assert local["skipped"] == 2 and local["errors"][0]["sample_id"] == victim["id"]  # once an epoch
    assert on_ray["metrics"]["actors_started"] == 2 and on_ray["metrics"]["store_bytes"] == 64 << 20
    # Options are checked by the CLI before any Ray starts; the engine's refusals come back.
    bad = subprocess.run(
        [cli, "run", *map(str, flags), "--batch-size", "x", "--ray", "local"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "batch_size" in bad.stderr
    traced = subprocess.run(
        [cli, "run", *map(str, flags), "--trace", tmp_path / "t.json", "--ray", "local"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert traced.returncode == 2 and "trace_path: each part of the run" in traced.stderr


@pytest.fixture(scope="module")
def media_sets(tmp_path_factory):
    """Manifests of one kind of medium each (issue 48): text only, videos only, audio only; each
    with the tokenizer and model it is read with."""
    import json

    import datagen
    from conftest import ROOT, ffmpeg
    from omni_reference import omni_model

    root = tmp_path_factory.mktemp("media-sets")
    datagen.generate(root / "demo", samples=4, seed=48, max_megapixels=0.2, workers=2, videos=3)
    qwen3 = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"

    def turn(content, sid):
        return {"id": sid, "messages": [{"role": "user", "content": content}, {"role": "assistant", "content": "ok"}]}

    text = root / "text.jsonl"
    text.write_text("".join(json.dumps(turn(f"question {i}", f"t{i}")) + "\n" for i in range(5)))
    for i in range(3):
        ffmpeg("-f", "lavfi", "-i", f"sine=frequency={300 + 100 * i}:sample_rate=16000:duration=1.5", root / f"{i}.wav")
    audio = root / "audio.jsonl"
    audio.write_text(
        "".join(
            json.dumps(turn([{"type": "audio", "audio": f"{i}.wav"}, {"type": "text", "text": "What?"}], f"a{i}"))
            + "\n"
            for i in range(3)
        )
    )
    omni = root / "omni-tokenizer.json"
    omni.write_text(omni_model("qwen2.5-omni").json)
    return {
        "text": (text, ["--tokenizer", qwen3]),
        "videos": (root / "demo" / "videos.jsonl", ["--tokenizer", qwen3]),
        "audio": (audio, ["--tokenizer", omni, "--model", "qwen2.5-omni"]),
    }


LAYOUTS = {
    "padded": [],
    "hf": ["--token-budget", "8192", "--packed-format", "hf"],
    "thd": ["--token-budget", "8192", "--packed-format", "thd"],
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("kind", ["text", "videos", "audio"])
def test_issue48_run_and_inspect_report_on_manifests_without_images(cli, media_sets, kind, layout):
    # `mmfeed run` read every batch's image_grid_thw and crashed (exit 139) on batches without
    # images: the README's `make demo` died at its last step.
    import json

    manifest, flags = media_sets[kind]
    flags = [*flags, *LAYOUTS[layout]]
    run = subprocess.run(
        [cli, "run", manifest, *map(str, flags), "--json"], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    samples = {"text": 5, "videos": 3, "audio": 3}[kind]
    assert report["samples"] == samples and report["skipped"] == 0 and report["images"] == 0
    assert report["videos"] == (3 if kind == "videos" else 0)
    plain = subprocess.run([cli, "run", manifest, *map(str, flags)], capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0 and plain.stdout.startswith(f"loaded {samples} samples"), plain.stderr
    shown = subprocess.run([cli, "inspect", manifest, *map(str, flags)], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("batch 0 (epoch 0): ") and "trained tokens are shown" in shown.stdout
    pad = {"text": None, "videos": "<|video_pad|>x", "audio": "<|AUDIO|>x"}[kind]
    if pad:
        assert pad in shown.stdout, shown.stdout


@pytest.mark.parametrize("kind", ["text", "videos", "audio"])
def test_issue48_fetch_reports_on_manifests_without_images(cli, media_sets, kind):
    from conftest import run_fetch

    manifest, _ = media_sets[kind]
    rc, report = run_fetch(cli, "--from-manifest", manifest)
    assert rc == 0 and report["failed"] == 0
    assert report["ok"] == {"text": 0, "videos": 3, "audio": 3}[kind]


def test_issue49_the_cli_as_a_new_user_meets_it(cli, tmp_path):
    import json
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "loader"))
    from test_new_user import TOKENIZER, write_samples

    write_samples(tmp_path)
    manifest = str(tmp_path / "manifest.jsonl")

    def call(*args):
        return subprocess.run([str(cli), *args], capture_output=True, text=True, timeout=300)

    # inspect takes --config, and its batch 0 is the Loader's first batch with the same options.
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"tokenizer": str(TOKENIZER), "batch_size": 3, "seed": 7}))
    shown = call("inspect", "--config", config, manifest)
    assert shown.returncode == 0, shown.stderr
    first = next(iter(mmfeed.Loader(manifest, tokenizer=TOKENIZER, batch_size=3, seed=7, tensors="np")))
    assert [l.removeprefix("--- ").removesuffix(" ---") for l in shown.stdout.splitlines() if l.startswith("--- ")] == (
        first["sample_ids"]
    )
    # One mistake, one message, whichever command meets it.
    assert "no tokenizer.json given" in call("run", manifest).stderr
    assert "no tokenizer.json given" in call("inspect", manifest).stderr
    config.write_text('{"tokenizer": 5}')
    assert "tokenizer: takes a string, not 5" in call("run", "--config", config, manifest).stderr
    (tmp_path / "run.toml").write_text("model = 3\n")
    assert "model: takes a string, not 3" in call("run", "--config", tmp_path / "run.toml", manifest).stderr
    unordered = call("run", "--unordered", "--tokenizer", TOKENIZER, manifest)
    assert unordered.returncode == 0 and "loaded 17 samples" in unordered.stdout, unordered.stderr
    assert "over its sources (JSONL or JSON manifests, tar shards" in call("run", "--help").stdout
    tight = call("run", "--max-buffered-bytes", "1000", "--tokenizer", TOKENIZER, manifest)
    assert "(raise max_buffered_bytes, --max-buffered-bytes)" in tight.stdout + tight.stderr
    assert "raise max_object_bytes" not in tight.stdout + tight.stderr
