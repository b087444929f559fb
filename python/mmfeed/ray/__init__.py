"""mmfeed on a Ray cluster: one trainer rank's per-sample work spread over Ray actors.

    import ray
    import mmfeed.ray
    ray.init(address="auto")                       # or ray.init() for actors on this machine
    with mmfeed.ray.Loader("s3://bucket/train.jsonl", tokenizer="tokenizer.json", batch_size=8,
                           num_actors=4, actor_options={"num_cpus": 8, "resources": {"preprocess": 1}},
                           workers=8, tensors="np") as loader:
        for batch in loader:
            ...                                    # the batches mmfeed.Loader would deliver

How it works. The rank's run (its epochs, in its deterministic order) is cut into parts of
`part_groups` groups, a group being batch_size positions (pack_window when packing). An actor
runs mmfeed's own engine (mmfeed.Loader, with `workers` threads of its own) on one part at a
time: started at the part's first position (a resume state) and ended at its last
(`end_position`), so the part's batches are exactly those the whole run delivers there, and so
is the state after each. Each batch comes back through Ray's object store as numpy arrays, which
the trainer reads in place on its node (read-only: clone a tensor before writing to it). The
trainer-side Loader keeps `parts_in_flight` parts queued on each actor and yields the batches in
the run's order: the same bytes, order and sample_ids as mmfeed.Loader with the same options,
whatever the number of actors.

Faults and elasticity: when an actor dies (killed, its node lost, out of memory), each part it
held is run again by another actor (a replacement is started with the same options unless
replace_dead=False), from the part's start, and the batches of it the trainer already has are
dropped: none is delivered twice, none is lost, and each part's errors are reported once, when
it completes. add_actors() and remove_actors() change the pool between batches. state_dict() is
mmfeed.Loader's state after the last batch returned, whatever the number of actors; either
loader resumes from the other's.

Flow control: an actor runs one part at a time, with at most parts_in_flight parts queued on it,
and a part stops when `batches_ahead` of its batches wait in the object store, untaken (Ray's
generator backpressure): the store holds at most num_actors x parts_in_flight x batches_ahead
batches, however slow the trainer. `store_bytes` bounds their bytes as well: each part queued gets
an equal share, and its stream carries, before each batch, credits in proportion to the batch's
bytes, so that Ray's count of untaken objects counts bytes too. Each actor's engine bounds its own
memory by max_buffered_bytes. metrics() gives the trainer's wait share, each actor's throughput
and the most batches (and bytes) it was ahead (for actors on the trainer's node), and a hint when
more actors would help. pixels="uint8" (normalized by the trainer with mmfeed.normalize_pixels,
on its GPU) sends an eighth of the images' bytes through the store.

What a part costs: each part opens an engine (the manifests and tokenizer are read once per
actor, but the pipeline fills and drains at each part's ends), so parts should be long enough for
that to be small: in one process without Ray, parts of 16 groups (the default) cost about 5% of
their time on the benchmark machine, parts of 4 about 25%; through Ray the object store's copy
dominates (bench/ray_loader.py). Shorter parts rebalance sooner and lose less work to a dead
actor.

mmfeed.ray.build_index(SOURCE, ...) builds a manifest's dataset index with Ray tasks describing its
parts (mmfeed/ray/index.py; `mmfeed index --ray ADDRESS SOURCE`).
"""

try:
    import ray  # noqa: F401  (the actors' modules below import it)
except ImportError as e:
    raise ImportError(f"mmfeed.ray needs Ray ({e}): pip install 'mmfeed[ray]'") from e

from .data import read
from .index import build_index
from .loader import Loader

__all__ = ["Loader", "build_index", "read"]
