"""Megatron-style data plumbing: megatron-core's parallel_state decides the shards, mmfeed.megatron
builds the train/valid iterators from it, and each data-parallel group trains on its own batches.

    python examples/train_megatron.py demo-data/manifest.jsonl --steps 4
    torchrun --nproc_per_node 4 examples/train_megatron.py demo-data/manifest.jsonl --tp 2 --steps 4

The model here is the tiny transformers Qwen2-VL of examples/tiny_models.py, replicated on every
rank and kept in step by DistributedDataParallel over parallel_state's data-parallel group (a real
Megatron model splits itself over the tensor-parallel group; what this example shows is what each
rank reads: tensor- and context-parallel peers the same batches, data-parallel ranks disjoint
shards). With a Megatron model, ask for --thd rows and pass mmfeed.megatron.forward_args(batch),
which holds the PackedSeqParams. Runs on the CPU over gloo; torchrun sets the world.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist

import mmfeed.megatron

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("manifest")
    parser.add_argument("--tokenizer", default=str(ROOT / "tests/data/qwen3-tokenizer/tokenizer.json"))
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    parser.add_argument("--cp", type=int, default=1, help="context-parallel size")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--thd", action="store_true", help="packed THD rows, as a Megatron model takes them")
    args = parser.parse_args()

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group(
        "gloo", rank=int(os.environ.get("RANK", 0)), world_size=int(os.environ.get("WORLD_SIZE", 1))
    )
    from megatron.core import parallel_state

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=args.tp, context_parallel_size=args.cp)
    dp_rank, dp_size = mmfeed.megatron.data_parallel_rank_and_world()
    packing = (
        dict(token_budget=4096, pack_window=8, packed_format="thd", pad_to_multiple_of=2 * args.cp) if args.thd else {}
    )
    train, valid, _ = mmfeed.megatron.build_train_valid_test_data_iterators(
        args.manifest,
        args.manifest,
        None,
        tokenizer=args.tokenizer,
        batch_size=args.batch_size,
        max_pixels=50_176,
        seed=1234,
        **packing,
    )

    from tiny_models import tiny_model

    model = tiny_model("qwen2-vl").train()
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=parallel_state.get_data_parallel_group())
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    for step in range(1, args.steps + 1):
        batch = next(train)
        if args.thd:
            fields = mmfeed.megatron.forward_args(batch)  # what a Megatron model's forward takes
            print(
                f"rank {dist.get_rank()} dp {dp_rank}/{dp_size} step {step} thd rows "
                f"cu_seqlens_padded {fields['packed_seq_params'].cu_seqlens_q_padded.tolist()} "
                f"samples {batch['sample_ids']}",
                flush=True,
            )
            continue
        loss = ddp(**batch.model_inputs()).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(
            f"rank {dist.get_rank()} dp {dp_rank}/{dp_size} step {step} loss {loss.item():.6f} "
            f"samples {batch['sample_ids']}",
            flush=True,
        )
    with torch.no_grad():
        print(f"rank {dist.get_rank()} valid loss {model(**next(valid).model_inputs()).loss.item():.6f}", flush=True)
    train.close()
    valid.close()
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
