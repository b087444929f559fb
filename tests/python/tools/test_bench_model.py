"""bench_model on the CPU with the tiny preset: a hand-made batch and real mmfeed batches train,
image tokens must match the pixel rows, and NVML is absent without raising."""

import math
from pathlib import Path

import bench_model
import datagen
import numpy as np
import pytest
import torch
from conftest import ROOT

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
VISION_START, VISION_END = 151652, 151653


def hand_made_batch(image_tokens: int = 4) -> dict:
    """Two rows: the first holds one image of grid (1, 4, 4), i.e. 16 patch rows merging into 4
    embeddings; the second is text only and right-padded."""
    pads = [bench_model.IMAGE_PAD_ID] * image_tokens
    first = [151644, 872, 198, VISION_START, *pads, VISION_END, 3838, 374, 419, 30, 151645, 198, 32, 8251, 151645]
    second = [151644, 872, 198, 9707, 151645, 198, 13048, 151645]
    length = len(first)
    input_ids = torch.zeros(2, length, dtype=torch.int64)
    attention_mask = torch.zeros(2, length, dtype=torch.int64)
    labels = torch.full((2, length), -100, dtype=torch.int64)
    for row, ids in enumerate((first, second)):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention_mask[row, : len(ids)] = 1
        labels[row, len(ids) - 3 : len(ids)] = torch.tensor(ids[-3:])  # the answer and its end token
    return {
        "input_ids": input_ids,
        "labels": labels,
        "attention_mask": attention_mask,
        "pixel_values": torch.randn(16, bench_model.PATCH_DIM, generator=torch.Generator().manual_seed(0)),
        "image_grid_thw": torch.tensor([[1, 4, 4]]),
    }


def make_tiny_step(**options):
    return bench_model.make_train_step(device="cpu", preset="tiny", **options)


def test_a_step_returns_a_finite_loss_and_updates_the_weights():
    step = make_tiny_step()
    before = [p.detach().clone() for p in step.model.parameters()]
    loss = step(hand_made_batch())
    assert math.isfinite(loss)
    assert all(not torch.equal(b, p) for b, p in zip(before, step.model.parameters()))


def test_repeated_steps_on_one_batch_lower_the_loss():
    step = make_tiny_step(lr=1e-3)
    batch = hand_made_batch()
    losses = [step(batch) for _ in range(3)]
    assert losses[-1] < losses[0], losses


def test_a_step_takes_numpy_arrays():
    step = make_tiny_step()
    assert math.isfinite(step({key: value.numpy() for key, value in hand_made_batch().items()}))


def test_left_padded_rows_give_a_finite_loss():
    batch = hand_made_batch()
    padding = int((batch["attention_mask"][1] == 0).sum())
    for key in ("input_ids", "labels", "attention_mask"):
        batch[key][1] = batch[key][1].roll(padding)
    assert batch["attention_mask"][1, 0] == 0
    assert math.isfinite(make_tiny_step()(batch))


def test_image_tokens_that_do_not_match_the_pixel_rows_raise_naming_both_counts():
    step = make_tiny_step()
    with pytest.raises(ValueError, match=r"5 image tokens .* 16 rows, which merge 2x2 into 4 image embeddings"):
        step(hand_made_batch(image_tokens=5))


def test_grids_that_do_not_describe_the_pixel_rows_raise():
    batch = hand_made_batch()
    batch["image_grid_thw"] = torch.tensor([[1, 2, 4]])
    with pytest.raises(ValueError, match="image_grid_thw describes 8 patches but pixel_values has 16 rows"):
        make_tiny_step()(batch)


def test_unknown_preset_raises():
    with pytest.raises(ValueError, match="unknown preset 'huge': choose one of default, tiny"):
        bench_model.make_train_step(device="cpu", preset="huge")


@pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="this machine has an NVIDIA GPU")
def test_nvml_open_returns_none_without_a_gpu():
    assert bench_model.Nvml.open() is None


def test_sampler_reports_the_mean_utilization():
    class Constant:
        def utilization(self):
            return 0.25

    sampler = bench_model.Sampler(Constant(), interval_s=0.01)
    sampler.start()
    assert sampler.stop() == 0.25

    class Refusing:
        def utilization(self):
            raise RuntimeError("nvmlDeviceGetUtilizationRates failed with NVML status 3")

    sampler = bench_model.Sampler(Refusing(), interval_s=0.01)
    sampler.start()
    assert sampler.stop() is None  # the run goes on without the figure


def test_tiny_step_trains_on_real_mmfeed_batches(tmp_path):
    datagen.generate(tmp_path / "d", samples=4, seed=0, workers=1)
    step = make_tiny_step()
    losses = []
    for tensors, kind in (("np", np.ndarray), ("torch", torch.Tensor)):
        with mmfeed.Loader(
            tmp_path / "d" / "manifest.jsonl",
            tokenizer=TOKENIZER,
            max_pixels=200704,
            batch_size=2,
            shuffle=False,
            tensors=tensors,
        ) as loader:
            for batch in loader:
                assert isinstance(batch["pixel_values"], kind)
                losses.append(step(batch))
    assert len(losses) == 4 and all(math.isfinite(loss) for loss in losses), losses
