"""PyTorch integration: an IterableDataset over the Loader.

    from torch.utils.data import DataLoader
    dataset = mmfeed.torch.Dataset(manifest="train.jsonl", tokenizer="tokenizer.json",
                                   batch_size=8, max_pixels=1003520)
    for batch in DataLoader(dataset, batch_size=None, num_workers=0):
        batch["input_ids"]      # torch.Tensor sharing the engine's buffer: no copy

The engine already batches, prefetches and runs its own threads, so the DataLoader must not
batch again or fork workers: use batch_size=None and num_workers=0 (the dataset refuses
worker processes). Rank and world size come from torch.distributed when it is initialised,
else from the RANK / WORLD_SIZE environment, unless given. state_dict()/load_state_dict()
follow torchdata's StatefulDataLoader convention (the dataset's state is taken with the
loader's and restored before iteration).
"""

from __future__ import annotations

import os

import torch.utils.data

from mmfeed.loader import Loader


def _distributed_rank_and_world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


class Dataset(torch.utils.data.IterableDataset):
    """Batches from mmfeed as dicts of torch tensors (already batched: use batch_size=None)."""

    def __init__(self, manifest, **options):
        super().__init__()
        rank, world = _distributed_rank_and_world()
        options.setdefault("rank", rank)
        options.setdefault("world_size", world)
        options["tensors"] = "torch"
        self._manifest = manifest
        self._options = options
        self._state: dict | None = None
        self._loader: Loader | None = None

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is not None:
            raise RuntimeError("mmfeed.torch.Dataset runs its own threads: use DataLoader(num_workers=0, "
                               "batch_size=None)")
        if self._loader is not None:
            self._loader.close()
        self._loader = Loader(self._manifest, **self._options)
        if self._state:
            self._loader.load_state_dict(self._state)
            self._state = None
        return self._loader

    def state_dict(self) -> dict:
        if self._loader is not None:
            return self._loader.state_dict()
        return dict(self._state or {})

    def load_state_dict(self, state: dict) -> None:
        self._state = dict(state)

    def errors(self) -> list[dict]:
        return self._loader.errors() if self._loader is not None else []

    def metrics(self) -> dict:
        return self._loader.metrics() if self._loader is not None else {}

    def close(self) -> None:
        if self._loader is not None:
            self._loader.close()
