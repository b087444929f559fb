"""Issue 32: mmfeed.hf.Trainer and mmfeed.hf.SFTTrainer train a tiny Qwen2-VL (tiny_vl.py) on
mmfeed's batches as they are, save the loader's state in every checkpoint, and a run resumed from
a checkpoint logs the losses of the uninterrupted run bit for bit, on the batches it would have
seen; gradient accumulation counts loader batches.

Issue 49: the trainers' arguments about data meet the loader's options: those naming a loader
option fill it (per_device_train_batch_size, SFTConfig's max_length), those the loader does not
follow are warned of by name, and the Trainer's throughput figures count the loader's batches."""

import json
import warnings

import datagen
import pytest
import tiny_vl
import transformers
import transformers.trainer

import mmfeed.hf
import mmfeed.step_times

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
    """A mixin recording the sample ids and the input_ids width of every batch the Trainer trains on."""

    seen: list
    widths: list
    batches: list

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.batches.append(inputs)
        self.seen.append(list(inputs["sample_ids"]))
        self.widths.append(inputs["input_ids"].shape[-1])
        return super().training_step(model, inputs, num_items_in_batch)


class RecordingTrainer(Recording, mmfeed.hf.Trainer):
    pass


def recording_sft_trainer():
    class RecordingSFTTrainer(Recording, mmfeed.hf.SFTTrainer):
        pass

    return RecordingSFTTrainer


class StopAt(transformers.TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True
            control.should_save = True


def settings(out) -> dict:
    return dict(
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


def arguments(out, **extra):
    return transformers.TrainingArguments(**{**settings(out), **extra})


def sft_config(out, **extra):
    import trl

    return trl.SFTConfig(**{**settings(out), **extra})


def bare_tokenizer():
    """The tokenizer as PreTrainedTokenizerFast(tokenizer_file=...) reads it: no pad token."""
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(tiny_vl.TOKENIZER))


def not_applied(record) -> list[str]:
    return [str(w.message) for w in record if "is not applied" in str(w.message)]


def run(cls, out, options, resume=None, stop=None, eval_loader=None, report_step_times=True, **extra):
    model = tiny_vl.tiny_model("qwen2-vl").train()
    trainer = cls(
        model=model,
        args=arguments(out, **extra),
        train_loader=options,
        eval_loader=eval_loader,
        report_step_times=report_step_times,
        callbacks=[StopAt(stop)] if stop else None,
    )
    trainer.seen, trainer.widths, trainer.batches = [], [], []
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
    from transformers import PreTrainedTokenizerFast

    options = loader_options(manifest)
    reference, want = run(RecordingTrainer, tmp_path / "hf", options)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(tiny_vl.TOKENIZER), pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )
    config = sft_config(tmp_path / "trl")
    trainer = recording_sft_trainer()(
        model=tiny_vl.tiny_model("qwen2-vl").train(), args=config, processing_class=tokenizer, train_loader=options
    )
    trainer.seen, trainer.widths, trainer.batches = [], [], []
    trainer.train()
    got = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
    # The same batches, step by step: the samples and their padded widths.
    assert (trainer.seen, trainer.widths) == (reference.seen, reference.widths)
    assert got.keys() == want.keys()
    # TRL computes the loss through its fused, chunked LM head: the first step's loss is the
    # Trainer's to float32 rounding (1.2e-6 relative seen), and the weights after it differ by as
    # little; over the next steps that difference grows with the CPU's kernels (2.4e-4 relative by
    # step 5 on an AMD EPYC, under 1e-4 on another machine), so they follow within 1e-3.
    assert got[1] == pytest.approx(want[1], rel=1e-5)
    for step in want:
        assert got[step] == pytest.approx(want[step], rel=1e-3), step


@pytest.mark.parametrize("kind", ["Trainer", "SFTTrainer"])
def test_the_throughput_figures_count_the_loaders_batches(manifest, tmp_path, monkeypatch, kind):
    counted = []
    speed_metrics = transformers.trainer.speed_metrics

    def counting(split, *args, **kwargs):
        if split == "train":
            counted.append(kwargs["num_samples"])
        return speed_metrics(split, *args, **kwargs)

    monkeypatch.setattr(transformers.trainer, "speed_metrics", counting)
    if kind == "Trainer":
        cls, config, extra = RecordingTrainer, arguments(tmp_path, max_steps=2, gradient_accumulation_steps=2), {}
    else:
        cls = recording_sft_trainer()
        config = sft_config(tmp_path, max_steps=2, gradient_accumulation_steps=2)
        extra = dict(processing_class=bare_tokenizer())
    assert config.per_device_train_batch_size == 8  # the default, where the loader's batch_size is 2
    trainer = cls(
        model=tiny_vl.tiny_model("qwen2-vl").train(), args=config, train_loader=loader_options(manifest), **extra
    )
    trainer.seen, trainer.widths, trainer.batches = [], [], []
    metrics = trainer.train().metrics
    delivered = sum(len(ids) for ids in trainer.seen)
    assert delivered == 2 * 2 * 2  # steps x accumulation x the loader's batch_size
    assert counted == [delivered]  # the samples train_samples_per_second divides by the run time
    assert trainer.args.per_device_train_batch_size == trainer.state.train_batch_size == 2
    assert metrics["train_samples_per_second"] > 0


def test_per_device_train_batch_size_fills_the_loaders_batch_size(manifest, tmp_path):
    options = {k: v for k, v in loader_options(manifest).items() if k != "batch_size"}
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer = mmfeed.hf.Trainer(
            model=tiny_vl.tiny_model("qwen2-vl"),
            args=arguments(tmp_path, per_device_train_batch_size=3),
            train_loader=options,
        )
    assert trainer.train_loader.options()["batch_size"] == 3
    assert not_applied(record) == []


def test_gradient_accumulation_fills_the_loaders_so_balancing_splits_each_step(manifest, tmp_path):
    # The Trainer's accumulation is the loader's step for balance= (ranks balanced by compute):
    # filled when the loader's options leave it unset, warned of when they set another.
    trainer = mmfeed.hf.Trainer(
        model=tiny_vl.tiny_model("qwen2-vl"),
        args=arguments(tmp_path, gradient_accumulation_steps=3),
        train_loader=loader_options(manifest, balance="compute"),
    )
    assert trainer.train_loader.options()["gradient_accumulation_steps"] == 3
    with pytest.warns(UserWarning, match=r"gradient_accumulation_steps=3 is not applied: the train loader's "):
        mmfeed.hf.Trainer(
            model=tiny_vl.tiny_model("qwen2-vl"),
            args=arguments(tmp_path, gradient_accumulation_steps=3),
            train_loader=loader_options(manifest, gradient_accumulation_steps=2, balance="tokens"),
        )
    # A loader that does not balance delivers the same batches whatever its accumulation: no warning.
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        mmfeed.hf.Trainer(
            model=tiny_vl.tiny_model("qwen2-vl"),
            args=arguments(tmp_path, gradient_accumulation_steps=3),
            train_loader=mmfeed.Loader(**loader_options(manifest)),
        )
    assert not_applied(record) == []


def test_the_trainer_reports_each_steps_forward_time_to_a_balancing_loader(manifest, tmp_path):
    # Each optimizer step's report covers that step's batches (their terms, read from the batches
    # trained on), the first step left out (warm-up), so balance_cost="calibrated" fits and
    # switches with no code of the caller's. report_step_times=False leaves the reporting to the caller.
    options = loader_options(manifest, balance="compute", balance_cost="calibrated", calibration_steps=2)
    trainer, _ = run(
        RecordingTrainer,
        tmp_path / "reported",
        options,
        gradient_accumulation_steps=2,
        max_steps=3,
    )
    times = trainer.train_loader.step_times()
    assert times["steps"] == 2 and all(s > 0 for s in times["seconds"])
    assert (times["calibrated"]["epoch"], times["calibrated"]["step"]) == (0, 3)
    for k, step in enumerate((1, 2)):
        terms = sum(mmfeed.step_times.batch_terms(b) for b in trainer.batches[2 * step : 2 * step + 2])
        assert [times["terms"][name][k] for name in mmfeed.step_times.TERMS] == terms.tolist()

    silent, _ = run(RecordingTrainer, tmp_path / "silent", options, report_step_times=False, max_steps=2)
    assert silent.train_loader.step_times()["steps"] == 0 and silent.train_loader.step_times()["calibrated"] is None


def test_a_per_rank_loss_normaliser_under_balancing_is_warned_of(manifest, tmp_path):
    # Balancing moves samples between ranks: only the global step's label tokens keep the gradient
    # (test_balanced_gradients.py); the Trainer's default keeps them, turning it off is warned of.
    def made(balance, **extra):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            mmfeed.hf.Trainer(
                model=tiny_vl.tiny_model("qwen2-vl"),
                args=arguments(tmp_path, **extra),
                train_loader=loader_options(manifest, balance=balance),
            )
        return [str(w.message) for w in record if "average_tokens_across_devices" in str(w.message)]

    assert arguments(tmp_path).average_tokens_across_devices  # transformers' default
    assert made("compute") == [] and made("none", average_tokens_across_devices=False) == []
    (message,) = made("compute", average_tokens_across_devices=False)
    assert "balance='compute'" in message and "its own label tokens" in message


def test_a_per_device_batch_size_the_loader_overrides_is_warned_of(manifest, tmp_path):
    loader = mmfeed.Loader(**loader_options(manifest))
    with pytest.warns(
        UserWarning,
        match=r"TrainingArguments\.per_device_train_batch_size=4 is not applied: the train loader's batches hold "
        r"2 rows \(batch_size=2\)",
    ):
        trainer = mmfeed.hf.Trainer(
            model=tiny_vl.tiny_model("qwen2-vl"),
            args=arguments(tmp_path, per_device_train_batch_size=4),
            train_loader=loader,
        )
    assert trainer.args.per_device_train_batch_size == 2


def test_arguments_the_loader_has_no_counterpart_for_are_warned_of(manifest, tmp_path):
    with pytest.warns(
        UserWarning, match=r"TrainingArguments\.dataloader_num_workers=2 is not applied: the loader prepares"
    ):
        mmfeed.hf.Trainer(
            model=tiny_vl.tiny_model("qwen2-vl"),
            args=arguments(tmp_path, dataloader_num_workers=2),
            train_loader=loader_options(manifest),
        )


def test_the_sft_trainer_takes_a_tokenizer_without_a_pad_token(manifest, tmp_path):
    tokenizer = bare_tokenizer()
    assert tokenizer.pad_token is None  # TRL's own collator refuses it
    trainer = mmfeed.hf.SFTTrainer(
        model=tiny_vl.tiny_model("qwen2-vl"),
        args=sft_config(tmp_path),
        processing_class=tokenizer,
        train_loader=loader_options(manifest),
    )
    assert trainer.processing_class is tokenizer


def test_sft_configs_max_length_bounds_the_loaders_samples(manifest, tmp_path):
    # A cut that keeps every sample's first trained token (a sample cut before its answer is an
    # error: issue 49) and shortens the longest.
    firsts, widths = [], []
    for batch in mmfeed.Loader(**{**loader_options(manifest), "epochs": 1, "tensors": "np"}):
        trained = batch["labels"] != -100
        firsts += trained.argmax(axis=1).tolist()
        widths += batch["attention_mask"].sum(axis=1).tolist()
    max_length = max(firsts) + 1
    assert max_length < max(widths)
    trainer = recording_sft_trainer()(
        model=tiny_vl.tiny_model("qwen2-vl").train(),
        args=sft_config(tmp_path, max_steps=2, max_length=max_length),
        processing_class=bare_tokenizer(),
        train_loader=loader_options(manifest),
    )
    trainer.seen, trainer.widths, trainer.batches = [], [], []
    trainer.train()
    options = trainer.train_loader.options()
    assert (options["max_length"], options["truncation"]) == (max_length, "truncate")  # TRL's keep_start
    assert len(trainer.widths) == 2 and max(trainer.widths) <= max_length


def test_a_loaders_own_max_length_applies_and_sft_configs_is_warned_of(manifest, tmp_path):
    with pytest.warns(
        UserWarning, match=r"SFTConfig\.max_length=16 is not applied: the train loader's max_length=4096 applies"
    ):
        trainer = mmfeed.hf.SFTTrainer(
            model=tiny_vl.tiny_model("qwen2-vl"),
            args=sft_config(tmp_path, max_length=16),
            processing_class=bare_tokenizer(),
            train_loader=loader_options(manifest, max_length=4096),
        )
    assert trainer.train_loader.options()["max_length"] == 4096


def test_packing_is_warned_of_unless_the_loader_packs(manifest, tmp_path):
    def sft_trainer(**extra):
        return mmfeed.hf.SFTTrainer(
            model=tiny_vl.tiny_model("qwen2-vl"),
            args=sft_config(tmp_path, packing=True),
            processing_class=bare_tokenizer(),
            train_loader=loader_options(manifest, **extra),
        )

    with pytest.warns(
        UserWarning, match=r"SFTConfig\.packing=True is not applied: the loader packs only with token_budget="
    ):
        sft_trainer()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        packed = sft_trainer(token_budget=4096)
    assert not_applied(record) == []
    assert packed.args.per_device_train_batch_size == 1  # a batch: one packed row
