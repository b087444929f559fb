"""mmfeed.ray's actor: an engine per part on a Ray actor (Parts, PartRunner), and the trainer's
record of one (Actor)."""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator

import ray

from ..loader import Loader as _LocalLoader
from ..loader import LoaderInputs
from .plan import BatchMessage, PartSpec, PartSummary


class Parts:
    """Runs parts of a rank's run with mmfeed's engine: the body of the Loader's actors and of
    read()'s Ray Data workers."""

    def __init__(self, options: dict):
        # The error budget is the whole run's: the trainer-side Loader applies it over every part.
        self._options = {**options, "max_error_fraction": 1.0}
        self._inputs: LoaderInputs | None = None  # the manifests and tokenizer, read at the first part for all of them

    def node_id(self) -> str:
        """The Ray node this actor runs on."""
        return ray.get_runtime_context().get_node_id()

    def _open(self, spec: PartSpec) -> _LocalLoader:
        if self._inputs is None:
            self._inputs = LoaderInputs(**self._options)
        loader = _LocalLoader(
            tensors="np",
            inputs=self._inputs,
            ignore_job_ranks=True,  # the rank is the trainer's, in the options; an actor is no rank
            **{**self._options, "epochs": spec["epoch"] + 1, "end_position": spec["end"]},
        )
        loader.load_state_dict(spec["state"])
        return loader

    def run(self, part: PartSpec) -> Iterator[int | None | BatchMessage | PartSummary]:
        """Yields each batch of the part as {"batch", "state", "made_at", "node", "bytes"}, then
        {"errors", "seconds", "samples", "cpu_s"}.

        With part["credit_bytes"], each batch of b bytes is preceded by its credits:
        n = min(limit, max(min_credits, ceil(b / credit_bytes))) - 1 objects, the first of them the
        number n and the rest None. They make Ray's count of the stream's untaken objects (its
        backpressure) a count of bytes: a batch enters the store only once its credits have, so the
        untaken batches' bytes stay within the untaken objects x credit_bytes (a batch larger than
        the whole window enters alone)."""
        started, cpu = time.perf_counter(), time.process_time()
        loader = self._open(part)
        samples = 0
        node = ray.get_runtime_context().get_node_id()
        with loader:
            for batch in loader:
                batch.pop("buffer_address")
                samples += len(batch["sample_ids"])
                state = loader.state_dict()
                nbytes = sum(v.nbytes for v in batch.values() if hasattr(v, "nbytes"))
                if part.get("credit_bytes"):
                    # At most the whole window: a batch larger than the part's share enters alone.
                    objects = max(part["min_credits"], -(-nbytes // part["credit_bytes"]))
                    credits = min(objects, part["limit"]) - 1
                    yield credits
                    for _ in range(credits - 1):
                        yield None
                yield {"batch": batch, "state": state, "made_at": time.time(), "node": node, "bytes": nbytes}
            yield {
                "errors": loader.errors(),
                "seconds": time.perf_counter() - started,
                "samples": samples,
                "cpu_s": time.process_time() - cpu,
            }


PartRunner = ray.remote(Parts)


class Actor:
    """The trainer's record of one actor: its handle, the parts queued on it, what it delivered."""

    def __init__(self, handle, number: int):
        self.handle = handle
        self.number = number
        self.parts: collections.deque = collections.deque()  # part indices, in submission order
        self.draining = False
        self.done_parts = 0
        self.batches = 0
        self.samples = 0
        self.busy_s = 0.0
        self.cpu_s = 0.0  # the actor process's CPU time over its parts (its engine's threads included)
        self.most_ahead = None  # the most batches it had in the object store untaken (on the trainer's node)
        self.most_bytes_ahead = None  # and their bytes
