"""The Loader: a JSONL manifest of image conversations in, padded training batches out.

    with mmfeed.Loader(manifest="demo-data/manifest.jsonl", tokenizer="tokenizer.json",
                       model="qwen2-vl", max_pixels=1003520, batch_size=8, seed=0, epochs=1,
                       rank=0, world_size=1, on_error="skip", tensors="np") as loader:
        for batch in loader:      # dict: input_ids, labels, attention_mask [B, L] int64,
            ...                   # pixel_values float32 [rows, 1176], image_grid_thw int64 [n, 3],
                                  # sample_ids, epoch, index
        loader.errors()           # [{"sample_id", "stage", "reason"}, ...]
        state = loader.state_dict()

Arrays share memory with the engine's batch buffer (no copy); the buffer returns to the pool
when the last array of the batch is freed. `tensors="torch"` gives torch tensors made from
DLPack capsules over the same memory (still no copy).
"""

from __future__ import annotations

import json
import os

from mmfeed import _mmfeed


class Loader:
    """Iterates batches; see the module docstring. Options (all keywords):

    manifest (a path or a list of paths), tokenizer, model ("qwen2-vl", "qwen2.5-vl",
    "qwen3-vl"), min_pixels, max_pixels, chat_template, batch_size, pad_to_multiple_of (round the
    sequence length up to a multiple, padded or packed), token_budget (pack into rows
    of at most this many tokens: input_ids [1, T], position_ids, cu_seqlens), pack_window,
    mrope (position_ids [3, B, L]), seed, shuffle, epochs, rank,
    world_size, mode ("concurrent" or "serial"), workers, prefetch_batches, fetch_inflight,
    max_length, truncation ("error" or "truncate"), labels ("qwen" or "content_and_eos"),
    on_error ("skip" or "fail"), max_error_fraction, tensors ("np" or "torch").
    """

    def __init__(self, manifest=None, *, tensors: str = "np", **options):
        if manifest is not None:
            options["manifests"] = [os.fspath(m) for m in ([manifest] if isinstance(manifest, (str, os.PathLike))
                                                          else manifest)]
        if "tokenizer" in options:
            options["tokenizer"] = os.fspath(options["tokenizer"])
        if tensors not in ("np", "torch"):
            raise ValueError("tensors must be 'np' or 'torch'")
        self._options = options
        self._tensors = tensors
        self._state = None
        self._core = None
        self._pid = os.getpid()

    def _engine(self):
        if os.getpid() != self._pid:
            # A forked child has the parent's memory but none of its engine threads: using the
            # parent's engine would hang. Refuse, and say what to do instead.
            raise RuntimeError(f"mmfeed.Loader was created in process {self._pid} and cannot be used in the forked "
                               f"process {os.getpid()}; create the Loader in the child (or use num_workers=0)")
        if self._core is None:
            self._core = _mmfeed._Loader(self._options, self._state)
        return self._core

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        if self._tensors == "torch":
            import torch  # noqa: F401  (the binding hands tensors to torch through DLPack)
        batch = self._engine().next(torch=self._tensors == "torch")
        if batch is None:
            raise StopIteration
        return batch

    def state_dict(self) -> dict:
        """Where the run stands after the last batch returned; load it to resume exactly there."""
        if self._core is None:
            return json.loads(self._state) if self._state else {}
        return json.loads(self._core.state())

    def load_state_dict(self, state: dict) -> None:
        if self._core is not None:
            raise RuntimeError("load_state_dict must be called before iterating")
        self._state = json.dumps(state)

    @staticmethod
    def reshard_states(states: list[dict], rank: int, world_size: int) -> dict:
        """The state for `rank` of a new world of `world_size`, from the states of every rank of
        the old world: the new ranks together deliver exactly what the old world had not."""
        return json.loads(_mmfeed.reshard_states([json.dumps(s) for s in states], rank, world_size))

    def errors(self) -> list[dict]:
        return self._engine().errors()

    def metrics(self) -> dict:
        return json.loads(self._engine().metrics())

    def close(self) -> None:
        if self._core is not None and os.getpid() == self._pid:
            self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
