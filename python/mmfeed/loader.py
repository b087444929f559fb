"""The Loader: a JSONL manifest of image conversations in, padded training batches out.

    with mmfeed.Loader(manifest="demo-data/manifest.jsonl", tokenizer="tokenizer.json",
                       model="qwen2-vl", max_pixels=1003520, batch_size=8, seed=0, epochs=1,
                       on_error="skip", tensors="torch") as loader:
        for batch in loader:      # mmfeed.Batch (a dict): input_ids, labels, attention_mask,
            ...                   # mm_token_type_ids [B, L] int64, position_ids [3, B, L],
                                  # pixel_values float32 [rows, 1176], image_grid_thw int64 [n, 3],
                                  # sample_ids, epoch, index; model(**batch) takes it as it is
    # pixels="bfloat16" or "uint8" (unnormalized: mmfeed.normalize_pixels on the GPU): fewer bytes
        loader.errors()           # [{"sample_id", "stage", "reason"}, ...]
        state = loader.state_dict()

Under torchrun (or any launcher that sets RANK and WORLD_SIZE) each process reads its own shard:
rank and world_size default to the job's (job_rank_and_world), and an explicit world_size=1 in a
job of several ranks is refused, since every rank would train on all the data
(ignore_job_ranks=True allows it on purpose).

Batches are torch tensors made from DLPack capsules over the engine's batch buffer (no copy),
or with `tensors="np"` numpy arrays over the same memory; the buffer returns to the pool when
the last tensor of the batch is freed.

`device="cuda:0"` (with tensors="torch") adds the engine's copy stage: its own thread takes
each batch as the engine finishes it and copies the batch's buffer to the GPU in one copy on its
own stream (asynchronously from the pinned batch memory), up to two batches ahead, waiting for
each copy itself; the trainer gets device tensors whose copy is complete, without the GIL held
by any copy. Device memory the trainer lets go of is reused only after the work its current
stream had queued by then. `state_dict()` counts only the batches handed to the trainer, not
those staged ahead.

Pinned memory and torch: torch reports a tensor as pinned (`is_pinned()`) only once it has
initialised CUDA itself. When the batch memory is pinned and torch can use CUDA, the Loader
initialises torch's CUDA (`torch.cuda.init()`, no context on any device) before its first batch,
so that `is_pinned()` and `non_blocking=True` copies see the memory as pinned in whatever order
the trainer touches torch and the loader.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Literal

from mmfeed import _mmfeed, _native
from mmfeed.batch import Batch, make_batch
from mmfeed.step_times import Calibration, StepTimes

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

    from mmfeed.options import LoaderOptions

_SOURCE_KEYS = ("manifest", "weight", "media_root", "max_pixels", "chat_template")


def _expand_sources(sources, options: dict) -> None:
    """`sources=[{"manifest": ..., "weight": ..., "media_root": ..., "max_pixels": ...,
    "chat_template": ...}, ...]` (or plain paths) as the manifests, weights, media_root,
    source_max_pixels and source_chat_template options, one entry per source."""
    if "manifests" in options:
        raise ValueError("give the manifests as sources= or as manifest=/manifests=, not both")
    if isinstance(sources, (str, os.PathLike, dict)):
        sources = [sources]
    rows = []
    for i, source in enumerate(sources):
        row = {"manifest": source} if isinstance(source, (str, os.PathLike)) else dict(source)
        unknown = sorted(set(row) - set(_SOURCE_KEYS))
        if unknown or "manifest" not in row:
            raise ValueError(
                f"sources[{i}] takes the keys {', '.join(_SOURCE_KEYS)} (manifest required)"
                + (f", not {', '.join(unknown)}" if unknown else "")
            )
        rows.append(row)
    weighted = [("weight" in r) for r in rows]
    if any(weighted) and not all(weighted):
        raise ValueError(
            f"sources[{weighted.index(False)}] has no weight while others have one: weigh every source, or none"
        )
    options["manifests"] = [os.fspath(r["manifest"]) for r in rows]
    if all(weighted) and rows:
        options["weights"] = [r["weight"] for r in rows]
    if any("media_root" in r for r in rows):
        options["media_root"] = [os.fspath(r.get("media_root", "")) for r in rows]
    if any("max_pixels" in r for r in rows):
        options["source_max_pixels"] = [r.get("max_pixels") or 0 for r in rows]
    if any("chat_template" in r for r in rows):
        options["source_chat_template"] = [r.get("chat_template") or "" for r in rows]


def engine_options(manifest, options: dict) -> dict:
    """The engine's options from a Loader's arguments: `manifest` (a path or URI, or a list of
    them) as the manifests option, or `sources` (per-source manifest, weight and media_root) as
    the manifests, weights and media_root options; paths as strings; names and types checked."""
    if manifest is not None:
        options["manifests"] = [
            os.fspath(m) for m in ([manifest] if isinstance(manifest, (str, os.PathLike)) else manifest)
        ]
    if options.get("sources") is not None:
        _expand_sources(options.pop("sources"), options)
    options.pop("sources", None)

    def paths(v):  # a path as a string, in a list or alone
        if isinstance(v, (list, tuple)):
            return [os.fspath(x) if isinstance(x, os.PathLike) else x for x in v]
        return os.fspath(v) if isinstance(v, os.PathLike) else v

    options = {k: paths(v) for k, v in options.items()}
    if options.get("balance_cost") == "calibrated":  # (mmfeed.Loader takes it out before)
        raise ValueError(
            "balance_cost='calibrated' is mmfeed.Loader's own: it fits the coefficients to the step times "
            "its trainer reports; give the four coefficients here (Loader.step_times()['fitted_balance_cost'])"
        )
    _mmfeed._check_loader_options(options)  # unknown names and wrong types now, not at the first batch
    return options


def job_rank_and_world() -> tuple[int, int] | None:
    """This process's rank and the job's world size: torch.distributed's when it is initialised,
    else the RANK and WORLD_SIZE environment variables (torchrun, torch.distributed.launch and
    most cluster launchers set them); None outside such a job. torch is not imported here: a
    process group exists only where the trainer imported it."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    if "WORLD_SIZE" not in os.environ:
        return None
    values = {}
    for name in ("RANK", "WORLD_SIZE"):
        text = os.environ.get(name, "0")
        try:
            values[name] = int(text)
        except ValueError:
            raise ValueError(f"the environment's {name}={text!r} is not a number") from None
    rank, world = values["RANK"], values["WORLD_SIZE"]
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"the environment's RANK={rank} and WORLD_SIZE={world} name no rank of a job")
    return rank, world


def apply_job_ranks(options: dict, ignore_job_ranks: bool = False) -> None:
    """Fills the rank and world_size options a Loader was not given from the job it runs in
    (job_rank_and_world), and refuses world_size=1 given in a job of several ranks, where every
    rank would read every sample: ignore_job_ranks=True reads the options as given."""
    job = None if ignore_job_ranks else job_rank_and_world()
    if job is None:
        return
    rank, world = job
    if options.get("world_size") == 1 and world > 1:
        raise ValueError(
            f"world_size=1, but this process is rank {rank} of a job of {world} ranks "
            f"(torch.distributed, or RANK/WORLD_SIZE): every rank would train on all the data. Leave "
            f"rank and world_size unset (they default to the job's), or pass ignore_job_ranks=True "
            f"to read all of it on every rank on purpose"
        )
    if options.get("world_size") is None:
        options["world_size"] = world
    if options.get("rank") is None:
        if rank >= options["world_size"]:
            raise ValueError(
                f"world_size={options['world_size']} and no rank: this process is rank {rank} of the job, "
                f"which such a world has not; give rank= too"
            )
        options["rank"] = rank


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """The loader options a config file sets, read by the engine as `mmfeed run --config` reads
    it: a JSON object, or a TOML table (``*.toml``), of options named with ``_`` or ``-`` and a
    blend's ``[[sources]]`` (manifest, weight, media_root, max_pixels, chat_template) expanded
    into the manifests and per-source options. ``mmfeed.Loader(**mmfeed.read_config("run.toml"))``
    opens the run the CLI would; keywords given beside it override the file's."""
    return json.loads(_mmfeed.read_config(os.fspath(path)))


def balance_report(manifest=None, **options) -> dict[str, Any]:
    """What balancing the ranks by cost gives a run of these Loader options (world_size,
    batch_size, gradient_accumulation_steps, balance: "compute" unless given, balance_cost, the
    model and its pixel bounds; token_budget: packed rows, gradient_accumulation_steps of them a
    step), without starting it: ``steps``, one (drawn_max, drawn_mean, planned_max, planned_mean)
    a step, in millions of FLOPs; ``mean_drawn`` and ``mean_planned``, the steps' mean largest rank cost over
    the mean; ``mean_free`` (padded; 0 packed), what per-rank counts that differ would give (a
    batch of 1 to 2 x batch_size samples, the Loader keeps them equal); ``samples``, ``media``
    and ``media_nominal`` (costed at a nominal size: no index);
    ``cost_seconds`` and ``plan_seconds``, what the costs and the plans took on one core. As
    ``mmfeed balance-report``; docs/loading.md, "Ranks balanced by compute"."""
    return _mmfeed.balance_report(engine_options(manifest, dict(options)))


class LoaderInputs:
    """The manifests as read and the tokenizer as loaded, for opening many Loaders over the same
    data without reading them again (a 150k-token tokenizer takes about 0.25 s to load, a large
    remote manifest far longer):

        inputs = mmfeed.LoaderInputs("s3://bucket/train.jsonl", tokenizer="tokenizer.json")
        for part_state in states:
            loader = mmfeed.Loader("s3://bucket/train.jsonl", tokenizer="tokenizer.json", inputs=inputs)

    LoaderInputs(manifest=None, **options) reads with the options that matter to the inputs
    (manifests, tokenizer, max_manifest_bytes); a Loader given inputs= must have the same ones.
    The manifests are a snapshot: loaders opened from them see the lines read here.
    """

    def __init__(self, manifest=None, **options: Unpack[LoaderOptions]):
        self._core = _mmfeed._LoaderInputs(engine_options(manifest, dict(options)))
        _native.hold(self)

    def _release_native(self) -> None:
        self._core = None  # type: ignore[assignment]  # at interpreter exit (mmfeed._native), not used after


class Loader:
    """Iterates batches; see the module docstring.

    Loader(manifest=None, *, tensors="torch", device=None, inputs=None, ignore_job_ranks=False,
           calibration_steps=None, **options)

    manifest: a path or URI, or a list of them (the `manifests` option). A blend names its
    manifests with weights (`Loader(["a.jsonl", "b.json"], weights=[0.7, 0.3], blend_samples=...)`)
    or as sources=[{"manifest": "a.jsonl", "weight": 0.7, "media_root": "images/", "max_pixels": 401408,
    "chat_template": "qwen3-vl"}, ...];
    metrics() then counts each source's samples (loader.source<i>.samples). tensors: "torch" or "np".
    device: None (host tensors), or a CUDA device such as "cuda:0": batches arrive there, copied
    ahead by the engine on its own stream. With device=, pin_device defaults to that device, else
    to torch's current device once CUDA is initialised. inputs: a LoaderInputs read with the same
    manifests and tokenizer, used instead of reading them again. rank and world_size default to the
    job's (torch.distributed, else RANK/WORLD_SIZE); ignore_job_ranks=True leaves them to the
    options alone (world_size=1 in a job of several ranks is refused otherwise).
    balance_cost="calibrated" (with balance="compute"): the run starts with the model's default
    coefficients; once every rank has reported calibration_steps steps (report_step_time; default
    16) the coefficients are fitted to all the ranks' times (gathered over torch.distributed's
    default group, model-parallel peers included) and every rank plans with them from the first
    step none has begun (docs/loading.md, "Ranks balanced by compute").

    The engine's options (keywords; None leaves the default), listed below from its option table:
    """

    def __init__(
        self,
        manifest=None,
        *,
        tensors: Literal["torch", "np"] = "torch",
        device=None,
        inputs: LoaderInputs | None = None,
        ignore_job_ranks: bool = False,
        calibration_steps: int | None = None,
        **options: Unpack[LoaderOptions],
    ):
        apply_job_ranks(options, ignore_job_ranks)  # type: ignore[arg-type]  # a TypedDict read as a dict
        calibrated = options.get("balance_cost") == "calibrated"
        if calibrated:
            if options.get("balance") != "compute":
                raise ValueError(
                    "balance_cost='calibrated' fits balance='compute''s cost model: give balance='compute'"
                )
            del options["balance_cost"]  # the engine starts with the model's default
        elif calibration_steps is not None:
            raise ValueError("calibration_steps= is for balance_cost='calibrated'")
        for name in ("min_pixels", "max_pixels"):
            value = options.get(name)
            if isinstance(value, (int, float)) and value <= 0:
                raise ValueError(f"{name} must be positive, not {value} (leave it unset for the model's)")
        if inputs is not None and not isinstance(inputs, LoaderInputs):
            raise TypeError(f"inputs must be a mmfeed.LoaderInputs, not {type(inputs).__name__}")
        self._inputs = inputs
        if tensors not in ("np", "torch"):
            raise ValueError("tensors must be 'np' or 'torch'")
        self._device = None
        if (index := options.pop("cuda_device", None)) is not None and index >= 0:  # the engine's name for device=
            if device is not None:
                raise ValueError("give device= or cuda_device=, not both")
            device = f"cuda:{index}"
        if device is not None:
            if tensors != "torch":
                raise ValueError("device= needs tensors='torch'")
            import torch

            self._device = torch.device(device)
            if self._device.type != "cuda":
                raise ValueError(
                    f"device={device!r}: batches can be put on a CUDA device; host batches need no "
                    f"device (leave it unset)"
                )
            if not torch.cuda.is_available():
                raise RuntimeError(
                    f"device={device!r}: this torch has no usable CUDA device "
                    f"(torch {torch.__version__}); leave device unset for host tensors"
                )
            if self._device.index is None:  # "cuda": the current device, fixed now for the copy thread
                self._device = torch.device("cuda", torch.cuda.current_device())
        self._options = engine_options(manifest, dict(options))
        self._tensors = tensors
        self._state: str | None = None  # a resume state to open with, as JSON
        self._core = None
        self._pid = os.getpid()
        self._closed = False
        # The engine (and the copy stage) open on first use, which releases the GIL: one thread opens.
        self._opening = threading.Lock()
        # A balancing loader prices what it delivers, for the step times the trainer reports.
        self._step_times = StepTimes() if (self._options.get("balance") or "none") != "none" else None
        self._calibration = (
            Calibration(
                16 if calibration_steps is None else calibration_steps,
                self._options.get("rank") or 0,
                self._options.get("world_size") or 1,
            )
            if calibrated
            else None
        )

    def _engine(self):
        if os.getpid() != self._pid:
            # A forked child has the parent's memory but none of its engine threads: using the
            # parent's engine would hang. Refuse, and say what to do instead.
            raise RuntimeError(
                f"mmfeed.Loader was created in process {self._pid} and cannot be used in the forked "
                f"process {os.getpid()}; create the Loader in the child (or use num_workers=0)"
            )
        if self._core is None:
            with self._opening:
                if self._core is None:
                    self._core = self._open()
                    _native.hold(self)
        return self._core

    def _open(self):
        if self._tensors == "torch":
            try:
                import torch  # (the binding hands tensors to torch through DLPack)
            except ImportError as e:
                raise ImportError(
                    "mmfeed.Loader yields torch tensors by default and PyTorch is not installed: "
                    "pip install 'mmfeed[torch]', or pass tensors='np' for numpy arrays"
                ) from e
            if (
                self._options.get("pin_memory", True)
                and torch.cuda.is_available()
                and _mmfeed.cuda_runtime().endswith("pinned batch memory")
            ):
                torch.cuda.init()  # is_pinned() is False for every pointer until torch has (module docstring)
        options = self._options
        if "pin_device" not in options and (device := self._trainer_gpu()) is not None:
            options = {**options, "pin_device": device}
        if self._device is not None:
            options = {**options, "cuda_device": self._device.index}
        if self._calibration is not None and not self._calibration.done and self._inputs is None:
            self._inputs = LoaderInputs.__new__(LoaderInputs)  # read once: the switch opens the engine again
            self._inputs._core = _mmfeed._LoaderInputs(self._options)
            _native.hold(self._inputs)
        return _mmfeed._Loader(options, self._state, None if self._inputs is None else self._inputs._core)

    def _trainer_gpu(self):
        """The GPU the trainer uses, whose context should page-lock the batch buffers: device=, else
        torch's current device once torch has initialised CUDA; None leaves the choice to the engine
        (LOCAL_RANK, else 0)."""
        torch = sys.modules.get("torch")
        if self._device is not None:
            return self._device.index
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.current_device()
        return None

    def __iter__(self) -> Loader:
        return self

    def __next__(self) -> Batch:
        if self._closed and self._core is None:
            raise StopIteration  # closed before it was opened
        core = self._engine()
        stream = 0
        if self._device is not None:  # the trainer's stream on the device reads the batch
            stream = sys.modules["torch"].cuda.current_stream(self._device).cuda_stream
        batch = core.next(torch=self._tensors == "torch", stream=stream)
        if batch is None:
            raise StopIteration
        batch = make_batch(batch)
        if self._step_times is not None:
            self._step_times.delivered(batch)
        return batch

    def report_step_time(self, seconds: float) -> None:
        """This rank's time for the optimizer step it just took: the batches delivered since the
        last report are that step's (a balancing loader only: balance=). See step_times()."""
        if self._step_times is None:
            raise ValueError("report_step_time: the loader prices its batches only when it balances (balance=)")
        self._step_times.report(seconds)
        if self._calibration is not None and self._calibration.due(len(self._step_times)):
            self._recalibrate(self._calibration, self._step_times)

    def skip_step_time(self) -> None:
        """Leaves the step just taken out of the step times: the batches delivered since the last
        report belong to no reported step. For a step whose time says nothing of its batches: a
        run's first, with its one-time work (CUDA's initialisation, kernels autotuned, a model
        compiled), which a fit would take for the cost of its samples."""
        if self._step_times is None:
            raise ValueError("skip_step_time: the loader prices its batches only when it balances (balance=)")
        self._step_times.skip()

    def _recalibrate(self, calibration: Calibration, times: StepTimes) -> None:
        """Fits the cost model to every rank's reported steps (collective) and opens the engine
        again from where the trainer stands, planning with it from the first step no rank has begun
        (its batches staged ahead are made again by the new plan; the engine's counters restart)."""
        state = self.state_dict()
        open_step = _mmfeed.open_step(self._options, json.dumps(state))
        switch = calibration.fit(times.rows(), open_step)
        if switch is None:
            return
        epoch, step, cost = switch
        state["balance_switches"] = [*state.get("balance_switches", []), [epoch, step, *cost]]
        with self._opening:
            core, self._core = self._core, None
            self._state = json.dumps(state)
            if core is not None:  # (open: a batch was delivered)
                core.close()

    def step_times(self) -> dict:
        """The steps reported (report_step_time) against the cost model balance= plans with: each
        step's seconds and predicted FLOPs, their correlation, and the four balance_cost
        coefficients fitted to the seconds (FLOPs at 1 PFLOP/s; mmfeed/step_times.py)."""
        if self._step_times is None:
            raise ValueError("step_times: the loader prices its batches only when it balances (balance=)")
        cost = _mmfeed.cost_model(self._options)
        switches = (json.loads(self._state) if self._state else {}).get("balance_switches")
        if switches:  # recalibrated: the latest model plans now
            cost = switches[-1][2:]
        summary = self._step_times.summary(cost)
        summary["calibrated"] = (
            None if not switches else dict(epoch=switches[-1][0], step=switches[-1][1], balance_cost=cost)
        )
        return summary

    def options(self) -> dict:
        """The engine options this loader was opened with (manifests included): Loader(**options)
        opens another at the start of the same run."""
        return {**self._options, "balance_cost": "calibrated"} if self._calibration is not None else dict(self._options)

    def start(self) -> None:
        """Opens the engine now, so that it starts reading and preparing batches before the first
        is asked for (iteration opens it otherwise)."""
        if self._closed:
            raise RuntimeError("start: the loader is closed")
        self._engine()

    def state_dict(self) -> dict:
        """Where the run stands after the last batch returned; load it to resume exactly there."""
        if self._core is None:
            return json.loads(self._state) if self._state else {}
        return json.loads(self._core.state())  # with a device, batches staged ahead are not counted

    def load_state_dict(self, state: dict) -> None:
        """Resume from `state` (taken by state_dict()); {} -- the state of a loader not yet iterated --
        starts from the beginning."""
        if self._core is not None:
            raise RuntimeError("load_state_dict must be called before iterating (the engine is already open)")
        self._state = json.dumps(state) if state else None
        if self._calibration is not None and state.get("balance_switches"):
            self._calibration.done = True  # the run recalibrated before this state was taken

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
        """Stops the engine and writes the trace (trace_path); OSError when the trace could not be
        written (a full disk). Idempotent: a later call raises the same."""
        self._closed = True
        if self._core is not None and os.getpid() == self._pid:
            self._core.close()

    def _release_native(self) -> None:
        if os.getpid() == self._pid:
            self.close()
        self._core = None

    def __del__(self):
        # Dropped without close(): stop the engine's threads now.
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc) -> Literal[False]:
        self.close()
        return False


def _option_lines() -> str:
    lines = []
    for o in _mmfeed.loader_options():
        value = o["default"].capitalize() if o["type"] == "bool" else o["default"]  # True, as Python spells it
        default = f" (default {value})" if value else ""
        lines.append(f"    {o['name']}: {o['type']}. {o['doc']}{default}")
    return "\n".join(lines) + "\n"


Loader.__doc__ = (Loader.__doc__ or "").rstrip() + "\n" + _option_lines()
