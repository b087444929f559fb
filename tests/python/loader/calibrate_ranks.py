"""A torchrun worker for test_balance.py: each rank's Loader balances by compute with
balance_cost="calibrated" over gloo, reporting every step a time made from its own batches' terms
(0.1 us a token, 2 ns a vision patch pair), through two epochs, calibrating after three
step (packed) or two (padded); no model is trained.

    python -m torch.distributed.run --standalone --nproc-per-node 4 calibrate_ranks.py \
        MANIFEST OUT TOKENIZER [--packed] [--peers 2]

--peers P: each loader rank on P processes, as under tensor parallelism P (process r holds loader
rank r // P of a world of 4 / P), the peer p = r % P reporting p + 1 times the time (peers time
alike, not the same). Every process writes OUT/rank<N>.json: its steps (each its batches' epoch
and sample ids), its final state's balance_switches and step_times()["calibrated"]."""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import numpy as np
import torch.distributed as dist

import mmfeed
from mmfeed.step_times import batch_terms

PLANTED = np.array([1e-7, 0, 0, 2e-9])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("manifest")
    parser.add_argument("out", type=Path)
    parser.add_argument("tokenizer")
    parser.add_argument("--packed", action="store_true")
    parser.add_argument("--peers", type=int, default=1)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))  # a lost peer fails, not hangs
    shape = dict(token_budget=3400, pack_window=5) if args.packed else dict(batch_size=2)
    loader = mmfeed.Loader(
        args.manifest,
        tokenizer=args.tokenizer,
        max_pixels=1_003_520,
        tensors="np",
        seed=3,
        balance="compute",
        balance_cost="calibrated",
        calibration_steps=3 if args.packed else 2,
        gradient_accumulation_steps=2,
        epochs=2,
        rank=dist.get_rank() // args.peers,
        world_size=dist.get_world_size() // args.peers,
        **shape,
    )
    slower = 1 + dist.get_rank() % args.peers
    steps, step = [], []
    # The ranks meet only at the report that calibrates (the third, packed; the second, padded),
    # which every rank reaches; packed ranks may make different numbers of rows after it.
    with loader:
        for batch in loader:
            step.append(batch)
            if len(step) == 2:
                loader.report_step_time(slower * float(sum(batch_terms(b) @ PLANTED for b in step)))
                steps.append([[int(b["epoch"]), list(b["sample_ids"])] for b in step])
                step = []
        steps += [[[int(b["epoch"]), list(b["sample_ids"])] for b in step]] if step else []
        state, times = loader.state_dict(), loader.step_times()
    record = dict(steps=steps, switches=state.get("balance_switches"), calibrated=times["calibrated"])
    (args.out / f"rank{dist.get_rank()}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
