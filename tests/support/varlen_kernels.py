"""CPU stand-ins for the two GPU kernels transformers runs a packed Qwen3.5 row's Gated DeltaNet
layers with, so that a CPU test can train a packed row as a GPU would.

transformers (models/qwen3_5/modeling_qwen3_5.py) calls two kernels per linear-attention layer:
  - `causal_conv1d_fn`, the short causal convolution: the `causal_conv1d` package's kernel, which
    keeps packed sequences apart when given `seq_idx` [B, T] (each token's sequence: a tap on a
    token of another sequence reads zero);
  - `torch_chunk_gated_delta_rule`: flash-linear-attention's `chunk_gated_delta_rule`, which runs
    the recurrence from a zero state at each offset of `cu_seqlens` (batch 1).
Both packages run on CUDA only, and transformers' own torch paths refuse a packed row. The
stand-ins keep those contracts by running transformers' torch paths one sequence at a time; given
no boundaries they are transformers' torch paths on the whole row.

    with varlen_kernels.installed():
        loss = model(**packed_row).loss
"""

from __future__ import annotations

import contextlib

import torch
from transformers.models.qwen3_5 import modeling_qwen3_5 as qwen3_5


def spans_of(seq_idx: torch.Tensor) -> list[tuple[int, int]]:
    """The [start, end) runs of equal values in a [1, T] seq_idx."""
    row = seq_idx[0]
    starts = [0] + (torch.nonzero(row[1:] != row[:-1]).flatten() + 1).tolist()
    return list(zip(starts, starts[1:] + [row.numel()]))


def _conv(torch_conv):
    def conv(hidden_states, weight, bias=None, activation=None, seq_idx=None, **kwargs):
        if seq_idx is None:
            return torch_conv(hidden_states, weight, bias, activation=activation)
        assert hidden_states.shape[0] == 1, "a packed row"
        parts = [torch_conv(hidden_states[..., a:b], weight, bias, activation=activation) for a, b in spans_of(seq_idx)]
        return torch.cat(parts, dim=-1)

    return conv


def _chunk_rule(torch_rule):
    def rule(query, key, value, g, beta, cu_seqlens=None, initial_state=None, output_final_state=False, **kwargs):
        kwargs.pop("seq_idx", None)  # the convolution's; the rule reads cu_seqlens
        if cu_seqlens is None:
            return torch_rule(
                query, key, value, g=g, beta=beta, initial_state=initial_state,
                output_final_state=output_final_state, **kwargs,
            )  # fmt: skip
        assert query.shape[0] == 1 and initial_state is None and not output_final_state, "training a packed row"
        bounds = cu_seqlens.tolist()
        parts = [
            torch_rule(query[:, a:b], key[:, a:b], value[:, a:b], g=g[:, a:b], beta=beta[:, a:b], **kwargs)[0]
            for a, b in zip(bounds, bounds[1:])
            if b > a
        ]
        return torch.cat(parts, dim=1), None

    return rule


@contextlib.contextmanager
def installed():
    """Qwen3.5's linear-attention layers run with the stand-ins while in the block."""
    conv, rule = qwen3_5.causal_conv1d_fn, qwen3_5.torch_chunk_gated_delta_rule
    qwen3_5.causal_conv1d_fn, qwen3_5.torch_chunk_gated_delta_rule = _conv(conv), _chunk_rule(rule)
    try:
        yield
    finally:
        qwen3_5.causal_conv1d_fn, qwen3_5.torch_chunk_gated_delta_rule = conv, rule
