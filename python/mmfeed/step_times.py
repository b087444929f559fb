"""Measured step times against the cost model that balances the ranks (balance=; docs/loading.md,
"Ranks balanced by compute"). A balancing Loader prices every batch it delivers by the model's
four terms, from the batch itself: its sequences' tokens (the rows' attention masks, or a packed
row's cu_seq_lens_q / cu_seqlens) and token pairs n(n+1)/2, its images' and frame groups' vision
patches and patch pairs (image_grid_thw, video_grid_thw: t groups of h x w). The trainer reports
each optimizer step's time (Loader.report_step_time(seconds): the batches delivered since the last
report are that step's); Loader.step_times() then says how well the cost model predicts them, and
fits the four coefficients to the times.

    loader = mmfeed.Loader("train.jsonl", balance="compute", gradient_accumulation_steps=4, ...)
    for step in range(steps):
        t0 = time.perf_counter()
        for _ in range(4):
            train_on(next(loader))
        loader.report_step_time(time.perf_counter() - t0)
    loader.step_times()  # {"steps": ..., "correlation": ..., "fitted_balance_cost": [...], ...}
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

TERMS = ("llm_token", "llm_pair", "vision_patch", "vision_pair")
# Fitted seconds are given as FLOPs at 1 PFLOP/s, so that balance_cost= keeps a sample's cost to
# within a microsecond (the plan counts costs in whole millions).
FLOPS_A_SECOND = 1e15


def _values(tensor) -> np.ndarray:
    if hasattr(tensor, "detach"):  # torch, on any device
        tensor = tensor.detach().cpu().numpy()
    return np.asarray(tensor)


def _copy(tensor):
    """A small tensor's own copy (torch: on its device, queued on the stream, no wait), so that
    holding it holds nothing of the batch's buffer."""
    return tensor.detach().clone() if hasattr(tensor, "detach") else np.array(tensor)


def _pieces(batch) -> tuple:
    """What the terms are read from, copied out of the batch without waiting for a device: the
    sequences' lengths (or a packed row's offsets) and the vision grids."""
    for key in ("cu_seq_lens_q", "cu_seqlens"):  # packed rows: each sequence (the tail pad's too)
        if key in batch:
            return ("offsets", _copy(batch[key])), _grids(batch)
    if "attention_mask" in batch:
        mask = batch["attention_mask"]
        return ("lengths", mask.reshape(mask.shape[0], -1).sum(-1)), _grids(batch)
    rows, width = batch["input_ids"].shape[0], batch["input_ids"].shape[-1]
    return ("lengths", np.full(rows, width)), _grids(batch)


def _grids(batch) -> list:
    return [_copy(batch[key]) for key in ("image_grid_thw", "video_grid_thw") if key in batch]


def _terms(pieces: tuple) -> np.ndarray:
    (kind, sequences), grids = pieces
    n = _values(sequences).astype(np.float64)
    if kind == "offsets":
        n = np.diff(n)
    terms = np.array([n.sum(), (n * (n + 1) / 2).sum(), 0.0, 0.0])
    for grid in grids:
        for t, h, w in _values(grid).reshape(-1, 3).astype(np.float64):
            terms[2] += t * h * w
            terms[3] += t * (h * w) ** 2
    return terms


def batch_terms(batch) -> np.ndarray:
    """A batch's sums of the cost model's four terms (TERMS): tokens, token pairs, patches, patch pairs."""
    return _terms(_pieces(batch))


def fit(terms: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Least squares of seconds on the terms with no negative coefficient (columns scaled to unit
    norm; the terms whose coefficients come out negative are dropped and the rest refitted, until
    none is): the seconds each unit of a term costs; a term absent from every step costs 0."""
    norms = np.linalg.norm(terms, axis=0)
    used = norms > 0
    scaled = terms[:, used] / norms[used]
    free = np.ones(scaled.shape[1], dtype=bool)
    coefficients = np.zeros(scaled.shape[1])
    for _ in range(scaled.shape[1] + 1):
        coefficients[:] = 0
        if free.any():
            coefficients[free] = np.linalg.lstsq(scaled[:, free], seconds, rcond=None)[0]
        negative = coefficients < 0
        if not negative.any():
            break
        free &= ~negative  # the most negative leave the set until none is
    out = np.zeros(terms.shape[1])
    out[used] = np.maximum(coefficients, 0) / norms[used]
    return out


# Batches whose pieces wait to be read (a device's wait, once per this many at most, when the
# trainer reports no step).
_QUEUED = 256


class StepTimes:
    """The priced batches since the last report, and each reported step: its terms and its
    seconds. A batch's pieces are copied as it is delivered and read (from a device: waiting for
    its stream) when its step is reported, so delivering a batch never waits."""

    def __init__(self) -> None:
        self._pending = np.zeros(len(TERMS))
        self._queued: list[tuple] = []
        self._batches = 0
        self._terms: list[np.ndarray] = []
        self._seconds: list[float] = []

    def delivered(self, batch) -> None:
        self._queued.append(_pieces(batch))
        self._batches += 1
        if len(self._queued) >= _QUEUED:
            self._read()

    def _read(self) -> None:
        for pieces in self._queued:
            self._pending += _terms(pieces)
        self._queued.clear()

    def report(self, seconds: float) -> None:
        if not np.isfinite(seconds) or seconds <= 0:
            raise ValueError(f"report_step_time: seconds must be a positive number, not {seconds!r}")
        if self._batches == 0:
            raise ValueError("report_step_time: no batch was delivered since the last report (a step trains on some)")
        self._read()
        self._terms.append(self._pending.copy())
        self._seconds.append(float(seconds))
        self.skip()

    def skip(self) -> None:
        """The batches delivered since the last report belong to no further step (reported, or
        left out)."""
        self._queued.clear()
        self._pending[:] = 0
        self._batches = 0

    def __len__(self) -> int:
        return len(self._seconds)

    def rows(self) -> np.ndarray:
        """Every reported step as (seconds, the four terms)."""
        return np.column_stack([np.array(self._seconds), np.array(self._terms).reshape(-1, len(TERMS))])

    def summary(self, coefficients: Sequence[float]) -> dict[str, Any]:
        """The reported steps: their seconds, the cost `coefficients` predict for each (FLOPs), the
        correlation of the two (None under three steps, or when either is constant), and the four
        coefficients fitted to the seconds, as FLOPs at 1 PFLOP/s (ready for balance_cost=)."""
        terms, seconds = np.array(self._terms).reshape(-1, len(TERMS)), np.array(self._seconds)
        predicted = terms @ np.asarray(coefficients, dtype=np.float64)
        correlation = None
        if len(seconds) >= 3 and predicted.std() > 0 and seconds.std() > 0:
            correlation = float(np.corrcoef(predicted, seconds)[0, 1])
        fitted = fit(terms, seconds) * FLOPS_A_SECOND if len(seconds) >= len(TERMS) else None
        return dict(
            steps=len(seconds),
            seconds=seconds.tolist(),
            predicted_flops=predicted.tolist(),
            correlation=correlation,
            fitted_balance_cost=None if fitted is None else fitted.tolist(),
            terms=dict(zip(TERMS, terms.T.tolist())),
        )


# A coefficient's bound in the resume state (the engine's balance_cost range).
_MAX_COEFFICIENT = 1e15


def _group() -> Any:
    """torch.distributed, when this process is one of an initialised group of several; else None."""
    dist = sys.modules.get("torch.distributed")  # (not imported: no group)
    if dist is None or not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None
    return dist


def _collective(dist: Any, rows: np.ndarray, how: str) -> np.ndarray:
    """`rows` of every process of torch.distributed's default group stacked by its rank ("gather"),
    or rank 0's ("agree"); this process's alone without a group (dist None)."""
    if dist is None:
        return rows[None] if how == "gather" else rows
    import torch

    tensor = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float64))
    if dist.get_backend() == "nccl":
        tensor = tensor.cuda(torch.cuda.current_device())
    if how == "agree":
        dist.broadcast(tensor, src=0)
        return tensor.cpu().numpy()
    out = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(out, tensor)
    return np.stack([t.cpu().numpy() for t in out])


def _check_loaders(every: np.ndarray, processes: int, world_size: int) -> None:
    """Every process of the group holds one rank Loader of a world of world_size, each rank on as
    many processes (its model-parallel peers), or the calibration would mix runs: raises saying
    what the group holds."""
    held = sorted((int(r[-1, 2]), int(r[-1, 3])) for r in every)
    want = sorted((rank, world_size) for rank in range(world_size) for _ in range(processes // world_size))
    if held != want:
        raise RuntimeError(
            f"balance_cost='calibrated': torch.distributed's default group of {processes} processes must "
            f"hold the ranks of one world of {world_size} loaders, each on {processes // world_size} "
            f"process(es) (its model-parallel peers), every one reporting; it holds (rank, world_size) {held}"
        )


class Calibration:
    """balance_cost="calibrated": once every rank has reported `steps` steps, their times and
    terms are gathered, the four coefficients fitted to all of them (rank 0's fit, the same on
    every rank) and the ranks switch to them together, at the first step none of them has begun."""

    def __init__(self, steps: int, rank: int, world_size: int) -> None:
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise ValueError(f"calibration_steps must be a positive integer, not {steps!r}")
        self.steps = steps
        self.rank = rank
        self.world_size = world_size
        self.done = False

    def due(self, reported: int) -> bool:
        return not self.done and reported >= self.steps

    def fit(self, rows: np.ndarray, open_step: tuple[int, int]) -> tuple[int, int, list[float]] | None:
        """The switch every rank makes, from this rank's reported `rows` (StepTimes.rows) and the
        first step it has not begun (collective: every rank calls it at the same report). None
        when the times fit no coefficient (the run keeps its model)."""
        self.done = True
        dist = _group()
        processes = 1 if dist is None else dist.get_world_size()
        if dist is None and self.world_size > 1:
            raise RuntimeError(
                f"balance_cost='calibrated': the {self.world_size} ranks must fit the cost model to every "
                f"rank's step times and switch to it together, through torch.distributed's default group; "
                f"initialise it (torch.distributed.init_process_group) before the first report"
            )
        if processes % self.world_size != 0:
            raise RuntimeError(
                f"balance_cost='calibrated': torch.distributed's default group of {processes} processes must "
                f"hold each of the {self.world_size} loader ranks on as many processes (its model-parallel peers)"
            )
        mine = np.vstack([rows[-self.steps :], [[open_step[0], open_step[1], self.rank, self.world_size, 0]]])
        every = _collective(dist, mine, "gather")
        _check_loaders(every, processes, self.world_size)
        epoch, step = max((int(r[-1, 0]), int(r[-1, 1])) for r in every)
        steps = every[:, :-1, :].reshape(-1, mine.shape[1])
        cost = _collective(dist, fit(steps[:, 1:], steps[:, 0]) * FLOPS_A_SECOND, "agree")
        if not cost.any() or not np.isfinite(cost).all():
            warnings.warn(
                "balance_cost='calibrated': the reported step times fit no cost coefficient; the run keeps "
                "the model's default",
                stacklevel=3,
            )
            return None
        cost *= min(1.0, _MAX_COEFFICIENT / cost.max())  # (only their ratios plan a step)
        return epoch, step, [float(c) for c in cost]
