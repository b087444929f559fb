"""Issue 32: mmfeed.megatron shards by the data-parallel rank of megatron-core's parallel_state
(four gloo processes on the CPU: tensor parallelism 2, and context parallelism 2, each leaving two
data-parallel ranks): tensor- and context-parallel peers read identical batches, data-parallel
ranks disjoint shards that together hold every sample; and a THD batch's forward arguments carry
megatron-core's PackedSeqParams."""

import datetime
import json
import os

import datagen
import pytest
import torch
import torch.multiprocessing as mp
from conftest import ROOT

import mmfeed
import mmfeed.megatron

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = dict(tokenizer=str(TOKENIZER), max_pixels=50_176, batch_size=2, seed=4)


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    out = tmp_path_factory.mktemp("megatron")
    datagen.generate(out, samples=18, seed=44, max_megapixels=0.3, workers=2)
    return out / "manifest.jsonl"


def one_rank(rank, world, parallel, manifest, out):
    import torch.distributed as dist
    from megatron.core import parallel_state

    # A file rendezvous: no port to pick, none to lose to another process.
    dist.init_process_group(
        "gloo",
        init_method=f"file://{out}/rendezvous",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=300),
    )
    try:
        parallel_state.initialize_model_parallel(**parallel)
        train, _, _ = mmfeed.megatron.build_train_valid_test_data_iterators(manifest, epochs=1, **OPTIONS)
        seen = [b["sample_ids"] for b in train]
        train.close()
        record = {
            "dp": parallel_state.get_data_parallel_rank(with_context_parallel=False),
            "tp": parallel_state.get_tensor_model_parallel_rank(),
            "cp": parallel_state.get_context_parallel_rank(),
            "seen": seen,
        }
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump(record, f)
        parallel_state.destroy_model_parallel()
    finally:
        dist.destroy_process_group()


@pytest.mark.heavy  # four ranks
@pytest.mark.parametrize(
    "parallel", [{"tensor_model_parallel_size": 2}, {"context_parallel_size": 2}], ids=["tp2", "cp2"]
)
def test_model_parallel_peers_read_the_same_batches_and_data_parallel_ranks_disjoint_shards(
    manifest, tmp_path, parallel
):
    mp.spawn(one_rank, args=(4, parallel, str(manifest), str(tmp_path)), nprocs=4, join=True)
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    by_dp = {}
    for r in records:
        by_dp.setdefault(r["dp"], []).append(r["seen"])
    assert sorted(by_dp) == [0, 1]
    for peers in by_dp.values():
        assert len(peers) == 2 and peers[0] == peers[1]  # the two model-parallel peers: the same batches
    shards = [{sid for batch in peers[0] for sid in batch} for peers in by_dp.values()]
    assert not shards[0] & shards[1]
    assert shards[0] | shards[1] == {json.loads(line)["id"] for line in manifest.read_text().splitlines()}


def test_an_explicit_group_or_rank_decides_the_shard(manifest):
    # Without parallel_state, rank and world size given outright shard as given.
    train, _, _ = mmfeed.megatron.build_train_valid_test_data_iterators(
        manifest, epochs=1, rank=1, world_size=3, **OPTIONS
    )
    ids = [sid for b in train for sid in b["sample_ids"]]
    assert len(ids) == 6
    train.close()


def test_thd_forward_args_carry_packed_seq_params(manifest):
    from megatron.core.packed_seq_params import PackedSeqParams

    train, _, _ = mmfeed.megatron.build_train_valid_test_data_iterators(
        manifest,
        epochs=1,
        rank=0,
        world_size=1,
        token_budget=2048,
        pack_window=6,
        packed_format="thd",
        pad_to_multiple_of=4,
        **OPTIONS,
    )
    for batch in train:
        args = mmfeed.megatron.forward_args(batch)
        params = args["packed_seq_params"]
        assert isinstance(params, PackedSeqParams) and params.qkv_format == "thd"
        assert params.cu_seqlens_q is batch["cu_seqlens"] and params.cu_seqlens_kv_padded is batch["cu_seqlens_padded"]
        assert params.cu_seqlens_q.dtype == torch.int32
        assert params.max_seqlen_q == int((batch["cu_seqlens_padded"][1:] - batch["cu_seqlens_padded"][:-1]).max())
        assert batch["max_seqlen"] == int((batch["cu_seqlens"][1:] - batch["cu_seqlens"][:-1]).max())
        assert (batch["cu_seqlens_padded"] % 4 == 0).all()
        assert args["attention_mask"] is None and args["input_ids"].shape[1] == int(batch["cu_seqlens_padded"][-1])
        assert torch.equal(args["loss_mask"], (batch["labels"] != -100).float())
    train.close()
    with mmfeed.Loader(manifest, **OPTIONS) as loader:
        with pytest.raises(ValueError, match="not a THD batch"):
            mmfeed.megatron.loss_func(next(iter(loader)))
    with mmfeed.Loader(manifest, **OPTIONS) as loader:
        with pytest.raises(ValueError, match="not a THD batch"):
            mmfeed.megatron.forward_args(next(loader))


def test_the_loss_function_sums_the_masked_token_losses_for_the_global_normaliser(manifest):
    # Megatron's calculate_per_token_loss contract: (sum of the batch's token losses, its tokens,
    # reporting); the schedule divides the step's gradients by the tokens of all its batches.
    train, _, _ = mmfeed.megatron.build_train_valid_test_data_iterators(
        manifest, epochs=1, rank=0, world_size=1, token_budget=2048, pack_window=6, packed_format="thd", **OPTIONS
    )
    generator = torch.Generator().manual_seed(0)
    for batch in train:
        losses = torch.rand(batch["labels"].shape, generator=generator)
        total, tokens, reporting = mmfeed.megatron.loss_func(batch)(losses)
        trained = batch["labels"] != -100
        assert tokens.dtype == torch.int32 and int(tokens) == int(trained.sum()) > 0
        torch.testing.assert_close(total, losses[trained].sum())
        assert reporting["lm loss"].tolist() == [float(total), float(tokens)]
    train.close()
