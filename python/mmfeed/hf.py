"""Hugging Face Trainer and TRL SFTTrainer fed by mmfeed.

    import mmfeed.hf
    trainer = mmfeed.hf.Trainer(
        model=model, args=transformers.TrainingArguments("out", max_steps=1000, save_steps=100,
                                                         gradient_accumulation_steps=4),
        train_loader=dict(manifest="train.jsonl", tokenizer="tokenizer.json", model="qwen2-vl",
                          batch_size=8, max_pixels=1003520, epochs=3),
        eval_loader=dict(manifest="valid.jsonl", tokenizer="tokenizer.json", model="qwen2-vl"))
    trainer.train()                                  # or train(resume_from_checkpoint=True)

train_loader: the loader's options (a dict; this process's rank and world size come from the
Trainer's, args.process_index and args.world_size), or an mmfeed.Loader opened by the caller.
The Trainer takes its batches as they are: no collation, no re-batching, no slicing across
processes (accelerate's dispatch would cut pixel_values to the batch's row count); each process
reads its own shard. Gradient accumulation counts loader batches (gradient_accumulation_steps
of them per optimizer step). The loader has no length (rows of packed batches, skipped samples),
so args.max_steps must be set; a loader that runs out before it ends the training.

Every checkpoint holds each rank's loader state (mmfeed_loader_rank<N>.json); train(
resume_from_checkpoint=...) loads it and continues at the next batch: none replayed, none
skipped (the Trainer's own skipping of the batches already seen is turned off for mmfeed's
loaders, which resume themselves). A checkpoint taken with another number of processes is
resharded (Loader.reshard_states). eval_loader: options, or a Loader whose options each
evaluation reopens from the start (one epoch, in manifest order unless shuffle is given). With
several processes, the Trainer gathers after every evaluation batch: each rank's eval loader must
yield as many batches (padded batches with the default shard_remainder="pad" do; packed rows, or
a group whose samples all fail, may not).

The Trainer's arguments about data meet the loader's options: those naming a loader option, when
given (not at their default), fill the options a loader dict leaves unset (per_device_train_batch_size -> batch_size,
per_device_eval_batch_size -> the eval loader's batch_size, data_seed -> seed,
dataloader_pin_memory -> pin_memory, gradient_accumulation_steps -> the train loader's, so that
balance= splits each optimizer step's batches together; the Trainer's loss normaliser is then the
step's label tokens over all ranks and batches, average_tokens_across_devices as transformers
defaults it, so the gradient is the same however balance= splits the step: turning it off is
warned of); where the loader sets its own (or is an mmfeed.Loader), its
value applies, and an argument given another value than its default is warned of by name. The
arguments the loader has no counterpart for (dataloader_num_workers, auto_find_batch_size, ...)
are warned of when given. per_device_train_batch_size (and per_device_eval_batch_size) are then
set to the loader's batch: its batch_size, or one packed row (token_budget > 0), so that the
Trainer's figures (train_samples_per_second, total_train_batch_size) count the loader's batches.

A train loader that balances its ranks (balance="compute" or "tokens") is told each optimizer
step's time (Loader.report_step_time): the step's forward passes of the model in training,
timed inside the data-parallel wrapper, before any gradient all-reduce (CUDA events on a GPU),
the first step of each train() left out (its one-time work is not its samples' cost); so
loader.step_times() compares its cost model with the run's times, and
balance_cost="calibrated" fits its coefficients to them with no code of the caller's.
report_step_times=False leaves the reporting to the caller.

TRL: mmfeed.hf.SFTTrainer is trl.SFTTrainer with the same train_loader / eval_loader, given a
processing_class since it cannot fetch one (a tokenizer without a pad token will do: the loader's
batches come padded, TRL's collator never runs). TRL's dataset preparation is skipped; SFTConfig's
max_length and pad_to_multiple_of fill the loader's (max_length with truncation="truncate": TRL's
keep_start, the cut never inside an image); packing, padding_free and the other options of TRL's
preparation are warned of unless the loader does as they ask (packing: token_budget=).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import time
import warnings
from typing import Any

try:
    import transformers
    import transformers.trainer
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
    from transformers.utils import is_accelerate_available
except ImportError as e:
    raise ImportError(f"mmfeed.hf needs transformers, accelerate and torch ({e}): pip install 'mmfeed[hf]'") from e
# transformers' Trainer runs on accelerate, which transformers imports only when it is installed and
# recent enough; without it the Trainer's skip_first_batches, wrapped below, does not exist.
if not is_accelerate_available():
    raise ImportError(
        "mmfeed.hf needs accelerate (transformers' Trainer runs on it) and finds none, or one older than "
        f"transformers {transformers.__version__} takes: pip install 'mmfeed[hf]'"
    )

from mmfeed import _mmfeed
from mmfeed.batch import METADATA
from mmfeed.loader import Loader

LOADER_STATE = "mmfeed_loader_rank{rank}.json"


class _Feed:
    """The loader's batches, for the Trainer's epoch loop: one pass per iter(), never a length."""

    def __init__(self, loader: Loader):
        self.loader = loader

    def __iter__(self):
        yield from self.loader


# The Trainer skips the batches a resumed epoch has already seen by reading them again
# (accelerate's skip_first_batches, which also needs a torch DataLoader). An mmfeed loader resumes
# at its next batch itself: for it, skipping is nothing; the Trainer's step counting is unchanged.
_skip_first_batches = transformers.trainer.skip_first_batches


def _skip_none_for_mmfeed(dataloader, num_batches=0):
    if isinstance(dataloader, _Feed):
        return dataloader
    return _skip_first_batches(dataloader, num_batches)


transformers.trainer.skip_first_batches = _skip_none_for_mmfeed


def _options_of(loader) -> dict:
    """The options of a loader spec: an mmfeed.Loader's, or a dict of them (manifest included)."""
    if isinstance(loader, Loader):
        return loader.options()
    if not isinstance(loader, dict):
        raise TypeError(f"a loader is an mmfeed.Loader or a dict of its options, not {type(loader).__name__}")
    return dict(loader)


def _open(loader, rank: int, world_size: int, **defaults) -> Loader:
    if isinstance(loader, Loader):
        return loader
    options = {**defaults, **_options_of(loader)}
    options.setdefault("rank", rank)
    options.setdefault("world_size", world_size)
    return Loader(options.pop("manifest", None), **options)


def _matters(options: dict, name: str) -> bool:
    """Whether the loader option `name` changes what a loader of `options` delivers: a loader's
    gradient_accumulation_steps only when it balances its ranks (balance=)."""
    return name != "gradient_accumulation_steps" or _option(options, "balance") != "none"


def _option(options: dict, name: str):
    """The loader option `name` as `options` set it, else the option table's default."""
    if options.get(name) is not None:
        return options[name]
    row = next(o for o in _mmfeed.loader_options() if o["name"] == name)
    if row["type"] == "int":
        return int(row["default"])
    if row["type"] == "bool":
        return row["default"] == "true"
    return row["default"]


def _packs(options: dict) -> bool:
    return _option(options, "token_budget") > 0


def _chosen(config, argument: str) -> bool:
    """Whether the Trainer's arguments hold `argument` at another value than its default (one this
    version of transformers or TRL lacks is not chosen)."""
    if argument == "dataloader_pin_memory" and getattr(config, "use_cpu", False):
        return False  # TrainingArguments turns it off itself under use_cpu
    field = next((f for f in dataclasses.fields(config) if f.name == argument), None)
    return field is not None and field.default is not dataclasses.MISSING and getattr(config, argument) != field.default


def _warn_not_applied(config, argument: str, reason: str) -> None:
    warnings.warn(
        f"mmfeed.hf: {type(config).__name__}.{argument}={getattr(config, argument)!r} is not applied: {reason}",
        UserWarning,
        stacklevel=2,
    )


def _warn_per_rank_normaliser(config, options: dict) -> None:
    """A balanced loader moves samples between ranks: only the global step's label tokens as the
    loss normaliser (average_tokens_across_devices, transformers' default) keep a step's gradient
    what it is however its samples are split."""
    if _option(options, "balance") != "none" and not getattr(config, "average_tokens_across_devices", True):
        warnings.warn(
            f"mmfeed.hf: {type(config).__name__}.average_tokens_across_devices=False with the train loader's "
            f"balance={_option(options, 'balance')!r}: each rank's loss is averaged over its own label tokens, so "
            "a step's gradient depends on how balance= split its samples across the ranks; leave it True (the "
            "default: the global step's label tokens normalise the loss)",
            UserWarning,
            stacklevel=3,
        )


# The per-device batch size argument of each loader.
_BATCH_ARGUMENT = {"train": "per_device_train_batch_size", "eval": "per_device_eval_batch_size"}


class _ForwardTimes(transformers.TrainerCallback):
    """A balancing train loader's step times, reported by the Trainer: each optimizer step's
    forward passes of the model in training, timed from inside the data-parallel wrapper (after
    DDP's buffer broadcast, before any gradient all-reduce, which waits for the slowest rank and
    would make every rank's time alike), summed and given to Loader.report_step_time at the step's
    end. On CUDA between events on the current stream (read at the step's end), else by the clock.
    The forward alone stands for the step: the cost model prices forward FLOPs, the backward is
    about twice as much, and a common factor changes no plan. The first step of each train() is
    left out (Loader.skip_step_time): its one-time work would be taken for its samples' cost."""

    def __init__(self, trainer: Any) -> None:
        self._trainer = trainer
        self._handles: list = []
        self._spans: list = []  # (start, end): CUDA events, or time.perf_counter() seconds
        self._start = None
        self._cuda = False
        self._warm = False  # a step of this train() was reported or left out

    def attach(self, model) -> None:
        self._cuda = self._trainer.args.device.type == "cuda"
        self._handles = [model.register_forward_pre_hook(self._begin), model.register_forward_hook(self._end)]
        self._warm = False

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles, self._spans, self._start = [], [], None

    def _now(self):
        if not self._cuda:
            return time.perf_counter()
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _begin(self, module, args) -> None:
        if module.training:
            self._start = self._now()

    def _end(self, module, args, output) -> None:
        if module.training and self._start is not None:
            self._spans.append((self._start, self._now()))
        self._start = None

    def on_step_end(self, args, state, control, **kwargs):
        spans, self._spans = self._spans, []
        if not spans:
            return
        if not self._warm:
            self._warm = True
            self._trainer.train_loader.skip_step_time()
            return
        if self._cuda:
            spans[-1][1].synchronize()
            seconds = sum(start.elapsed_time(end) for start, end in spans) / 1000
        else:
            seconds = sum(end - start for start, end in spans)
        if seconds > 0:
            self._trainer.train_loader.report_step_time(seconds)


class _MmfeedTrainer:
    """What mmfeed.hf.Trainer and mmfeed.hf.SFTTrainer add to their Trainer: see the module docstring."""

    args: Any  # the Trainer's TrainingArguments (the Trainer this is mixed into sets it)
    add_callback: Any  # the Trainer's

    # The Trainer's arguments that name a loader option: (argument, option, the loaders it applies
    # to, the options set beside it when it fills the option).
    MAPPED: tuple[tuple[str, str, tuple[str, ...], dict], ...] = (
        ("data_seed", "seed", ("train",), {}),
        ("dataloader_pin_memory", "pin_memory", ("train", "eval"), {}),
        ("gradient_accumulation_steps", "gradient_accumulation_steps", ("train",), {}),
    )
    # The Trainer's arguments about data that the loader has no counterpart for: what it does instead.
    NOT_APPLIED: dict[str, str] = {
        "auto_find_batch_size": "the loader's batch_size stays as it is",
        "dataloader_num_workers": "the loader prepares the samples on its own threads (workers=)",
        "dataloader_persistent_workers": "the loader prepares the samples on its own threads (workers=)",
        "dataloader_prefetch_factor": "the loader prefetches batches itself (prefetch_batches=)",
        "dataloader_drop_last": "the loader's batches come as it makes them",
        "train_sampling_strategy": "the loader orders the samples (shuffle=, seed=)",
        "group_by_length": "the loader orders the samples (shuffle=, seed=)",
        "ignore_data_skip": "a resumed run continues at the loader's next batch (the checkpoint's loader state)",
    }

    def __init__(self, *args, train_loader=None, eval_loader=None, report_step_times: bool = True, **kwargs):
        if train_loader is None:
            raise TypeError("train_loader= is required: an mmfeed.Loader or a dict of its options")
        config = kwargs.get("args", args[1] if len(args) > 1 else None)
        if config is None or config.max_steps <= 0:
            raise ValueError(
                "mmfeed.hf: set TrainingArguments(max_steps=...): an mmfeed loader has no length "
                "(packed rows and skipped samples are known only as they come)"
            )
        loaders = {"train": train_loader} if eval_loader is None else {"train": train_loader, "eval": eval_loader}
        specs = self._meet(config, loaders)
        self._train_spec, self._eval_spec = specs["train"], specs.get("eval")
        _warn_per_rank_normaliser(config, _options_of(self._train_spec))
        self.train_loader: Loader | None = None
        kwargs = self._placeholders(kwargs, eval_loader is not None)
        super().__init__(*args, **kwargs)
        self.train_loader = _open(self._train_spec, self.args.process_index, self.args.world_size)
        self._forward_times: _ForwardTimes | None = None
        if report_step_times and _option(_options_of(self._train_spec), "balance") != "none":
            self._forward_times = _ForwardTimes(self)
            self.add_callback(self._forward_times)

    def _meet(self, config, loaders: dict) -> dict:
        """The loader specs with the options a dict leaves unset taken from the Trainer's arguments
        `config` (MAPPED, and the per-device batch sizes), which are then set to the loaders'
        batches; warns of each argument given (not at its default) that the loaders do not follow."""
        specs, options = {}, {}
        for role, spec in loaders.items():
            given = _options_of(spec)
            filled = dict(given)
            for argument, option, roles, beside in self.MAPPED:
                value = getattr(config, argument, None)
                if role not in roles or value is None:
                    continue
                if isinstance(spec, dict) and given.get(option) is None:
                    if not _chosen(config, argument):  # a default is no choice (TRL's max_length 1024)
                        continue
                    filled[option] = value
                    filled.update({k: v for k, v in beside.items() if given.get(k) is None})
                elif _option(given, option) != value and _chosen(config, argument) and _matters(given, option):
                    _warn_not_applied(
                        config, argument, f"the {role} loader's {option}={_option(given, option)!r} applies"
                    )
            argument = _BATCH_ARGUMENT[role]
            if isinstance(spec, dict) and given.get("batch_size") is None and not _packs(filled):
                filled["batch_size"] = getattr(config, argument)
            rows = 1 if _packs(filled) else _option(filled, "batch_size")
            if rows != getattr(config, argument) and _chosen(config, argument):
                what = f"token_budget={_option(filled, 'token_budget')}" if _packs(filled) else f"batch_size={rows}"
                _warn_not_applied(config, argument, f"the {role} loader's batches hold {rows} rows ({what})")
            setattr(config, argument, rows)
            specs[role] = spec if isinstance(spec, Loader) else filled
            options[role] = filled
        for argument, reason in self._not_applied(config, options):
            _warn_not_applied(config, argument, reason)
        return specs

    def _not_applied(self, config, options: dict) -> list[tuple[str, str]]:
        """The arguments given (not at their default) that the loaders, whose options by role are
        `options`, do not follow: (argument, what the loader does instead)."""
        return [(argument, reason) for argument, reason in self.NOT_APPLIED.items() if _chosen(config, argument)]

    def _placeholders(self, kwargs: dict, has_eval: bool) -> dict:
        # transformers.Trainer asks for an eval_dataset when it evaluates; the loader stands in.
        if has_eval and kwargs.get("eval_dataset") is None:
            kwargs["eval_dataset"] = "mmfeed eval_loader"
        return kwargs

    def get_train_dataloader(self):
        return _Feed(self.train_loader)

    def get_eval_dataloader(self, eval_dataset=None):
        if self._eval_spec is None:
            return super().get_eval_dataloader(eval_dataset)
        spec = self._eval_spec
        if isinstance(spec, Loader):
            spec = spec.options()
        # One pass, from the start, whatever the options say of the run's epochs and end.
        spec = {k: v for k, v in spec.items() if k != "end_position"}
        spec["epochs"] = 1
        return _Feed(_open(spec, self.args.process_index, self.args.world_size, shuffle=False))

    def _prepare_inputs(self, inputs):
        # The model's inputs: the batch less its metadata (sample ids, epoch, index), with
        # use_cache=False (a packed row must meet no KV cache).
        if hasattr(inputs, "model_inputs"):
            inputs = inputs.model_inputs()
        else:
            inputs = {k: v for k, v in inputs.items() if k not in METADATA}
        return super()._prepare_inputs(inputs)

    def _save_checkpoint(self, model, trial):
        folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, LOADER_STATE.format(rank=self.args.process_index))
        with open(path + ".tmp", "w") as f:
            json.dump(self.train_loader.state_dict(), f)
        os.replace(path + ".tmp", path)
        if self.args.process_index == 0:  # a reused folder's states of ranks this world has not
            for stale in glob.glob(os.path.join(folder, LOADER_STATE.format(rank="*"))):
                rank = stale.rsplit("rank", 1)[1].removesuffix(".json")
                if rank.isdigit() and int(rank) >= self.args.world_size:
                    os.remove(stale)
        super()._save_checkpoint(model, trial)

    def train(self, resume_from_checkpoint=None, trial=None, ignore_keys_for_eval=None, **kwargs):
        if resume_from_checkpoint is True:
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise ValueError(f"resume_from_checkpoint=True: no checkpoint in {self.args.output_dir}")
        if resume_from_checkpoint:
            self.train_loader.load_state_dict(self._loader_state(resume_from_checkpoint))
        if self._forward_times is not None:
            self._forward_times.attach(self.model)
        try:
            return super().train(
                resume_from_checkpoint=resume_from_checkpoint or None,
                trial=trial,
                ignore_keys_for_eval=ignore_keys_for_eval,
                **kwargs,
            )
        finally:
            if self._forward_times is not None:
                self._forward_times.detach()

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        # transformers 5.24 saves some models (the Qwen-VL ones) under their hub checkpoint's
        # names ("visual.", "model.layers.") and Trainer reads them back without the renaming:
        # every weight is reported missing and the resumed run trains from the initial weights.
        # Such a checkpoint is loaded as from_pretrained loads it.
        model = self.model if model is None else model
        names = _saved_weight_names(resume_from_checkpoint)
        if (
            isinstance(model, transformers.PreTrainedModel)
            and names
            and not self.is_fsdp_enabled
            and not names <= set(model.state_dict())
        ):
            loaded = type(model).from_pretrained(resume_from_checkpoint, dtype=model.dtype)
            model.load_state_dict(loaded.state_dict())
            return
        super()._load_from_checkpoint(resume_from_checkpoint, model)

    def _loader_state(self, checkpoint: str) -> dict:
        """This rank's loader state in `checkpoint`, resharded when it was written by another number
        of processes."""
        rank, world = self.args.process_index, self.args.world_size
        paths = sorted(glob.glob(os.path.join(checkpoint, LOADER_STATE.format(rank="*"))))
        if not paths:
            raise FileNotFoundError(
                f"{checkpoint} holds no mmfeed loader state ({LOADER_STATE.format(rank='N')}): "
                f"it was not written by mmfeed.hf"
            )
        states = []
        for path in paths:
            with open(path) as f:
                states.append(json.load(f))
        if len(states) == world and all(s.get("world_size", world) == world for s in states):
            return next(s for s in states if s.get("rank", 0) == rank)
        return Loader.reshard_states(states, rank, world)


def _saved_weight_names(checkpoint: str) -> set:
    """The tensor names of a checkpoint's safetensors weights (one file or an index); empty if none."""
    import safetensors

    index = os.path.join(checkpoint, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index) as f:
            return set(json.load(f)["weight_map"])
    single = os.path.join(checkpoint, "model.safetensors")
    if not os.path.isfile(single):
        return set()
    with safetensors.safe_open(single, "pt") as f:
        return set(f.keys())


class Trainer(_MmfeedTrainer, transformers.Trainer):
    """transformers.Trainer fed by an mmfeed loader (train_loader=, eval_loader=): see the module docstring."""


def _collated_by_the_loader(features):
    """The data collator SFTTrainer is given in place of TRL's (which needs a pad token): the
    loader's batches come collated, padded or packed, and never pass through it."""
    raise TypeError(
        "mmfeed.hf.SFTTrainer takes its batches from train_loader= and eval_loader=: a dataset given "
        "to it is not collated"
    )


def _sft_trainer_class():
    try:
        import datasets
        import trl
    except ImportError as e:
        raise ImportError(f"mmfeed.hf.SFTTrainer needs TRL ({e}): pip install 'mmfeed[trl]'") from e

    class SFTTrainer(_MmfeedTrainer, trl.SFTTrainer):
        """trl.SFTTrainer fed by an mmfeed loader: see the module docstring."""

        MAPPED = _MmfeedTrainer.MAPPED + (
            ("max_length", "max_length", ("train", "eval"), {"truncation": "truncate"}),
            ("pad_to_multiple_of", "pad_to_multiple_of", ("train", "eval"), {}),
        )
        NOT_APPLIED = {
            **_MmfeedTrainer.NOT_APPLIED,
            "dataset_text_field": "the loader's batches come tokenized",
            "dataset_num_proc": "the loader's batches come tokenized",
            "eos_token": "the batches end each turn as the loader's chat template does (chat_template=)",
            "chat_template_path": "the batches are rendered with the loader's chat template (chat_template=)",
            "truncation_mode": 'the loader keeps a sample\'s start (truncation="truncate")',
            "packing_strategy": "the loader packs first-fit over pack_window= samples",
        }

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("data_collator", _collated_by_the_loader)
            super().__init__(*args, **kwargs)

        def _meet(self, config, loaders: dict) -> dict:
            specs = super()._meet(config, loaders)
            # The batches come ready: TRL's preparation, and its checks of the samples it would
            # prepare (which would read the placeholder), stay out of the way.
            config.dataset_kwargs = {**(config.dataset_kwargs or {}), "skip_prepare_dataset": True}
            config.packing = config.padding_free = config.assistant_only_loss = False
            config.eval_packing = None
            return specs

        def _not_applied(self, config, options: dict) -> list[tuple[str, str]]:
            train, evaluation = options["train"], options.get("eval")
            packing = "the loader packs only with token_budget= (rows of at most that many tokens, one a batch)"
            followed = (
                ("packing", bool(getattr(config, "packing", False)) == _packs(train), packing),
                ("padding_free", bool(getattr(config, "padding_free", False)) == _packs(train), packing),
                (
                    "eval_packing",
                    evaluation is None or bool(getattr(config, "eval_packing", None)) == _packs(evaluation),
                    packing,
                ),
                ("shuffle_dataset", _option(train, "shuffle"), "the loader keeps the manifest's order (shuffle=False)"),
                (
                    "completion_only_loss",
                    getattr(config, "completion_only_loss", None) is not False,
                    "the loader trains the assistant's replies alone (labels=)",
                ),
            )
            unfollowed = [
                (argument, reason) for argument, ok, reason in followed if not ok and _chosen(config, argument)
            ]
            return super()._not_applied(config, options) + unfollowed

        def _placeholders(self, kwargs: dict, has_eval: bool) -> dict:
            # SFTTrainer insists on datasets and reads a sample of each (which would consume the
            # loader's first batch): one token of placeholder, never iterated.
            placeholder = datasets.Dataset.from_dict({"input_ids": [[0]], "labels": [[0]]})
            kwargs.setdefault("train_dataset", placeholder)
            if has_eval:
                kwargs.setdefault("eval_dataset", placeholder)
            return kwargs

    return SFTTrainer


def __getattr__(name: str):
    # trl is imported only by those who ask for its trainer.
    if name == "SFTTrainer":
        cls = _sft_trainer_class()
        globals()["SFTTrainer"] = cls
        return cls
    raise AttributeError(f"module 'mmfeed.hf' has no attribute {name!r}")


__all__ = ["LOADER_STATE", "SFTTrainer", "Trainer"]  # noqa: F822  (SFTTrainer: module __getattr__, above)
