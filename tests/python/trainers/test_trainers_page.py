"""Issue 49: the code blocks of docs/trainers.md run as written. Each block is read from the page
and run in a folder holding what the page names (train.jsonl and valid.jsonl over a generated
data set, tokenizer.json the test tokenizer), given what the page leaves to its reader: `model`
(the tiny Qwen2-VL of tiny_vl.py; for the Megatron block, a stand-in that returns the forward
arguments it is given) and `cp_size`. The trainers stop after two steps, by a callback added to
the Trainer's own defaults, so that the page's max_steps=1000 need not run."""

import re
import shutil

import datagen
import pytest
import tiny_vl
import transformers
import transformers.trainer
import transformers.training_args
from conftest import ROOT

PAGE = ROOT / "docs" / "trainers.md"
STEPS = 2


def page_blocks() -> list[str]:
    """The page's python blocks, each preceded by as many empty lines as the page has above it (a
    traceback names the page's line)."""
    text = PAGE.read_text()
    return [
        "\n" * text.count("\n", 0, m.start(1)) + m.group(1)
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)
    ]


def block_name(code: str) -> str:
    """The block's first mmfeed call, as the test's id: mmfeed.hf.SFTTrainer, mmfeed.Loader, ..."""
    return re.search(r"mmfeed\.[\w.]+(?=\()", code).group(0)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("trainers-page")
    # Four samples of the smallest images datagen writes: a batch of the page's batch_size=8 holds
    # them all, and its every epoch is one batch.
    datagen.generate(out, samples=4, seed=49, max_megapixels=0.2, workers=2)
    return out


@pytest.fixture
def folder(data, tmp_path, monkeypatch):
    """A folder holding the files the page names, as the working directory."""
    for name in ("train.jsonl", "valid.jsonl"):
        shutil.copy(data / "manifest.jsonl", tmp_path / name)
    (tmp_path / "images").symlink_to(data / "images")
    (tmp_path / "tokenizer.json").symlink_to(tiny_vl.TOKENIZER)
    monkeypatch.chdir(tmp_path)
    return tmp_path


class StopAfterSteps(transformers.TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= STEPS:
            control.should_training_stop = True


def test_the_page_has_the_blocks_of_each_trainer():
    names = [block_name(code) for code in page_blocks()]
    for name in ("mmfeed.Loader", "mmfeed.hf.Trainer", "mmfeed.hf.SFTTrainer", "mmfeed.torch.Dataset"):
        assert name in names


@pytest.mark.parametrize("code", page_blocks(), ids=block_name)
def test_the_code_of_the_page_runs_as_written(code, folder, monkeypatch):
    monkeypatch.setattr(
        transformers.trainer, "DEFAULT_CALLBACKS", [*transformers.trainer.DEFAULT_CALLBACKS, StopAfterSteps]
    )
    # SFTConfig defaults to bf16, which TrainingArguments refuses on a machine without a GPU unless
    # use_cpu=True is given; here the page's SFTConfig runs in bf16 on the CPU, as with use_cpu.
    monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available", lambda: True)
    if "mmfeed.megatron.forward_args" in code:
        model = lambda **forward_args: forward_args  # noqa: E731  (a Megatron model's place)
    else:
        model = tiny_vl.tiny_model("qwen2-vl").train()
    namespace = {"model": model, "cp_size": 1}
    exec(compile(code, str(PAGE), "exec"), namespace)
    if "trainer" in namespace:
        assert namespace["trainer"].state.global_step == STEPS
    if "output" in namespace:
        assert namespace["output"]["packed_seq_params"] is not None
