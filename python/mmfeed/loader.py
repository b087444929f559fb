"""The Loader: a JSONL manifest of image conversations in, padded training batches out.

    with mmfeed.Loader(manifest="demo-data/manifest.jsonl", tokenizer="tokenizer.json",
                       model="qwen2-vl", max_pixels=1003520, batch_size=8, seed=0, epochs=1,
                       rank=0, world_size=1, on_error="skip", tensors="torch") as loader:
        for batch in loader:      # dict: input_ids, labels, attention_mask [B, L] int64,
            ...                   # pixel_values float32 [rows, 1176], image_grid_thw int64 [n, 3],
                                  # sample_ids, epoch, index
        loader.errors()           # [{"sample_id", "stage", "reason"}, ...]
        state = loader.state_dict()

Batches are torch tensors made from DLPack capsules over the engine's batch buffer (no copy),
or with `tensors="np"` numpy arrays over the same memory; the buffer returns to the pool when
the last tensor of the batch is freed.

`device="cuda:0"` (with tensors="torch") adds a copy stage: a thread takes each batch as the
engine finishes it and copies it to the GPU on a side stream (from pinned memory when a CUDA
runtime is present, so the copy is asynchronous), up to two batches ahead; the trainer gets
device tensors whose copy its current stream waits for, without blocking the host.
`state_dict()` counts only the batches handed to the trainer, not those staged ahead.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading

from mmfeed import _mmfeed

_END = object()


class _DeviceStage:
    """The copy stage: host batches in, device batches out, `depth` ahead of the trainer."""

    def __init__(self, source, state, device, depth: int = 2):
        import torch

        self._torch = torch
        self._device = device
        self._stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._held = None  # the host batch of the last device batch handed over, until its copy is done
        self._failure = None  # the engine's error, raised again on every later next() as the engine does
        self._thread = threading.Thread(target=self._run, args=(source, state), name="mmfeed-h2d", daemon=True)
        self._thread.start()

    def _run(self, source, state) -> None:
        torch = self._torch
        try:
            if self._stream is not None:
                torch.cuda.set_device(self._device)  # this thread's own current device, as the trainer's
            while not self._stop.is_set():
                host = source()
                if host is None:
                    break
                after = state()  # the engine's state once this batch is delivered
                with torch.cuda.stream(self._stream) if self._stream else contextlib.nullcontext():
                    out = {k: v.to(self._device, non_blocking=True) if isinstance(v, torch.Tensor) else v
                           for k, v in host.items()}
                    event = None
                    if self._stream is not None:
                        event = torch.cuda.Event()
                        event.record(self._stream)
                self._put((out, event, host, after))
            self._put(_END)
        except BaseException as e:  # noqa: BLE001  (handed to the trainer's thread)
            self._put(e)

    def _put(self, item) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next(self):
        """(device batch, engine state after it), or None at the end."""
        if self._failure is not None:
            raise self._failure
        while True:
            try:
                item = self._queue.get(timeout=0.1)
                break
            except queue.Empty:
                if self._stop.is_set() or not self._thread.is_alive() and self._queue.empty():
                    return None  # closed
        if item is _END:
            self._queue.put(_END)
            return None
        if isinstance(item, BaseException):
            self._failure = item
            raise item
        out, event, host, after = item
        if self._held is not None and self._held[1] is not None:
            self._held[1].synchronize()  # the previous copy is done: its host buffer may be reused
        self._held = (host, event)
        if event is not None:
            current = self._torch.cuda.current_stream(self._device)
            current.wait_event(event)
            for value in out.values():
                if isinstance(value, self._torch.Tensor):
                    value.record_stream(current)  # the side stream's allocation is used on this one
        return out, after

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
        self._thread.join()


class Loader:
    """Iterates batches; see the module docstring.

    Loader(manifest=None, *, tensors="torch", device=None, **options)

    manifest: a path or URI, or a list of them (the `manifests` option). tensors: "torch" or "np".
    device: None (host tensors), or a torch device such as "cuda:0": batches arrive there, copied
    ahead on a side stream. With device=, pin_device defaults to that device, else to torch's
    current device once CUDA is initialised.

    The engine's options (keywords; None leaves the default), listed below from its option table:
    """


    def __init__(self, manifest=None, *, tensors: str = "torch", device=None, **options):
        if manifest is not None:
            options["manifests"] = [os.fspath(m) for m in ([manifest] if isinstance(manifest, (str, os.PathLike))
                                                          else manifest)]
        options = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in options.items()}
        for name in ("min_pixels", "max_pixels"):
            if isinstance(options.get(name), (int, float)) and options[name] <= 0:
                raise ValueError(f"{name} must be positive, not {options[name]} (leave it unset for the model's)")
        _mmfeed._check_loader_options(options)  # unknown names and wrong types now, not at the first batch
        if tensors not in ("np", "torch"):
            raise ValueError("tensors must be 'np' or 'torch'")
        self._device = None
        if device is not None:
            if tensors != "torch":
                raise ValueError("device= needs tensors='torch'")
            import torch

            self._device = torch.device(device)
            if self._device.type == "cuda":
                if not torch.cuda.is_available():
                    raise RuntimeError(f"device={device!r}: this torch has no usable CUDA device "
                                       f"(torch {torch.__version__}); leave device unset for host tensors")
                if self._device.index is None:  # "cuda": the current device, fixed now for the copy thread
                    self._device = torch.device("cuda", torch.cuda.current_device())
        self._options = options
        self._tensors = tensors
        self._state = None
        self._core = None
        self._stage = None
        self._delivered_state = None  # with a copy stage: the state after the last batch handed over
        self._pid = os.getpid()
        self._closed = False
        # The engine (and the copy stage) open on first use, which releases the GIL: one thread opens.
        self._opening = threading.Lock()

    def _engine(self):
        if os.getpid() != self._pid:
            # A forked child has the parent's memory but none of its engine threads: using the
            # parent's engine would hang. Refuse, and say what to do instead.
            raise RuntimeError(f"mmfeed.Loader was created in process {self._pid} and cannot be used in the forked "
                               f"process {os.getpid()}; create the Loader in the child (or use num_workers=0)")
        if self._core is None:
            with self._opening:
                if self._core is None:
                    self._core = self._open()
        return self._core

    def _open(self):
        if self._tensors == "torch":
            try:
                import torch  # noqa: F401  (the binding hands tensors to torch through DLPack)
            except ImportError as e:
                raise ImportError("mmfeed.Loader yields torch tensors by default and PyTorch is not installed: "
                                  "install torch, or pass tensors='np' for numpy arrays") from e
        options = self._options
        if "pin_device" not in options and (device := self._trainer_gpu()) is not None:
            options = {**options, "pin_device": device}
        return _mmfeed._Loader(options, self._state)

    def _trainer_gpu(self):
        """The GPU the trainer uses, whose context should page-lock the batch buffers: device=, else
        torch's current device once torch has initialised CUDA; None leaves the choice to the engine
        (LOCAL_RANK, else 0)."""
        torch = sys.modules.get("torch")
        if self._device is not None and self._device.type == "cuda":
            return self._device.index
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.current_device()
        return None

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        if self._closed and self._core is None:
            raise StopIteration  # closed before it was opened
        if self._device is not None:
            return self._next_on_device()
        batch = self._engine().next(torch=self._tensors == "torch")
        if batch is None:
            raise StopIteration
        return batch

    def _next_on_device(self) -> dict:
        if self._stage is None:
            core = self._engine()
            with self._opening:
                if self._stage is None:
                    self._delivered_state = core.state()  # where the run starts (after load_state_dict)
                    self._stage = _DeviceStage(lambda: core.next(torch=True), core.state, self._device)
        item = self._stage.next()
        if item is None:
            raise StopIteration
        batch, self._delivered_state = item
        return batch

    def state_dict(self) -> dict:
        """Where the run stands after the last batch returned; load it to resume exactly there."""
        if self._core is None:
            return json.loads(self._state) if self._state else {}
        if self._stage is not None:  # batches staged ahead are not delivered yet
            return json.loads(self._delivered_state)
        return json.loads(self._core.state())

    def load_state_dict(self, state: dict) -> None:
        """Resume from `state` (taken by state_dict()); {} -- the state of a loader not yet iterated --
        starts from the beginning."""
        if self._core is not None:
            raise RuntimeError("load_state_dict must be called before iterating (the engine is already open)")
        self._state = json.dumps(state) if state else None

    @staticmethod
    def reshard_states(states: list[dict], rank: int, world_size: int) -> dict:
        """The state for `rank` of a new world of `world_size`, from the states of every rank of
        the old world: the new ranks together deliver exactly what the old world had not."""
        return json.loads(_mmfeed.reshard_states([json.dumps(s) for s in states], rank, world_size))

    def errors(self) -> list[dict]:
        """The samples skipped or failed so far; [] before the first batch is asked for."""
        return self._engine().errors() if self._core is not None else []

    def metrics(self) -> dict:
        """The engine's figures; {} before the first batch is asked for (asking does not start it)."""
        return json.loads(self._engine().metrics()) if self._core is not None else {}

    def close(self) -> None:
        self._closed = True
        if self._core is not None and os.getpid() == self._pid:
            self._core.close()
            if self._stage is not None:
                self._stage.close()

    def __del__(self):
        # Dropped without close(): stop the engine's threads and the copy stage's now. The copy
        # thread holds the engine, so without this neither would ever end.
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _option_lines() -> str:
    lines = []
    for o in _mmfeed.loader_options():
        value = o["default"].capitalize() if o["type"] == "bool" else o["default"]  # True, as Python spells it
        default = f" (default {value})" if value else ""
        lines.append(f"    {o['name']}: {o['type']}. {o['doc']}{default}")
    return "\n".join(lines) + "\n"


Loader.__doc__ = Loader.__doc__.rstrip() + "\n" + _option_lines()
