"""Issue 16: the whole Qwen3-VL sample from the Loader against transformers' own Qwen3-VL
processor (Qwen3VLProcessor with the Qwen3-VL Instruct chat template, the PIL image processor at
patch 16, merge 2, mean/std 0.5), on the demo set and on generated conversations: input_ids with
the image tokens expanded, pixel_values, image_grid_thw, labels and mrope position ids. Issue 35:
the same for Qwen3.5 (Qwen3VLProcessor with the Qwen3.5 tokenizer and chat template; its
get_rope_index is Qwen3-VL's for images)."""

import json
import re
from types import SimpleNamespace

import datagen
import numpy as np
import pytest
import torch
from conftest import ROOT
from tiny_vl import hf_messages, hf_processor, tokenizer_of
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
MAX_PIXELS = 200_704  # a multiple of 32^2 under the hub's 16,777,216, to keep the test small
TOLERANCE = 1e-6  # as the image parity tests (test_vision.py)


@pytest.fixture(scope="module", params=["qwen3-vl", "qwen3.5"])
def processor(request):
    processor = hf_processor(request.param, MAX_PIXELS)
    processor.family = request.param
    return processor


def reference(processor, sample: dict, base) -> dict:
    """transformers' sample: ids, pixels, grids, the labels of the assistant turns (content,
    <|im_end|> and the newline after it, by character offsets in the rendered text; vision tokens
    never), and get_rope_index's positions."""
    messages = hf_messages(sample, base)
    out = dict(processor.apply_chat_template(messages, tokenize=True, return_dict=True, return_tensors="np"))
    out.setdefault("image_grid_thw", np.zeros((0, 3), np.int64))  # a text-only sample
    out.setdefault("pixel_values", np.zeros((0, 3 * 2 * 16 * 16), np.float32))
    text = processor.apply_chat_template(messages, tokenize=False)
    spans = [(m.start(1), m.end(1)) for m in re.finditer(r"<\|im_start\|>assistant\n(.*?<\|im_end\|>\n)", text, re.S)]
    enc = processor.tokenizer(text, return_offsets_mapping=True)
    labels = []
    grids = iter(out["image_grid_thw"])
    for token, (start, _) in zip(enc["input_ids"], enc["offset_mapping"]):
        if token == processor.image_token_id:
            labels += [-100] * int(np.prod(next(grids)) // 4)
        else:
            trained = token not in (processor.vision_start_token_id, processor.vision_end_token_id)
            labels.append(token if trained and any(a <= start < b for a, b in spans) else -100)
    fake = SimpleNamespace(config=SimpleNamespace(vision_config=SimpleNamespace(spatial_merge_size=2)))
    fake.get_vision_position_ids = lambda *a, **k: Qwen3VLModel.get_vision_position_ids(fake, *a, **k)
    positions, _ = Qwen3VLModel.get_rope_index(
        fake,
        torch.from_numpy(out["input_ids"]),
        torch.from_numpy(out["mm_token_type_ids"]),
        image_grid_thw=torch.from_numpy(out["image_grid_thw"]) if len(out["image_grid_thw"]) else None,
    )
    return {
        "input_ids": out["input_ids"][0],
        "pixel_values": out["pixel_values"],
        "image_grid_thw": out["image_grid_thw"],
        "labels": np.array(labels),
        "position_ids": positions[:, 0].numpy(),
    }


def assert_samples_equal(manifest, processor):
    samples = {json.loads(line)["id"]: json.loads(line) for line in manifest.read_text().splitlines()}
    with mmfeed.Loader(
        manifest,
        tokenizer=tokenizer_of(processor.family),
        model=processor.family,
        max_pixels=MAX_PIXELS,
        batch_size=1,
        shuffle=False,
        mrope=True,
        tensors="np",
    ) as loader:
        batches = list(loader)
        assert not loader.errors()
    assert len(batches) == len(samples)
    for b in batches:
        want = reference(processor, samples[b["sample_ids"][0]], manifest.parent)
        np.testing.assert_array_equal(b["input_ids"][0], want["input_ids"])
        np.testing.assert_array_equal(b["labels"][0], want["labels"])
        np.testing.assert_array_equal(b["position_ids"][:, 0], want["position_ids"])
        if len(want["image_grid_thw"]) == 0:  # a text-only sample: no image tensors, as the processor
            assert "pixel_values" not in b and "image_grid_thw" not in b
            continue
        np.testing.assert_array_equal(b["image_grid_thw"], want["image_grid_thw"])
        assert b["pixel_values"].shape == want["pixel_values"].shape
        assert np.abs(b["pixel_values"] - want["pixel_values"]).max(initial=0.0) <= TOLERANCE


def test_demo_samples_equal_the_transformers_processor(tmp_path, processor):
    datagen.generate(tmp_path, samples=12, seed=16, max_megapixels=0.5, workers=2)
    assert_samples_equal(tmp_path / "manifest.jsonl", processor)


def test_generated_conversations_equal_the_transformers_processor(tmp_path, processor):
    # System prompts present and absent, several images per turn, multi-turn, text-only turns.
    import random

    datagen.generate(tmp_path, samples=6, seed=17, max_megapixels=0.4, workers=2)
    images = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "images").iterdir())
    rng = random.Random(16)
    lines = []
    for i in range(24):
        messages = (
            [{"role": "system", "content": rng.choice(["You are terse.", "Describe precisely."])}]
            if rng.random() < 0.5
            else []
        )
        for _turn in range(rng.randint(1, 3)):
            content = [{"type": "image", "image": rng.choice(images)} for _ in range(rng.randint(0, 2))]
            content.insert(
                rng.randint(0, len(content)),
                {
                    "type": "text",
                    "text": rng.choice(
                        ["What is shown?", "Compare them.", "Zähle die Dinge. 数一数。", "  spaces  \n and lines"]
                    ),
                },
            )
            if len(content) == 1 and rng.random() < 0.5:
                content = content[0]["text"]  # string content
            messages.append({"role": "user", "content": content})
            messages.append(
                {
                    "role": "assistant",
                    "content": rng.choice(["A cat.", "Two, left and right.", "第一张更亮。", "Yes.\n\nNo."]),
                }
            )
        lines.append(json.dumps({"id": f"gen-{i}", "messages": messages}, ensure_ascii=False))
    manifest = tmp_path / "generated.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    assert_samples_equal(manifest, processor)


def test_cli_inspect_shows_a_qwen3_vl_sample(cli, tmp_path):
    import subprocess

    datagen.generate(tmp_path, samples=2, seed=18, max_megapixels=0.3, workers=2)
    run = subprocess.run(
        [
            cli,
            "inspect",
            tmp_path / "manifest.jsonl",
            "--tokenizer",
            TOKENIZER,
            "--model",
            "qwen3-vl",
            "--max-pixels",
            str(MAX_PIXELS),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert re.search(r"pixel_values    float32 \[\d+, 1536\]", run.stdout), run.stdout  # 3 * 2 * 16 * 16
    assert "You are a helpful assistant." not in run.stdout  # Qwen3-VL adds no default system prompt
    assert "<|im_start|>assistant\n[[" in run.stdout and "<|image_pad|>x" in run.stdout


def test_the_thinking_template_trains_reasoning_unless_told_not_to(tmp_path):
    datagen.generate(tmp_path, samples=2, seed=19, max_megapixels=0.3, workers=2)
    sample = json.loads((tmp_path / "manifest.jsonl").read_text().splitlines()[0])
    sample["messages"][-1] = {"role": "assistant", "content": "It is red.", "reasoning_content": "Look at the hue."}
    manifest = tmp_path / "thinking.jsonl"
    manifest.write_text(json.dumps(sample) + "\n")
    tok = mmfeed.Tokenizer.from_file(TOKENIZER)
    think = tok.encode("<think>\nLook at the hue.\n</think>\n\n")

    def labels(**options):
        with mmfeed.Loader(
            manifest,
            tokenizer=TOKENIZER,
            model="qwen3-vl",
            chat_template="qwen3-vl-thinking",
            max_pixels=MAX_PIXELS,
            tensors="np",
            **options,
        ) as loader:
            b = next(loader)
        ids, lab = b["input_ids"][0].tolist(), b["labels"][0].tolist()
        at = next(i for i in range(len(ids)) if ids[i : i + len(think)] == think)
        return lab[at : at + len(think)], lab[at + len(think) :]

    trained, reply = labels()
    assert trained == think and reply[0] != -100
    untrained, reply = labels(train_reasoning=False)
    assert untrained == [-100] * len(think) and reply[0] != -100
