"""mmfeed.ray.Loader: the trainer's side, batches in the run's order from the actors' parts."""

from __future__ import annotations

import bisect
import collections
import time
import warnings
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import ray

from ..loader import apply_job_ranks, engine_options

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

    from ..options import LoaderOptions

from .actor import Actor, PartRunner
from .plan import CREDITS_PER_BATCH, PartSpec, PartSummary, PlannedPart, plan_parts


class Part(PlannedPart, total=False):
    """The trainer's record of a part: planned, then, once queued, its actor, the stream of its
    messages, and when the trainer asked for each batch and its bytes."""

    stream: Any  # the ObjectRefGenerator of Parts.run
    actor: Actor
    asked_at: list[float]
    bytes: list[int]


class Loader:
    """Iterates the batches mmfeed.Loader would, with the per-sample work on Ray actors.

    Loader(manifest=None, *, num_actors=2, actor_options=None, part_groups=16, parts_in_flight=2,
           batches_ahead=None, store_bytes=None, replace_dead=True, max_deaths=16, tensors="torch",
           ignore_job_ranks=False, **options)

    rank and world_size default to the trainer job's, as mmfeed.Loader's do (ignore_job_ranks).

    num_actors: actors started now (ray.init must have been called). actor_options: Ray's
    options for each actor: num_cpus, memory, resources, scheduling_strategy (node affinity,
    placement groups), ... (default {"num_cpus": 1}). part_groups: groups (batches, or packing
    windows) per part, the unit of work an actor takes. parts_in_flight: parts queued on each
    actor at once. batches_ahead: batches an actor may have in the object store that the trainer
    has not taken (default: part_groups, a part's worth, which keeps every actor busy when the
    trainer keeps up). store_bytes: the object store's bytes this loader's untaken batches may hold
    (default None: bounded in batches only); each part queued gets an equal share of it
    (store_bytes / (actors x parts_in_flight)), so an actor holds fewer batches ahead when they are
    large - too few to cover a part idles it (metrics() shows the lead; pixels="uint8" makes the
    batches 5-8x smaller). A batch larger than its share alone is still delivered.
    replace_dead: start a replacement for an actor that dies (without it, one is started only where a
    dead actor's part could otherwise wait behind a part that must come after it). max_deaths: the
    actor deaths a run survives; the next one raises (actors that keep dying, out of memory or
    unplaceable, are an error, not a loop). tensors: "torch"
    or "np". Everything else is mmfeed.Loader's options, which each actor's engine gets as they
    are (workers: its threads; default "auto", the cores of the machine it runs on).
    """

    def __init__(
        self,
        manifest=None,
        *,
        num_actors: int = 2,
        actor_options: dict | None = None,
        part_groups: int = 16,
        parts_in_flight: int = 2,
        batches_ahead: int | None = None,
        store_bytes: int | None = None,
        replace_dead: bool = True,
        max_deaths: int = 16,
        tensors: Literal["torch", "np"] = "torch",
        ignore_job_ranks: bool = False,
        **options: Unpack[LoaderOptions],
    ):
        if not ray.is_initialized():
            raise RuntimeError(
                "mmfeed.ray.Loader needs a Ray cluster: call ray.init() (or ray.init(address=...)) first"
            )
        batches_ahead = part_groups if batches_ahead is None else batches_ahead
        if min(num_actors, part_groups, parts_in_flight, batches_ahead) < 1:
            raise ValueError("num_actors, part_groups, parts_in_flight and batches_ahead must be at least 1")
        if store_bytes is not None and store_bytes < 1:
            raise ValueError(f"store_bytes must be positive (None: no byte bound), not {store_bytes}")
        if tensors not in ("np", "torch"):
            raise ValueError("tensors must be 'np' or 'torch'")
        if options.get("ordered") is False or options.get("mode") == "serial":
            raise ValueError(
                "mmfeed.ray.Loader runs ordered, concurrent engines (ordered=False and "
                "mode='serial' are mmfeed.Loader's)"
            )
        if options.get("end_position"):
            raise ValueError("end_position is how mmfeed.ray splits a run; give epochs instead")
        if options.get("trace_path"):
            raise ValueError(
                "trace_path: each part of the run has an engine of its own on some actor, and one "
                "timeline would be overwritten part after part; trace a run with mmfeed.Loader"
            )
        apply_job_ranks(options, ignore_job_ranks)  # type: ignore[arg-type]  # this trainer rank's run
        self._options = engine_options(manifest, dict(options))
        self._tensors = tensors
        self._actor_options = {"num_cpus": 1, **(actor_options or {})}
        self._part_groups = part_groups
        self._parts_in_flight = parts_in_flight
        self._batches_ahead = batches_ahead
        self._store_bytes = store_bytes
        self._largest_batch = 0
        self._node = ray.get_runtime_context().get_node_id()  # the trainer's
        self._replace_dead = replace_dead
        self._max_deaths = max_deaths
        self._actors: list[Actor] = []
        self._started = 0
        self._dead = 0
        self.add_actors(num_actors)
        self._state: dict = {}
        self._plan: dict[str, Any] | None = None  # the parts, made at the first batch (the start state is known then)
        self._errors: list[dict] = []
        self._seen = 0  # positions of completed parts: what the error budget is over
        self._opened: float | None = None
        self._waited_s = 0.0
        self._batches = 0
        self._epoch_batches = 0
        self._closed = False

    # --- the pool -------------------------------------------------------------------------------

    def add_actors(self, n: int, **actor_options) -> None:
        """Starts `n` more actors (with these Ray options over the loader's); they take the next parts."""
        options = {**self._actor_options, **actor_options}
        for _ in range(n):
            self._started += 1
            handle = PartRunner.options(**options).remote(self._options)
            self._actors.append(Actor(handle, self._started))

    def remove_actors(self, n: int) -> None:
        """Takes `n` actors out of the pool: they get no new part, finish the parts they hold, and go."""
        live = [a for a in self._actors if not a.draining]
        if n >= len(live):
            raise ValueError(f"cannot remove {n} of {len(live)} actors: at least one must stay")
        for actor in live[-n:]:
            actor.draining = True
            if not actor.parts:
                self._retire(actor)

    def _retire(self, actor: Actor) -> None:
        self._actors.remove(actor)
        ray.kill(actor.handle)

    def actor_handles(self) -> list:
        """The live actors' handles, oldest first (for placement checks, or ray.kill in tests)."""
        return [a.handle for a in self._actors]

    def wait_ready(self, timeout: float | None = None) -> list[str]:
        """Waits until every live actor has started (its process up, mmfeed imported) and returns
        the id of the node each runs on, oldest first: to check the placement, or to start the
        actors before the first step. An actor that cannot be placed in `timeout` seconds raises
        ray.exceptions.GetTimeoutError."""
        return ray.get([a.handle.node_id.remote() for a in self._actors], timeout=timeout)

    # --- the plan -------------------------------------------------------------------------------

    def _make_plan(self) -> None:
        # next_submit: the first part not queued yet; current: the part being read; delivered: its
        # batches read in this run of it; skip: per part, its batches the trainer already has.
        self._plan = {
            "parts": plan_parts(self._options, self._state, self._part_groups),
            "next_submit": 0,
            "current": 0,
            "delivered": 0,
            "skip": collections.defaultdict(int),
        }

    def _planned(self) -> dict[str, Any]:
        """The plan, once made (at the first batch)."""
        if self._plan is None:
            raise RuntimeError("the plan is made at the first batch")
        return self._plan

    def _submit(self) -> None:
        """Queues parts on the actors with room, in order, up to parts_in_flight each."""
        plan = self._planned()
        while plan["next_submit"] < len(plan["parts"]):
            open_actors = [a for a in self._actors if not a.draining and len(a.parts) < self._parts_in_flight]
            if not open_actors:
                return
            self._queue(plan["next_submit"], min(open_actors, key=lambda a: (len(a.parts), a.number)))
            plan["next_submit"] += 1

    def _queue(self, index: int, actor: Actor) -> None:
        """Queues part `index` on `actor`, its batches held back past batches_ahead untaken (and
        past its share of store_bytes)."""
        part: Part = self._planned()["parts"][index]
        spec: PartSpec = {"epoch": part["epoch"], "state": part["state"], "end": part["end"]}
        # The generator's objects: its batches (each with its credits, under store_bytes) and the summary.
        limit = self._batches_ahead
        if self._store_bytes is not None:
            # Untaken objects <= limit: at most batches_ahead batches (each costs CREDITS_PER_BATCH
            # or more), of at most limit x credit_bytes = the part's share of bytes.
            limit = self._batches_ahead * CREDITS_PER_BATCH
            live = max(1, sum(not a.draining for a in self._actors))
            share = self._store_bytes // (live * self._parts_in_flight)
            spec["credit_bytes"] = max(1, share // limit)
            spec["min_credits"] = CREDITS_PER_BATCH
            spec["limit"] = limit
        part["stream"] = actor.handle.run.options(_generator_backpressure_num_objects=limit).remote(spec)
        part["actor"] = actor
        part["asked_at"] = []  # when the trainer asked for each batch of this run of it (time.time())
        part["bytes"] = []  # and each one's bytes
        actor.parts.append(index)

    def _resubmit(self, dead: Actor) -> None:
        """Gives the parts a dead actor held to the others (a replacement first, when asked)."""
        self._dead += 1
        if self._dead > self._max_deaths:
            raise RuntimeError(
                f"mmfeed.ray: {self._dead} actors have died, more than max_deaths ({self._max_deaths}); "
                f"see the actors' logs (ray logs) for why"
            )
        self._actors.remove(dead)
        ray.kill(dead.handle)  # a lost object may leave its actor alive, with engines of its own
        if self._replace_dead and not dead.draining:
            self.add_actors(1)
        plan = self._planned()
        for index in dead.parts:
            # An actor runs its parts in turn, and a part waits for the trainer to take its batches:
            # one queued behind a later part would wait for that part, which waits for it. So only
            # actors holding earlier parts only; none: one more actor, even without replace_dead.
            fit = [a for a in self._actors if not a.draining and all(i < index for i in a.parts)]
            if not fit:
                self.add_actors(1)
                fit = self._actors[-1:]
            self._queue(index, min(fit, key=lambda a: (len(a.parts), a.number)))
            if index == plan["current"]:
                # The batches of it the trainer has already (from this run of it, or an earlier one).
                plan["skip"][index] = max(plan["skip"][index], plan["delivered"])
        dead.parts.clear()

    # --- iteration ------------------------------------------------------------------------------

    def __iter__(self) -> Loader:
        return self

    def __next__(self) -> dict:
        if self._closed:
            raise StopIteration
        if self._plan is None:
            self._opened = time.perf_counter()
            self._make_plan()
        plan = self._planned()
        waited = time.perf_counter()
        try:
            while plan["current"] < len(plan["parts"]):
                self._submit()
                index = plan["current"]
                part = plan["parts"][index]
                try:
                    # Ray counts the object taken somewhere inside next(): the time before it bounds
                    # that from below, so a lead counted with it never exceeds the real one.
                    asked = time.time()
                    message = ray.get(next(part["stream"]))
                    if isinstance(message, int):  # the batch's credits (store_bytes), then the batch
                        for _ in range(message - 1):  # each read: a death among them raises here too
                            ray.get(next(part["stream"]))
                        message = ray.get(next(part["stream"]))
                except StopIteration:
                    raise RuntimeError(f"mmfeed.ray: part {index} ended without its summary") from None
                except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError):
                    self._resubmit(part["actor"])
                    plan["delivered"] = 0
                    continue
                except ray.exceptions.RayTaskError as e:  # the engine's own error: raised as mmfeed.Loader raises it
                    raise ValueError(str(e.cause) if e.cause is not None else str(e)) from None
                if "batch" in message:
                    plan["delivered"] += 1
                    self._count_ahead(part, message, asked)
                    if plan["skip"][index] >= plan["delivered"]:
                        continue  # delivered before its first actor died
                    if message["state"]["epoch"] != self._state.get("epoch"):
                        self._epoch_batches = 0
                    self._state = message["state"]
                    message["batch"]["index"] = self._epoch_batches  # within the epoch, as mmfeed.Loader counts
                    self._epoch_batches += 1
                    self._batches += 1
                    part["actor"].batches += 1
                    part["actor"].samples += len(message["batch"]["sample_ids"])
                    return self._tensors_of(message["batch"])
                self._finish_part(index, message)
            raise StopIteration
        finally:
            self._waited_s += time.perf_counter() - waited

    def _count_ahead(self, part: dict, message: dict, asked: float) -> None:
        """The batches of the part made and not yet asked for when this one was made (itself
        included): its actor's lead, by the clock of the trainer's node, so only for actors on it."""
        asked_at, sizes, actor = part["asked_at"], part["bytes"], part["actor"]
        sizes.append(message["bytes"])
        self._largest_batch = max(self._largest_batch, message["bytes"])
        if message["node"] == self._node:
            ahead = len(asked_at) + 1 - bisect.bisect_left(asked_at, message["made_at"])
            actor.most_ahead = max(actor.most_ahead or 0, ahead)
            actor.most_bytes_ahead = max(actor.most_bytes_ahead or 0, sum(sizes[-ahead:]))
        asked_at.append(asked)

    def _finish_part(self, index: int, summary: PartSummary) -> None:
        plan = self._planned()
        part = plan["parts"][index]
        actor = part["actor"]
        actor.parts.remove(index)
        actor.done_parts += 1
        actor.busy_s += summary["seconds"]
        actor.cpu_s += summary["cpu_s"]
        self._errors += summary["errors"]
        self._seen += part["positions"]
        plan["current"] += 1
        plan["delivered"] = 0
        part.pop("stream")
        if actor.draining and not actor.parts:
            self._retire(actor)
        self._check_error_budget(last=plan["current"] == len(plan["parts"]))

    def _check_error_budget(self, last: bool) -> None:
        """mmfeed.Loader's budget over the whole run (each part's engine leaves it to this loader)."""
        skipped, seen = len(self._errors), self._seen
        fraction = self._options.get("max_error_fraction", 0.5)
        if skipped == 0:
            return
        e = self._errors[-1]
        if last and skipped == seen:
            raise ValueError(
                f"every sample failed ({seen} of {seen}); last: {e['sample_id']}: {e['stage']}: {e['reason']}"
            )
        if (last or seen >= 20) and skipped / seen > fraction:
            raise ValueError(
                f"{skipped} of {seen} samples failed, more than the error budget ({fraction:f}); "
                f"last: {e['sample_id']}: {e['reason']}"
            )

    def _tensors_of(self, batch: dict) -> dict:
        if self._tensors == "np":
            return batch
        import torch

        out = {}
        with warnings.catch_warnings():  # the object store's arrays are read-only: shared, not copied
            warnings.simplefilter("ignore", UserWarning)
            for key, value in batch.items():
                out[key] = torch.from_numpy(value) if hasattr(value, "dtype") else value
                if key.startswith("pixel_values") and value.dtype == np.uint16:  # bfloat16's words
                    out[key] = out[key].view(torch.bfloat16)
        return out

    # --- state, errors, metrics -----------------------------------------------------------------

    def state_dict(self) -> dict:
        """mmfeed.Loader's state after the last batch returned; resume either loader from it."""
        return dict(self._state)

    def load_state_dict(self, state: dict) -> None:
        """Resumes at a state_dict() (of this or another world size: Loader.reshard_states), before
        the first batch."""
        if self._plan is not None:
            raise RuntimeError("load_state_dict must be called before iterating")
        self._state = dict(state or {})

    def errors(self) -> list[dict]:
        """The samples skipped so far, reported as the parts holding them complete."""
        return list(self._errors)

    def metrics(self) -> dict:
        """The trainer's waits and each actor's engine metrics: what the run cost, and where."""
        elapsed = time.perf_counter() - self._opened if self._opened else 0.0
        wait_share = self._waited_s / elapsed if elapsed > 0 else 0.0
        actors = [
            {
                "actor": a.number,
                "parts": a.done_parts,
                "batches": a.batches,
                "samples": a.samples,
                "busy_s": round(a.busy_s, 3),
                "cpu_s": round(a.cpu_s, 3),
                "samples_per_s": round(a.samples / a.busy_s, 2) if a.busy_s > 0 else 0.0,
                "queued_parts": len(a.parts),
                "draining": a.draining,
                "most_batches_ahead": a.most_ahead,
                "most_bytes_ahead": a.most_bytes_ahead,
            }
            for a in self._actors
        ]
        out = {
            "batches": self._batches,
            "wait_share": round(wait_share, 4),
            "seconds": round(elapsed, 3),
            "actors": actors,
            "actors_started": self._started,
            "actors_died": self._dead,
            "parts": len(self._plan["parts"]) if self._plan else 0,
            "parts_done": self._plan["current"] if self._plan else 0,
            "max_parts_queued": len(self._actors) * self._parts_in_flight,
            "batches_ahead": self._batches_ahead,
            "store_bytes": self._store_bytes,
            "largest_batch_bytes": self._largest_batch,
        }
        if wait_share > 0.1 and self._batches >= 4:
            out["hint"] = (
                f"the trainer waited {wait_share:.0%} of the run for data: more actors (add_actors), "
                f"or more workers per actor, would feed it"
            )
        return out

    def close(self) -> None:
        """Stops the actors' parts and releases the batches not taken; idempotent."""
        if self._closed:
            return
        self._closed = True
        for actor in list(self._actors):
            ray.kill(actor.handle)
        self._actors.clear()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown, Ray already gone
            pass

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc) -> Literal[False]:
        self.close()
        return False
