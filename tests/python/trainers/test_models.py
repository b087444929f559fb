"""Issue 32: batches as the models train on them. Tiny randomly initialised Qwen2-VL, Qwen2.5-VL,
Qwen3-VL and Qwen3.5 (tiny_vl.py: width 64, CPU; Qwen3.5's Gated DeltaNet layers read the packed
row's cu_seq_lens_q and seq_idx) take a default Loader batch as it is, and give the loss they
give on transformers' own processor batch of the same samples; a packed row gives the loss of the
padded batch of its samples (sdpa and eager attention), with the flash-attention arguments
transformers derives itself; Megatron's THD rows are the padded samples laid out as
Megatron-Bridge lays them out."""

import json

import datagen
import pytest
import tiny_vl
import torch
import varlen_kernels
from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

import mmfeed

MAX_PIXELS = 100_352  # 128 merged 28x28 patches (Qwen2-VL), 98 of 32x32 (Qwen3-VL)
SAME = 1e-6  # default batch against the processor's: the same tokens, positions and pixels
PACKED = 1e-5  # packed against padded, relative: the same sums, in another order
LOGITS = 1e-5  # a packed row's logits against its padded rows' (within 1, in float32)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    datagen.generate(out, samples=10, seed=32, max_megapixels=0.4, workers=2)
    return out


@pytest.fixture(scope="module", params=["demo", "conversations"])
def manifest(request, data):
    if request.param == "demo":
        return data / "manifest.jsonl"
    return tiny_vl.conversations_manifest(data, count=10, seed=33)


def samples_of(manifest) -> dict:
    return {json.loads(line)["id"]: json.loads(line) for line in manifest.read_text().splitlines()}


def batches(manifest, family, **options):
    with mmfeed.Loader(
        manifest,
        tokenizer=tiny_vl.tokenizer_of(family),
        model=family,
        max_pixels=MAX_PIXELS,
        shuffle=False,
        **options,
    ) as loader:
        out = list(loader)
        assert not loader.errors()
    return out


@pytest.mark.heavy  # Qwen3.5's logits over its 248k-token vocabulary: 6 GB
@pytest.mark.parametrize("family", tiny_vl.FAMILIES)
def test_a_default_batch_trains_as_the_processors_batch(manifest, family):
    model = tiny_vl.tiny_model(family)
    processor = tiny_vl.hf_processor(family, MAX_PIXELS)
    samples = samples_of(manifest)
    for batch in batches(manifest, family, batch_size=4):
        assert isinstance(batch, mmfeed.Batch)
        ref = tiny_vl.processor_batch(processor, [samples[s] for s in batch["sample_ids"]], manifest.parent)
        for key in ("input_ids", "attention_mask", "mm_token_type_ids", "image_grid_thw"):
            assert torch.equal(batch[key], ref[key]), key
        assert batch["mm_token_type_ids"].dtype == torch.int64
        with torch.no_grad():
            loss = model(**batch).loss  # the whole batch, its metadata included, as a user writes it
        want = tiny_vl.model_loss(model, ref, labels=batch["labels"])
        assert abs(loss.item() - want.item()) <= SAME, (loss.item(), want.item())
        assert abs(tiny_vl.model_loss(model, batch).item() - want.item()) <= SAME


@pytest.mark.parametrize("family", tiny_vl.FAMILIES)
def test_a_batch_without_images_trains_as_the_processors_batch(family, tmp_path):
    """A batch of text-only samples has no pixel_values nor image_grid_thw (the processors return
    none; the models' vision towers fail on empty ones), and trains as the processor's batch."""
    lines = [
        {
            "id": f"t{i}",
            "messages": [{"role": "user", "content": "Hi " * (i + 1)}, {"role": "assistant", "content": "Hello."}],
        }
        for i in range(2)
    ]
    manifest = tmp_path / "text.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (batch,) = batches(manifest, family, batch_size=2)
    assert "pixel_values" not in batch and "image_grid_thw" not in batch
    model = tiny_vl.tiny_model(family)
    ref = tiny_vl.processor_batch(tiny_vl.hf_processor(family, MAX_PIXELS), lines, tmp_path)
    assert "pixel_values" not in ref
    want = tiny_vl.model_loss(model, ref, labels=batch["labels"])
    assert abs(tiny_vl.model_loss(model, batch).item() - want.item()) <= SAME
    with torch.no_grad():
        assert abs(model(**batch).loss.item() - want.item()) <= SAME  # as a user writes it


def test_default_batches_carry_the_models_positions_and_token_types(data):
    # position_ids are get_rope_index's (on by default: the model skips its own pass), and
    # mm_token_type_ids marks image pads 1, everything else 0 (video pads 2: test_video_loader).
    model = tiny_vl.tiny_model("qwen2-vl")
    for batch in batches(data / "manifest.jsonl", "qwen2-vl", batch_size=3):
        want, _ = model.model.get_rope_index(
            batch["input_ids"],
            batch["mm_token_type_ids"],
            image_grid_thw=batch["image_grid_thw"],
            attention_mask=batch["attention_mask"],
        )
        assert torch.equal(batch["position_ids"], want)
        image_pad = 151655
        assert torch.equal(batch["mm_token_type_ids"], (batch["input_ids"] == image_pad).long())
    no_positions = batches(data / "manifest.jsonl", "qwen2-vl", batch_size=3, mrope=False)
    assert all("position_ids" not in b for b in no_positions)


def padded_of(manifest, family, sample_ids, tmp_path) -> mmfeed.Batch:
    """The padded batch of exactly `sample_ids`, in that order."""
    lines = {json.loads(line)["id"]: line for line in manifest.read_text().splitlines()}
    sub = tmp_path / "sub.jsonl"
    sub.write_text("".join(f"{lines[s]}\n" for s in sample_ids))
    if not (tmp_path / "images").exists():  # the manifest's relative image paths
        (tmp_path / "images").symlink_to(manifest.parent / "images")
    (padded,) = batches(sub, family, batch_size=len(sample_ids))
    return padded


# Qwen3.5's packed rows: test_a_packed_qwen3_5_row_trains_as_the_padded_batch_of_its_samples.
@pytest.mark.parametrize("family", [f for f in tiny_vl.FAMILIES if f != "qwen3.5"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_packed_row_trains_as_the_padded_batch_of_its_samples(manifest, family, attn, tmp_path):
    model = tiny_vl.tiny_model(family, attn=attn)
    rows = batches(manifest, family, token_budget=2048, pack_window=5, pad_to_multiple_of=64)
    assert any(len(r["sample_ids"]) > 1 for r in rows)
    for row in rows:
        assert "attention_mask" not in row and row["use_cache"] is False
        assert row["position_ids"].shape == (4, 1, row["input_ids"].shape[1])
        (cu_q, cu_k), (max_q, max_k) = prepare_fa_kwargs_from_position_ids(row["position_ids"][0])
        assert torch.equal(row["cu_seq_lens_q"], cu_q) and torch.equal(row["cu_seq_lens_k"], cu_k)
        assert row["cu_seq_lens_q"].dtype == torch.int32
        assert row["max_length_q"] == int(max_q) and row["max_length_k"] == int(max_k)
        padded = padded_of(manifest, family, row["sample_ids"], tmp_path)
        packed_loss = tiny_vl.model_loss(model, row).item()
        padded_loss = tiny_vl.model_loss(model, padded).item()
        assert abs(packed_loss - padded_loss) <= PACKED * abs(padded_loss), (packed_loss, padded_loss)


@pytest.mark.heavy  # Qwen3.5's full-vocabulary logits
def test_qwen3_5_packed_rows_carry_what_its_linear_attention_reads(manifest, tmp_path):
    """A packed Qwen3.5 row is its samples' padded rows end to end (tokens, labels, mrope positions
    restarting per sample) with the two boundaries its Gated DeltaNet layers' kernels read:
    cu_seq_lens_q (flash-linear-attention's recurrence) and seq_idx (causal_conv1d's short
    convolution, which cu_seq_lens_q does not reach; the row's tail, padding to a multiple of 64,
    a sequence of its own). Both kernels are CUDA-only; on a CPU transformers refuses the row by
    the name of each, which shows each boundary reaches its kernel."""
    model = tiny_vl.tiny_model("qwen3.5")
    rows = batches(manifest, "qwen3.5", token_budget=2048, pack_window=5, pad_to_multiple_of=64)
    assert any(len(r["sample_ids"]) > 1 for r in rows)
    assert any(len(r["cu_seq_lens_q"]) == len(r["sample_ids"]) + 2 for r in rows)  # a tail
    for row in rows:
        padded = padded_of(manifest, "qwen3.5", row["sample_ids"], tmp_path)
        keep = padded["attention_mask"].bool()
        assert torch.equal(row["input_ids"][0, : int(keep.sum())], padded["input_ids"][keep])
        assert torch.equal(row["labels"][0, : int(keep.sum())], padded["labels"][keep])
        lengths = keep.sum(dim=1)
        cu = row["cu_seq_lens_q"].long()
        assert torch.equal(cu[: len(lengths) + 1], torch.cat([lengths.new_zeros(1), lengths.cumsum(0)]))
        assert torch.equal(row["position_ids"][1:, 0, : int(keep.sum())], padded["position_ids"][:, keep])
        assert row["seq_idx"].dtype == torch.int32 and row["seq_idx"].shape == row["input_ids"].shape
        assert torch.equal(row["seq_idx"][0].long(), torch.repeat_interleave(torch.arange(len(cu) - 1), cu.diff()))
    with pytest.raises(ValueError, match="can't keep packed sequences apart without `causal_conv1d`"):
        tiny_vl.model_loss(model, rows[0])
    without_seq_idx = mmfeed.Batch({k: v for k, v in rows[0].items() if k != "seq_idx"})
    with pytest.raises(ValueError, match="can't keep packed sequences apart without `flash-linear-attention`"):
        tiny_vl.model_loss(model, without_seq_idx)


@pytest.mark.heavy  # Qwen3.5's full-vocabulary logits: 12.8 GB
def test_a_packed_qwen3_5_row_trains_as_the_padded_batch_of_its_samples(manifest, tmp_path):
    """With kernels that keep the contracts of causal_conv1d's seq_idx and flash-linear-attention's
    cu_seqlens (varlen_kernels: transformers' torch paths a sequence at a time), a packed row gives
    each sample the logits of its padded row, and the padded batch's loss. Without seq_idx the
    convolution reads the previous sample's last tokens: a sample's first logits move, as they do
    in transformers on a GPU given no seq_idx (it derives none for the convolution)."""
    model = tiny_vl.tiny_model("qwen3.5")
    for row in batches(manifest, "qwen3.5", token_budget=2048, pack_window=5):
        padded = padded_of(manifest, "qwen3.5", row["sample_ids"], tmp_path)
        keep = padded["attention_mask"].bool()
        with torch.no_grad(), varlen_kernels.installed():
            padded_out, packed_out = model(**padded.model_inputs()), model(**row.model_inputs())  # labels: loss too
            want, got = padded_out.logits[keep], packed_out.logits[0, : int(keep.sum())]
            assert (got - want).abs().max().item() <= LOGITS
            packed_loss, padded_loss = packed_out.loss.item(), padded_out.loss.item()
            assert abs(packed_loss - padded_loss) <= PACKED * abs(padded_loss), (packed_loss, padded_loss)
            if len(row["sample_ids"]) > 1:
                blind = mmfeed.Batch({k: v for k, v in row.items() if k != "seq_idx"})
                leaked = model(**blind.model_inputs()).logits[0, : int(keep.sum())]
                assert (leaked - want).abs().max().item() > 1000 * LOGITS


def test_packed_labels_never_cross_a_sample_boundary(data):
    for row in batches(data / "manifest.jsonl", "qwen2-vl", token_budget=3000, pack_window=6):
        starts = row["cu_seq_lens_q"][:-1].long()
        assert (row["labels"][0, starts] == -100).all()
        # each sample's text positions restart at 0; the mrope rows start there too
        assert (row["position_ids"][:, 0, starts] == 0).all()
    # without the mrope rows transformers would read the row as one sequence: refused
    with pytest.raises(ValueError, match="packed_format hf needs the mrope positions"):
        batches(data / "manifest.jsonl", "qwen2-vl", token_budget=3000, mrope=False)


def megatron_bridge_thd(padded, multiple: int) -> dict:
    """Megatron-Bridge's THD layout of a padded batch (its pack_or_pad_batch_sequences, thd branch,
    after its collate's next-token labels): each sample at the running sum of its lengths rounded up
    to `multiple`, the rest padding; labels the next token's where trained, -100 elsewhere."""
    lengths = padded["attention_mask"].sum(dim=1).to(torch.int32)
    rounded = (lengths + multiple - 1) // multiple * multiple
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(lengths, 0)
    cu_padded = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu_padded[1:] = torch.cumsum(rounded, 0)
    total = int(cu_padded[-1])
    tokens = torch.full((1, total), 151643, dtype=torch.int64)
    labels = torch.full((1, total), -100, dtype=torch.int64)
    positions = torch.zeros((3, 1, total), dtype=torch.int64)
    for i, n in enumerate(lengths.tolist()):
        at = int(cu_padded[i])
        tokens[0, at : at + n] = padded["input_ids"][i, :n]
        labels[0, at : at + n - 1] = padded["labels"][i, 1:n]
        positions[:, 0, at : at + n] = padded["position_ids"][:, i, :n]
    return {
        "input_ids": tokens,
        "labels": labels,
        "loss_mask": (labels != -100).float(),
        "position_ids": positions,
        "cu_seqlens": cu,
        "cu_seqlens_padded": cu_padded,
        "max_seqlen": int(lengths.max()),
        "max_seqlen_padded": int(rounded.max()),
    }


@pytest.mark.parametrize("multiple", [1, 4])  # context parallelism 1 and 2 (2 x CP)
def test_a_thd_row_is_megatron_bridges_layout_of_its_samples(data, multiple, tmp_path):
    manifest = data / "manifest.jsonl"
    rows = batches(
        manifest, "qwen2-vl", token_budget=3000, pack_window=6, packed_format="thd", pad_to_multiple_of=multiple
    )
    assert any(len(r["sample_ids"]) > 1 for r in rows)
    for row in rows:
        want = megatron_bridge_thd(padded_of(manifest, "qwen2-vl", row["sample_ids"], tmp_path), multiple)
        for key, value in want.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(row[key], value), key
            else:
                assert row[key] == value, key
        assert row["cu_seqlens"].dtype == row["cu_seqlens_padded"].dtype == torch.int32
        assert "attention_mask" not in row and row.is_thd
        with pytest.raises(ValueError, match="mmfeed.megatron.forward_args"):
            row.model_inputs()
