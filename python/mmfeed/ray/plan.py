"""mmfeed.ray's plan: a run cut into parts (each a resume state and an end position), and the
messages of a part's run between an actor and the trainer."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from .. import _mmfeed

# Under store_bytes, the fewest credits (objects of the part's stream) a batch costs: the grain of
# its byte accounting (a batch's bytes in the store are counted in credit_bytes units).
CREDITS_PER_BATCH = 4


class PartSpec(TypedDict, total=False):
    """What an actor is asked to run (Parts.run): a part of an epoch, from a resume state to an
    end_position (0: the epoch's end); with store_bytes, the byte accounting of its credits."""

    epoch: int
    state: dict[str, Any]
    end: int
    credit_bytes: int  # the bytes one credit stands for
    min_credits: int  # the fewest credits a batch costs
    limit: int  # the most a batch costs: the stream's window


class BatchMessage(TypedDict):
    """A batch as an actor yields it: numpy arrays, the state after it, when and where it was made
    and its bytes."""

    batch: dict[str, Any]
    state: dict[str, Any]
    made_at: float  # time.time()
    node: str  # the Ray node id
    bytes: int


class PartSummary(TypedDict):
    """What an actor yields after a part's last batch."""

    errors: list[dict[str, Any]]
    seconds: float
    samples: int
    cpu_s: float


class PlannedPart(TypedDict):
    """A part as planned: its epoch, start state, end position (0: the epoch's end) and positions.
    The trainer's record of it (mmfeed.ray.loader.Part) adds what its run brings."""

    epoch: int
    state: dict[str, Any]
    end: int
    positions: int


def plan_parts(options: dict, start: dict, part_groups: int) -> list[PlannedPart]:
    """The parts of the run of `options` from `start` (a state, or {}): each part_groups groups
    (batch_size positions, or pack_window when packing) of an epoch, its start state and its
    end_position (0: the epoch's end)."""
    sizes = _mmfeed.epoch_sizes(options, json.dumps(start) if start else None)
    span = _mmfeed.group_positions(options) * part_groups
    base = {"seed": options.get("seed", 0), "rank": options.get("rank", 0), "world_size": options.get("world_size", 1)}
    if "fingerprint" in start:
        base["fingerprint"] = start["fingerprint"]
    parts: list[PlannedPart] = []
    first_epoch, first_position = start.get("epoch", 0), start.get("position", 0)
    for epoch in range(first_epoch, len(sizes)):
        position = first_position if epoch == first_epoch else 0
        while position < sizes[epoch]:
            end = (position // span + 1) * span
            state = {**base, "epoch": epoch, "position": position, "packed_delivered": 0, "window_delivered": []}
            if epoch == first_epoch:
                # The start's own fields: the order of a resharded epoch, and inside a packing window.
                state.update({k: start[k] for k in ("old_world_size", "old_positions", "old_windows") if k in start})
                if position == first_position:
                    state.update({k: start[k] for k in ("packed_delivered", "window_delivered") if k in start})
            parts.append(
                {
                    "epoch": epoch,
                    "state": state,
                    "end": end if end < sizes[epoch] else 0,
                    "positions": min(end, sizes[epoch]) - position,
                }
            )
            position = end
    return parts
