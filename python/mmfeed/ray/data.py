"""mmfeed.ray.read: a run's batches as a Ray Dataset, each part a task of Ray Data."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

from ..loader import engine_options
from .actor import Parts
from .plan import BatchMessage, plan_parts

if TYPE_CHECKING:
    import ray.data


class PartBatches:
    """Ray Data's callable class: one part in, the part's batches out, one row each."""

    def __init__(self, options: dict):
        self._parts = Parts(options)

    def __call__(self, row: dict):
        for message in self._parts.run(json.loads(row["part"])):
            if not isinstance(message, dict):  # credits: none without store_bytes
                continue
            if "batch" in message:
                made = cast(BatchMessage, message)
                batch = made["batch"]
                yield {
                    **{k: v for k, v in batch.items() if k != "sample_ids"},
                    "sample_ids": json.dumps(batch["sample_ids"]),
                    "state": json.dumps(made["state"]),
                }
            elif message["errors"]:
                yield {"errors": json.dumps(message["errors"])}


def read(
    manifest=None,
    *,
    part_groups: int = 16,
    concurrency: int = 2,
    num_cpus: float = 1,
    state: dict | None = None,
    **options,
) -> ray.data.Dataset:
    """A ray.data.Dataset of the batches mmfeed.Loader would deliver for these options, one row
    each: the batch's tensors as columns, sample_ids and the state after it as JSON strings; a
    part whose samples were skipped also yields a row {"errors": JSON list}. Parts of the run
    (part_groups groups each) are processed by `concurrency` actors of `num_cpus` CPUs, each
    running mmfeed's engine; with DataContext.execution_options.preserve_order (set it, or
    read in any order) the rows come in the run's order. Use it where a pipeline is Ray Data
    already (streaming_split for Ray Train); mmfeed.ray.Loader gives the trainer ordered
    batches, faults handled and resume, without Ray Data's executor.
    """
    import ray.data

    options = engine_options(manifest, options)
    parts = plan_parts(options, dict(state or {}), part_groups)
    specs = [{"part": json.dumps({"epoch": p["epoch"], "state": p["state"], "end": p["end"]})} for p in parts]
    return ray.data.from_items(specs, override_num_blocks=len(specs)).flat_map(
        PartBatches, fn_constructor_kwargs={"options": options}, concurrency=concurrency, num_cpus=num_cpus
    )
