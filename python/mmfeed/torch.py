"""PyTorch integration: an IterableDataset over the Loader.

    from torch.utils.data import DataLoader
    dataset = mmfeed.torch.Dataset(manifest="train.jsonl", tokenizer="tokenizer.json",
                                   batch_size=8, max_pixels=1003520)
    for batch in DataLoader(dataset, batch_size=None, num_workers=0):
        batch["input_ids"]      # torch.Tensor sharing the engine's buffer: no copy

The engine already batches, prefetches and runs its own threads, so the DataLoader must not
batch again or fork workers: use batch_size=None and num_workers=0 (the dataset refuses
worker processes). Rank and world size come from torch.distributed when it is initialised,
else from the RANK / WORLD_SIZE environment, unless given (as for mmfeed.Loader). state_dict()/load_state_dict()
follow torchdata's StatefulDataLoader convention (the dataset's state is taken with the
loader's and restored before iteration). Each pass over the dataset continues the run: the
next epoch after a complete pass, the rest of the pass after one left early.

A loop of your own over balanced ranks (balance=) normalises each step's loss by the step's label
tokens over all ranks, step_label_tokens(micro_batches):

    n = mmfeed.torch.step_label_tokens(micro_batches)             # all-reduced over the ranks
    for batch in micro_batches:
        loss = ddp(**batch.model_inputs(), num_items_in_batch=n).loss * world_size
        loss.backward()
"""

from __future__ import annotations

from collections.abc import Iterator

try:
    import torch.utils.data
except ImportError as e:
    raise ImportError(f"mmfeed.torch needs PyTorch ({e}): pip install 'mmfeed[torch]'") from e

from mmfeed.batch import Batch
from mmfeed.loader import Loader, apply_job_ranks


class Dataset(torch.utils.data.IterableDataset):
    """Batches from mmfeed as dicts of torch tensors (already batched: use batch_size=None).

    Each pass (each iter(), as a DataLoader makes for every `for batch in loader` loop) runs
    `epochs` epochs (default 1), each with its own order, following where the previous pass
    stopped: after a pass that ran to its end, the next epochs; after one left early (a break),
    the rest of that pass first. set_epoch(e) starts the next pass at epoch e instead.
    """

    def __init__(self, manifest, **options):
        super().__init__()
        apply_job_ranks(options, options.get("ignore_job_ranks", False))
        options.setdefault("rank", 0)  # outside a job: one rank
        options.setdefault("world_size", 1)
        options["tensors"] = "torch"
        self._epochs_per_pass = int(options.pop("epochs", 1))
        if self._epochs_per_pass < 1:
            raise ValueError("epochs must be at least 1")
        self._manifest = manifest
        self._options = options
        Loader(manifest, **options).close()  # unknown options and wrong types now, not at the first pass
        self._loader: Loader | None = None
        self._finished = False  # the current loader ran to its end
        self._start: dict | None = None  # where the next pass starts: a loaded state, set_epoch's
        self._end_epoch = self._epochs_per_pass  # the epoch before which the current (or next) pass ends

    def _state_at(self, epoch: int) -> dict:
        return {
            "seed": self._options.get("seed", 0),
            "rank": self._options["rank"],
            "world_size": self._options["world_size"],
            "epoch": epoch,
            "position": 0,
        }

    def _next_pass(self) -> tuple[dict | None, int]:
        """(the state the next pass starts from, the epoch it ends before)."""
        if self._start is not None or self._loader is None:
            return self._start, self._end_epoch
        if self._finished:
            return self._state_at(self._end_epoch), self._end_epoch + self._epochs_per_pass
        return self._loader.state_dict(), self._end_epoch

    def __iter__(self) -> Iterator[Batch]:
        info = torch.utils.data.get_worker_info()
        if info is not None:
            raise RuntimeError(
                "mmfeed.torch.Dataset runs its own threads: use DataLoader(num_workers=0, batch_size=None)"
            )
        start, self._end_epoch = self._next_pass()
        self.close()
        self._start = None
        self._loader = loader = Loader(self._manifest, epochs=self._end_epoch, **self._options)
        self._finished = False
        if start:
            loader.load_state_dict(start)
        return self._run(loader)

    def _run(self, loader: Loader):
        yield from loader
        if self._loader is loader:
            self._finished = True

    def set_epoch(self, epoch: int) -> None:
        """The next pass starts at `epoch`, at its first sample (the DistributedSampler convention)."""
        self.close()
        self._loader = None
        self._start = self._state_at(epoch)
        self._end_epoch = epoch + self._epochs_per_pass

    def state_dict(self) -> dict:
        """Where the next batch would come from: the loader's state, and the epoch its pass ends
        before (`pass_end_epoch`)."""
        start, end = self._next_pass()
        return {**(start or self._state_at(0)), "pass_end_epoch": end}

    def load_state_dict(self, state: dict) -> None:
        """Resumes at a state_dict(): the next pass starts where it says and ends at its
        `pass_end_epoch`."""
        state = dict(state)
        end = state.pop("pass_end_epoch", None)
        self.close()
        self._loader = None
        self._start = state or None
        self._end_epoch = end if end is not None else state.get("epoch", 0) + self._epochs_per_pass

    def errors(self) -> list[dict]:
        """The current pass's skipped samples (Loader.errors); none before the first."""
        return self._loader.errors() if self._loader is not None else []

    def metrics(self) -> dict:
        """The current pass's loader metrics (Loader.metrics); empty before the first."""
        return self._loader.metrics() if self._loader is not None else {}

    def close(self) -> None:
        """Stops the current pass's loader, if any (the next iteration opens another)."""
        if self._loader is not None:
            self._loader.close()


def step_label_tokens(batches, group=None) -> int:
    """The loss normaliser of an optimizer step whose samples are split across data-parallel
    ranks: the label tokens of `batches` (this rank's micro-batches of the step; the labels after
    the first position that are not -100, the tokens a causal LM's loss averages over, as
    transformers' Trainer counts them), summed over the ranks of `group` (torch.distributed's
    default group when it is initialised; this rank's alone otherwise). Give it to the model as
    num_items_in_batch= and multiply each loss by the world size (DDP averages the ranks'
    gradients): the step's gradient is then the same however balance= splits its samples."""
    import torch.distributed as dist

    tokens = sum(int(b["labels"][..., 1:].ne(-100).sum()) for b in batches)
    total = torch.tensor(tokens, dtype=torch.int64)
    if dist.is_available() and dist.is_initialized():
        if dist.get_backend(group) == "nccl":
            total = total.cuda(torch.cuda.current_device())
        dist.all_reduce(total, group=group)
    return int(total)
