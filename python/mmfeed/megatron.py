"""A Megatron-Core-shaped adapter: train/valid/test iterators over mmfeed loaders.

    train_it, valid_it, test_it = mmfeed.megatron.build_train_valid_test_data_iterators(
        train_manifest="train.jsonl", valid_manifest="valid.jsonl", test_manifest=None,
        tokenizer="tokenizer.json", batch_size=8, max_pixels=1003520, seed=1234)

Each iterator yields the batch dicts of mmfeed.Loader (torch tensors, zero copy); the train
iterator cycles epochs, the validation one restarts from the beginning when exhausted (as
Megatron's "cyclic" valid iterator does), a missing split gives None. Rank and world size are
the data-parallel ones: from torch.distributed (or RANK/WORLD_SIZE) unless given; `epochs`
(or train_epochs) and `shuffle` apply to the train split only. The state of the train loader is
`state_dict(train_it)` / resumable with `train_state=...`; each iterator has close().
"""

from __future__ import annotations

from mmfeed.loader import Loader
from mmfeed.torch import _distributed_rank_and_world


class _Cyclic:
    """Restarts a loader from the beginning each time it runs out."""

    def __init__(self, make):
        self._make = make
        self._loader = make()

    def __iter__(self):
        return self

    def __next__(self):
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


def build_train_valid_test_data_iterators(train_manifest, valid_manifest=None, test_manifest=None, *,
                                          train_epochs: int = 1_000_000, train_state: dict | None = None,
                                          **options):
    rank, world = _distributed_rank_and_world()
    options.setdefault("rank", rank)
    options.setdefault("world_size", world)
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
    valid_it = _Cyclic(fixed(valid_manifest)) if valid_manifest else None
    test_it = _Cyclic(fixed(test_manifest)) if test_manifest else None
    return train_it, valid_it, test_it


def state_dict(iterator) -> dict:
    return iterator.state_dict()
