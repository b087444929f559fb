"""The batch the Loader yields: a dict of tensors (and a few plain values) that a transformers
Qwen-VL model takes as it is.

    for batch in loader:
        loss = model(**batch).loss                 # the extra keys are ignored by the model
        loss = model(**batch.model_inputs()).loss  # or: only what its forward takes

Padded batches carry input_ids, labels, attention_mask, mm_token_type_ids, position_ids [3, B, L]
(mrope), pixel_values and image_grid_thw (and the video tensors when the batch holds a video), as
transformers' processors return them, positions included, so that the model does not run its
get_rope_index. Packed rows (token_budget) in transformers' layout carry position_ids [4, 1, T]
(a text row restarting at each sample, then the mrope rows), no attention mask, cu_seq_lens_q/k
and max_length_q/k (Qwen3.5's rows also seq_idx [1, T], each token's sequence, which its Gated
DeltaNet convolution reads), and use_cache=False: transformers reads a row as separate samples only when
the forward has no attention mask and no KV cache, and a model builds a cache unless told not to
(its config's use_cache), in training too. Megatron's layout (packed_format="thd") is for
mmfeed.megatron.forward_args.

The batch's own keys, never model inputs: sample_ids, epoch, index, buffer_address.
"""

from __future__ import annotations

# What the Loader adds to a batch that no model takes.
METADATA = frozenset({"sample_ids", "epoch", "index", "buffer_address"})


class Batch(dict):
    """A dict of the batch's tensors and values; see the module docstring."""

    @property
    def is_thd(self) -> bool:
        """Whether the batch is a packed row in Megatron's THD layout (packed_format="thd")."""
        return "cu_seqlens_padded" in self

    def model_inputs(self) -> dict:
        """The keyword arguments of a transformers Qwen-VL forward: the batch less its metadata,
        with use_cache=False (training needs no KV cache, and a packed row must have none)."""
        if self.is_thd:
            raise ValueError(
                "this batch is packed in Megatron's THD layout (packed_format='thd'): "
                "mmfeed.megatron.forward_args(batch) gives its forward arguments"
            )
        inputs = {k: v for k, v in self.items() if k not in METADATA}
        inputs["use_cache"] = False
        return inputs


def sample_tokens(batch: dict) -> int:
    """The tokens of the batch's samples, its padding left out: the attention mask's ones (padded),
    or where the packed row's last sample ends."""
    import numpy as np

    if "attention_mask" in batch:
        return int(np.asarray(batch["attention_mask"]).sum())
    cu = batch["cu_seqlens"] if "cu_seqlens" in batch else batch["cu_seq_lens_q"]
    return int(np.asarray(cu)[len(batch["sample_ids"])])


def make_batch(values: dict) -> Batch:
    """The engine's batch dict as a Batch; a packed row in transformers' layout gets use_cache=False."""
    batch = Batch(values)
    if "cu_seq_lens_q" in batch:
        batch["use_cache"] = False
    return batch
