"""A Megatron-Core-shaped adapter: train/valid/test iterators over mmfeed loaders, sharded by the
data-parallel rank, and the forward arguments of a packed THD batch.

    train_it, valid_it, test_it = mmfeed.megatron.build_train_valid_test_data_iterators(
        train_manifest="train.jsonl", valid_manifest="valid.jsonl", test_manifest=None,
        tokenizer="tokenizer.json", batch_size=8, max_pixels=1003520, seed=1234,
        token_budget=8192, packed_format="thd", pad_to_multiple_of=2 * cp_size)
    batch = next(train_it)
    output = model(**mmfeed.megatron.forward_args(batch))   # packed_seq_params included
    return output, mmfeed.megatron.loss_func(batch)           # calculate_per_token_loss=True

Rank and world size are the data-parallel ones: from megatron.core.parallel_state when it is
initialised (the data-parallel rank without context parallelism: tensor-, pipeline- and
context-parallel peers read the same batches, data-parallel ranks disjoint shards), else from an
explicit `group=` (a torch.distributed process group, or a DeviceMesh of the data-parallel
dimension), else torch.distributed's (or RANK/WORLD_SIZE) when no model parallelism exists;
`rank=`/`world_size=` override all. Each iterator yields mmfeed.Batch dicts (torch tensors, zero
copy); the train iterator runs `epochs` (or train_epochs) epochs, the validation and test ones
restart from the beginning when exhausted (Megatron's "cyclic" iterators), a missing split gives
None. `epochs` and `shuffle` apply to the train split only. The train loader's state is
`state_dict(train_it)`, resumable with `train_state=...`; each iterator has close().

THD batches (token_budget > 0, packed_format="thd") are laid out as Megatron-Bridge's Qwen-VL step
lays out its packed sequences: each sample padded to a multiple of pad_to_multiple_of (2 x the
context-parallel size; x the tensor-parallel size too with sequence parallelism), labels already
shifted to the next token, a float32 loss_mask, and PackedSeqParams' fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from mmfeed.batch import Batch
from mmfeed.loader import Loader, job_rank_and_world


def data_parallel_rank_and_world(group=None) -> tuple[int, int]:
    """This process's data-parallel rank and the data-parallel world size: of `group` (a process
    group or a one-dimensional DeviceMesh) when given, else of megatron.core.parallel_state when it
    is initialised (context-parallel peers share a rank: they split one batch's sequence), else
    torch.distributed's, else RANK / WORLD_SIZE."""
    import torch.distributed as dist

    if group is not None:
        if hasattr(group, "get_group"):  # a DeviceMesh of the data-parallel dimension
            group = group.get_group()
        return dist.get_rank(group), dist.get_world_size(group)
    try:
        from megatron.core import parallel_state
    except ImportError:
        parallel_state = None
    if parallel_state is not None and parallel_state.model_parallel_is_initialized():
        return (
            parallel_state.get_data_parallel_rank(with_context_parallel=False),
            parallel_state.get_data_parallel_world_size(with_context_parallel=False),
        )
    return job_rank_and_world() or (0, 1)


class _Cyclic:
    """Restarts a loader from the beginning each time it runs out."""

    def __init__(self, make: Callable[[], Loader]):
        self._make = make
        self._loader = make()

    def __iter__(self) -> _Cyclic:
        return self

    def __next__(self) -> Batch:
        try:
            return next(self._loader)
        except StopIteration:
            self._loader.close()
            self._loader = self._make()
            return next(self._loader)

    def state_dict(self) -> dict:
        return self._loader.state_dict()

    def close(self) -> None:
        self._loader.close()


def build_train_valid_test_data_iterators(
    train_manifest,
    valid_manifest=None,
    test_manifest=None,
    *,
    train_epochs: int = 1_000_000,
    train_state: dict | None = None,
    group=None,
    **options: Any,
) -> tuple[Loader, Iterator[Batch] | None, Iterator[Batch] | None]:
    """Megatron's train, validation and test iterators over mmfeed Loaders: the train split runs
    `train_epochs` epochs (or `epochs=`) in the options' order, resumed from `train_state` when
    given; validation and test (None without a manifest) run one epoch in manifest order, again and
    again (Megatron evaluates with fresh iterations of them). The data-parallel rank and world size
    come from megatron.core's parallel state (`group`: another process group) unless given.
    `options`: mmfeed.Loader's (tensors defaults to "torch")."""
    if "rank" not in options or "world_size" not in options:
        rank, world = data_parallel_rank_and_world(group)
        options.setdefault("rank", rank)
        options.setdefault("world_size", world)
        # Data-parallel ranks: tensor- and pipeline-parallel peers share one, so a job of several
        # processes may have a data-parallel world of one.
        options.setdefault("ignore_job_ranks", True)
    options.setdefault("tensors", "torch")
    train_epochs = options.pop("epochs", train_epochs)  # `epochs` is the train split's
    # Validation and test always run one epoch in manifest order, whatever the train split does.
    evaluation = {**options, "shuffle": False, "epochs": 1}

    def train():
        loader = Loader(train_manifest, epochs=train_epochs, **options)
        if train_state:
            loader.load_state_dict(train_state)
        return loader

    def fixed(manifest):
        return lambda: Loader(manifest, **evaluation)

    train_it = train()
    valid_it: Iterator[Batch] | None = _Cyclic(fixed(valid_manifest)) if valid_manifest else None
    test_it: Iterator[Batch] | None = _Cyclic(fixed(test_manifest)) if test_manifest else None
    return train_it, valid_it, test_it


def state_dict(iterator: Loader | _Cyclic) -> dict:
    """The resume state of an iterator build_train_valid_test_data_iterators returned: give the train
    one's to train_state= to resume there."""
    return iterator.state_dict()


def packed_seq_params(batch: Batch) -> Any:
    """megatron.core's PackedSeqParams of a THD batch (qkv_format "thd"): cu_seqlens_q/kv, their
    padded forms, and max_seqlen_q/kv the longest padded sample (with context parallelism each
    rank holds 1/CP of a padded sample, and Transformer Engine divides max_seqlen by CP)."""
    from megatron.core.packed_seq_params import PackedSeqParams

    _require_thd(batch)
    return PackedSeqParams(
        qkv_format="thd",
        cu_seqlens_q=batch["cu_seqlens"],
        cu_seqlens_kv=batch["cu_seqlens"],
        cu_seqlens_q_padded=batch["cu_seqlens_padded"],
        cu_seqlens_kv_padded=batch["cu_seqlens_padded"],
        max_seqlen_q=batch["max_seqlen_padded"],
        max_seqlen_kv=batch["max_seqlen_padded"],
    )


def forward_args(batch: Batch) -> dict[str, Any]:
    """The keyword arguments of a Megatron Qwen-VL forward for a THD batch: input_ids, position_ids,
    labels, loss_mask, packed_seq_params (attention_mask None: the sequences bound attention), and
    the vision tensors the batch holds."""
    _require_thd(batch)
    args = {
        "input_ids": batch["input_ids"],
        "position_ids": batch.get("position_ids"),
        "labels": batch["labels"],
        "loss_mask": batch["loss_mask"],
        "attention_mask": None,
        "packed_seq_params": packed_seq_params(batch),
    }
    for key in ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts"):
        if key in batch:
            args[key] = batch[key]
    return args


def loss_func(batch: Batch) -> Callable[[Any], tuple[Any, Any, dict[str, Any]]]:
    """Megatron's loss function for a THD batch, for forward_step to return beside the model's
    output (``return output, mmfeed.megatron.loss_func(batch)``) under
    ``TransformerConfig(calculate_per_token_loss=True)``: of the model's per-token losses it gives
    (their sum over the batch's loss_mask, the mask's tokens, {"lm loss": [sum, tokens]}); Megatron
    sums the tokens of a step's micro-batches and data-parallel ranks and divides the gradients by
    that total, so a step's gradient is the same however balance= splits its samples."""
    import torch

    _require_thd(batch)
    mask = batch["loss_mask"]

    def loss(output_tensor):
        losses = output_tensor.float().reshape(-1)
        weights = mask.to(losses.device, torch.float32).reshape(-1)
        total = torch.sum(losses * weights)
        tokens = weights.sum().detach().to(torch.int)
        return total, tokens, {"lm loss": torch.cat([total.detach().view(1), tokens.float().view(1)])}

    return loss


def _require_thd(batch: Batch) -> None:
    if "cu_seqlens_padded" not in batch:
        raise ValueError("not a THD batch: open the loader with token_budget > 0 and packed_format='thd'")
