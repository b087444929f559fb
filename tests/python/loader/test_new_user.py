"""Issue 49: what a new user meets. The README's quick start under torchrun (each rank its own
shard, with no rank arguments), a world_size=1 written into a job of several ranks refused by name."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

import mmfeed

TOKENIZER = ROOT / "tests/data/qwen3-tokenizer/tokenizer.json"

# The README's quick start, run as written: its code block is read from the README, the model it
# trains is a tiny Qwen2.5-VL, and the batches' sample ids are recorded as the loop takes them.
QUICK_START = r"""
import json, re, sys
sys.path.insert(0, sys.argv[2])
import mmfeed
from tiny_models import tiny_model

readme = open(sys.argv[1]).read()
code = re.search(r"## Quick start.*?```python\n(.*?)```", readme, re.S).group(1)
seen = []
take = mmfeed.Loader.__next__
def recording(self):
    batch = take(self)
    seen.extend(batch["sample_ids"])
    return batch
mmfeed.Loader.__next__ = recording
scope = {"model": tiny_model("qwen2.5-vl")}
exec(code, scope)
print("SEEN " + json.dumps({"rank": scope["loader"].options()["rank"], "ids": seen}))
"""


def write_samples(out, count: int = 17) -> None:
    """`count` short conversations of one small image each (manifest.jsonl, images/), short enough
    that a tiny model's logits over the real vocabulary stay small."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(49)
    (out / "images").mkdir()
    lines = []
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (56 + 8 * i, 84, 3), dtype=np.uint8)).save(out / f"images/{i}.png")
        user = [{"type": "image", "image": f"images/{i}.png"}, {"type": "text", "text": f"What is shown in {i}?"}]
        answer = [{"type": "text", "text": f"Noise, number {i}."}]
        messages = [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
        lines.append(json.dumps({"id": f"s{i:02d}", "messages": messages}))
    (out / "manifest.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("new-user")
    write_samples(out)
    return out


@pytest.mark.heavy  # two ranks
def test_the_readme_quick_start_under_torchrun_reads_disjoint_shards(data, moto_s3, tmp_path):
    client = moto_s3.client()
    client.create_bucket(Bucket="my-bucket")
    for path in data.rglob("*"):
        if path.is_file():
            key = "train.jsonl" if path.name == "manifest.jsonl" else str(path.relative_to(data))
            client.upload_file(str(path), "my-bucket", key)
    shutil.copy(TOKENIZER, tmp_path / "tokenizer.json")
    script = tmp_path / "quick_start.py"
    script.write_text(QUICK_START)
    env = {**os.environ, **moto_s3.env(), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", script]
        + [ROOT / "README.md", ROOT / "examples"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads(l.split(" ", 1)[1]) for l in proc.stdout.splitlines() if l.startswith("SEEN ")]
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    a, b = (set(r["ids"]) for r in ranks)
    everything = {json.loads(l)["id"] for l in (data / "manifest.jsonl").read_text().splitlines()}
    # 17 samples over 2 ranks: equal shards of 9, the last sample's place taken by one already read
    # (as DistributedSampler pads); otherwise disjoint.
    assert len(ranks[0]["ids"]) == len(ranks[1]["ids"]) == 9
    assert len(a & b) == 1 and a | b == everything


def test_rank_and_world_size_default_to_the_job(data, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    loader = mmfeed.Loader(data / "manifest.jsonl", tokenizer=TOKENIZER, batch_size=4, tensors="np")
    assert (loader.options()["rank"], loader.options()["world_size"]) == (1, 2)
    assert mmfeed.Loader(data / "manifest.jsonl", tokenizer=TOKENIZER, world_size=4).options()["rank"] == 1
    with pytest.raises(ValueError, match="world_size=1, but this process is rank 1 of a job of 2 ranks"):
        mmfeed.Loader(data / "manifest.jsonl", tokenizer=TOKENIZER, rank=0, world_size=1)
    # On purpose: every rank reads everything.
    alone = mmfeed.Loader(data / "manifest.jsonl", tokenizer=TOKENIZER, world_size=1, ignore_job_ranks=True)
    assert "rank" not in alone.options() and alone.options()["world_size"] == 1
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE='two' is not a number"):
        mmfeed.Loader(data / "manifest.jsonl", tokenizer=TOKENIZER)


def test_the_torch_dataset_takes_the_same_defaults(data, monkeypatch):
    import mmfeed.torch

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="ignore_job_ranks=True"):
        mmfeed.torch.Dataset(data / "manifest.jsonl", tokenizer=TOKENIZER, world_size=1)
    dataset = mmfeed.torch.Dataset(data / "manifest.jsonl", tokenizer=TOKENIZER, batch_size=4)
    assert (dataset.state_dict()["rank"], dataset.state_dict()["world_size"]) == (1, 2)
    ids = [i for batch in dataset for i in batch["sample_ids"]]
    monkeypatch.setenv("RANK", "0")
    other = [
        i for batch in mmfeed.torch.Dataset(data / "manifest.jsonl", tokenizer=TOKENIZER) for i in batch["sample_ids"]
    ]
    assert len(ids) == len(other) == 9 and len(set(ids) | set(other)) == 17


def transparent_images(out) -> dict:
    """A transparent logo's kinds: RGBA, LA, palette with a transparent entry, a gray PNG with a
    transparent value (tRNS), and WebP with alpha; each 96 x 72, the hidden pixels black."""
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:72, 0:96]
    ring = (((x - 48) ** 2 + (y - 36) ** 2) < 30**2).astype(np.uint8)
    color = np.stack([x * 2, y * 3, (x + y) % 256], axis=-1).astype(np.uint8) * ring[..., None]
    alpha = (ring * 255 - (x % 7) * ring * 20).astype(np.uint8)
    rgba = Image.fromarray(np.dstack([color, alpha]), "RGBA")
    images = {
        "rgba.png": rgba,
        "la.png": Image.fromarray(np.dstack([color[..., 0], alpha]), "LA"),
        "palette.png": rgba.convert("RGB").quantize(32),
        "gray-trns.png": Image.fromarray(color[..., 1], "L"),
        "alpha.webp": rgba,
    }
    images["palette.png"].info["transparency"] = int(np.asarray(images["palette.png"])[0, 0])
    images["gray-trns.png"].info["transparency"] = 0
    paths = {}
    for name, image in images.items():
        paths[name] = out / name
        if name.endswith(".webp"):
            image.save(paths[name], lossless=True)
        else:
            image.save(paths[name], transparency=image.info.get("transparency"))
    return paths


def test_alpha_matches_the_pipeline_each_choice_names(tmp_path):
    from PIL import Image
    from transformers.image_utils import load_image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    paths = transparent_images(tmp_path)
    lines = []
    for name in paths:
        user = [{"type": "image", "image": name}, {"type": "text", "text": "Which logo?"}]
        messages = [{"role": "user", "content": user}, {"role": "assistant", "content": "This one."}]
        lines.append(json.dumps({"id": name, "messages": messages}))
    (tmp_path / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    processor = Qwen2VLImageProcessorPil(patch_size=14, size={"shortest_edge": 3136, "longest_edge": 12845056})

    def pasted(image):  # qwen-vl-utils' to_rgb: RGBA pasted on white through its alpha, else convert("RGB")
        if image.mode != "RGBA":
            return image.convert("RGB")
        background = Image.new("RGB", image.size, (255, 255, 255))
        background.paste(image, mask=image.split()[3])
        return background

    references = {
        "drop": lambda path: load_image(str(path)),  # transformers' load_image of a path
        "white": lambda path: Image.open(path),  # the PIL image `datasets` hands the processor
        "paste": lambda path: pasted(Image.open(path)),
    }
    results = {}
    for alpha, reference in references.items():
        loader = mmfeed.Loader(
            tmp_path / "manifest.jsonl", tokenizer=TOKENIZER, batch_size=1, shuffle=False, alpha=alpha, tensors="np"
        )
        with loader:
            for batch in loader:
                (name,) = batch["sample_ids"]
                want = processor(images=[reference(paths[name])], return_tensors="np")["pixel_values"]
                got = batch["pixel_values"]
                assert got.shape == want.shape and got.tobytes() == want.tobytes(), (alpha, name)
                results[alpha, name] = got
    # The choice matters: the hidden black background becomes white.
    assert (results["white", "rgba.png"] != results["drop", "rgba.png"]).mean() > 0.3
    assert results["white", "rgba.png"].tobytes() == results["paste", "rgba.png"].tobytes()
    with pytest.raises(TypeError, match="alpha.*drop, paste or white"):
        mmfeed.Loader(tmp_path / "manifest.jsonl", tokenizer=TOKENIZER, alpha="black")


def test_a_sample_left_with_nothing_to_train_is_an_error_naming_it(data, tmp_path):
    # Cut at 45 tokens, s16 (the largest image: its answer starts at token 50) keeps no answer; a
    # conversation with no assistant turn has nothing to train from the start.
    lines = (data / "manifest.jsonl").read_text().splitlines()
    prompt_only = json.loads(lines[0])
    prompt_only["id"] = "no-answer"
    prompt_only["messages"] = prompt_only["messages"][:1]
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("\n".join(lines + [json.dumps(prompt_only)]) + "\n")
    shutil.copytree(data / "images", tmp_path / "images")
    options = dict(tokenizer=TOKENIZER, batch_size=8, max_length=45, truncation="truncate", tensors="np")
    loader = mmfeed.Loader(manifest, **options)
    with loader:
        batches = list(loader)
        errors = {e["sample_id"]: e for e in loader.errors()}
    assert all((b["labels"] != -100).sum(axis=1).min() > 0 for b in batches)
    assert "its answer starts past the cut (raise max_length)" in errors["s16"]["reason"]
    assert "truncated to" in errors["s16"]["reason"] and errors["s16"]["stage"] == "text"
    assert "no assistant turn" in errors["no-answer"]["reason"]
    delivered = {i for b in batches for i in b["sample_ids"]}
    assert "s00" in delivered and not delivered & set(errors)
