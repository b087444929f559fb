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
    other = [i for batch in mmfeed.torch.Dataset(data / "manifest.jsonl", tokenizer=TOKENIZER) for i in batch["sample_ids"]]
    assert len(ids) == len(other) == 9 and len(set(ids) | set(other)) == 17
