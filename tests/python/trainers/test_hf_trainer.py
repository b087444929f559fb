"""Issue 32: mmfeed.hf.Trainer and mmfeed.hf.SFTTrainer train a tiny Qwen2-VL (tiny_vl.py) on
mmfeed's batches as they are, save the loader's state in every checkpoint, and a run resumed from
a checkpoint logs the losses of the uninterrupted run bit for bit, on the batches it would have
seen; gradient accumulation counts loader batches."""

import json

import datagen
import pytest
import tiny_vl
import transformers

import mmfeed.hf

MAX_PIXELS = 50_176


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    out = tmp_path_factory.mktemp("hf-trainer")
    datagen.generate(out, samples=24, seed=320, max_megapixels=0.3, workers=2)
    return out / "manifest.jsonl"


def loader_options(manifest, **extra):
    return dict(
        manifest=str(manifest),
        tokenizer=str(tiny_vl.TOKENIZER),
        model="qwen2-vl",
        max_pixels=MAX_PIXELS,
        batch_size=2,
        seed=3,
        epochs=4,
        **extra,
    )


class Recording:
    """A mixin recording the sample ids of every batch the Trainer trains on."""

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.seen.append(list(inputs["sample_ids"]))
        return super().training_step(model, inputs, num_items_in_batch)


class RecordingTrainer(Recording, mmfeed.hf.Trainer):
    seen: list


class StopAt(transformers.TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True
            control.should_save = True


def arguments(out, **extra):
    settings = dict(
        output_dir=str(out),
        max_steps=6,
        save_steps=3,
        logging_steps=1,
        learning_rate=1e-3,
        report_to=[],
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    return transformers.TrainingArguments(**{**settings, **extra})


def run(cls, out, options, resume=None, stop=None, **extra):
    model = tiny_vl.tiny_model("qwen2-vl").train()
    trainer = cls(
        model=model, args=arguments(out, **extra), train_loader=options, callbacks=[StopAt(stop)] if stop else None
    )
    trainer.seen = []
    trainer.train(resume_from_checkpoint=resume)
    losses = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
    return trainer, losses


@pytest.mark.parametrize("accumulation", [1, 2])
def test_a_resumed_run_logs_the_losses_of_the_uninterrupted_run(manifest, tmp_path, accumulation):
    options = loader_options(manifest)
    full, full_losses = run(RecordingTrainer, tmp_path / "full", options, gradient_accumulation_steps=accumulation)
    assert sorted(full_losses) == [1, 2, 3, 4, 5, 6]
    assert len(full.seen) == 6 * accumulation  # each optimizer step: `accumulation` loader batches
    ids = [sid for batch in full.seen for sid in batch]
    assert len(ids) == len(set(ids)) == 6 * accumulation * 2  # as the loader orders them, none twice

    first, _ = run(RecordingTrainer, tmp_path / "cut", options, stop=3, gradient_accumulation_steps=accumulation)
    state = json.loads((tmp_path / "cut" / "checkpoint-3" / "mmfeed_loader_rank0.json").read_text())
    assert state["position"] == 3 * accumulation * 2  # samples of the batches trained on, no more
    resumed, resumed_losses = run(
        RecordingTrainer, tmp_path / "cut", options, resume=True, gradient_accumulation_steps=accumulation
    )
    assert first.seen + resumed.seen == full.seen  # none replayed, none skipped
    assert {s: resumed_losses[s] for s in (4, 5, 6)} == {s: full_losses[s] for s in (4, 5, 6)}


def test_the_trainer_takes_a_loader_and_an_eval_loader(manifest, tmp_path):
    loader = mmfeed.Loader(**loader_options(manifest))
    model = tiny_vl.tiny_model("qwen2-vl").train()
    eval_options = {k: v for k, v in loader_options(manifest).items() if k not in ("epochs", "seed")}
    trainer = mmfeed.hf.Trainer(
        model=model,
        args=arguments(tmp_path, eval_strategy="steps", eval_steps=3, max_steps=3),
        train_loader=loader,
        eval_loader=eval_options,
    )
    trainer.train()
    evals = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    assert len(evals) == 1 and evals[0] > 0
    again = trainer.evaluate()["eval_loss"]  # each evaluation reads the eval set from its start
    assert again == pytest.approx(evals[0], rel=1e-6)


def test_max_steps_is_required(manifest, tmp_path):
    with pytest.raises(ValueError, match="max_steps"):
        mmfeed.hf.Trainer(
            model=tiny_vl.tiny_model("qwen2-vl"),
            args=transformers.TrainingArguments(str(tmp_path), report_to=[], use_cpu=True),
            train_loader=loader_options(manifest),
        )


def test_trls_sft_trainer_trains_as_the_trainer(manifest, tmp_path):
    import trl
    from transformers import PreTrainedTokenizerFast

    options = loader_options(manifest)
    _, want = run(RecordingTrainer, tmp_path / "hf", options)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(tiny_vl.TOKENIZER), pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )
    config = trl.SFTConfig(
        output_dir=str(tmp_path / "trl"),
        max_steps=6,
        save_steps=3,
        logging_steps=1,
        learning_rate=1e-3,
        report_to=[],
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    trainer = mmfeed.hf.SFTTrainer(
        model=tiny_vl.tiny_model("qwen2-vl").train(), args=config, processing_class=tokenizer, train_loader=options
    )
    trainer.train()
    got = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
    assert got.keys() == want.keys()
    # TRL computes the loss through its fused, chunked LM head: the first step's loss is the
    # Trainer's to float32 rounding (1.2e-6 relative seen), and the weights after it differ by as
    # little, so the later steps follow within 1e-4.
    assert got[1] == pytest.approx(want[1], rel=1e-5)
    for step in want:
        assert got[step] == pytest.approx(want[step], rel=1e-4), step
