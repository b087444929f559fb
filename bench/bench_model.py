"""The benchmark's real-GPU trainer: a Qwen-VL-shaped model with random weights, so that a
benchmark can measure how busy mmfeed keeps a real GPU without downloading a checkpoint.

    step = bench_model.make_train_step(device="cuda")   # 585M parameters, AdamW, bf16 autocast
    gpu = bench_model.Nvml.open()                        # None without an NVIDIA GPU
    sampler = bench_model.Sampler(gpu)
    sampler.start()
    with mmfeed.Loader("demo-data/manifest.jsonl", tokenizer="tokenizer.json", batch_size=8) as loader:
        for batch in loader:
            loss = step(batch)                           # forward, backward, AdamW; device synchronised
    print(f"GPU busy {sampler.stop():.0%}")

The model consumes a mmfeed (or Hugging Face Qwen2-VL processor) batch as it is: a vision tower
over `pixel_values` [rows, 1176], each image attended on its own (sizes from `image_grid_thw`);
a 2x2 patch merger (the processor orders patches so that each merge window is 4 consecutive
rows); a causal LM whose `<|image_pad|>` tokens are replaced, in order, by the merged vision
embeddings; cross entropy over the shifted `labels`. Only the shapes and the cost are Qwen's:
there are no rotary positions and the layers are plain pre-norm transformer blocks.
"""

from __future__ import annotations

import ctypes
import sys
import threading

import torch
import torch.nn.functional as F
from torch import nn

IMAGE_PAD_ID = 151655  # <|image_pad|> in the Qwen2-VL, Qwen2.5-VL and Qwen3 tokenizers
VOCAB_SIZE = 151936
PATCH_DIM = 3 * 2 * 14 * 14  # channels x temporal patch x patch x patch: one pixel_values row
IGNORE_INDEX = -100

PRESETS = {
    # About Qwen2-VL-2B's vision tower width, a 1.5B-wide LM, a quarter of the depth: a step of
    # tens of milliseconds on an H200 for a batch of 8 conversations.
    "default": dict(vision_dim=1024, vision_layers=8, lm_dim=1536, lm_layers=8, heads=16),
    # For CPU smoke tests: the embedding (vocab x 64) is most of it.
    "tiny": dict(vision_dim=64, vision_layers=1, lm_dim=64, lm_layers=1, heads=4),
}


class _CausalBlock(nn.Module):
    """A pre-norm decoder layer. Attention gets one [B, 1, T, T] mask shared by all heads;
    TransformerEncoderLayer would expand causal plus padding masks to [B * heads, T, T]."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.attn_norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.mlp_norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.out(attended.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.mlp_norm(x))


class TinyQwenVL(nn.Module):
    """Vision tower, 2x2 patch merger and causal LM; forward() returns the mean token loss."""

    def __init__(
        self,
        *,
        vision_dim: int = 1024,
        vision_layers: int = 8,
        lm_dim: int = 1536,
        lm_layers: int = 8,
        heads: int = 16,
        vocab_size: int = VOCAB_SIZE,
        patch_dim: int = PATCH_DIM,
        tie_embeddings: bool = True,
    ):
        super().__init__()
        self.patch_embed = nn.Linear(patch_dim, vision_dim)
        self.vision_layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                vision_dim, heads, 4 * vision_dim, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
            )
            for _ in range(vision_layers)
        )
        self.merger_norm = nn.LayerNorm(vision_dim)
        self.merger_mlp = nn.Sequential(
            nn.Linear(4 * vision_dim, 4 * vision_dim), nn.GELU(), nn.Linear(4 * vision_dim, lm_dim)
        )
        self.embed = nn.Embedding(vocab_size, lm_dim)
        nn.init.normal_(self.embed.weight, std=0.02)  # N(0, 1) would make the tied head's logits huge
        self.lm_layers = nn.ModuleList(_CausalBlock(lm_dim, heads) for _ in range(lm_layers))
        self.norm = nn.LayerNorm(lm_dim)
        self.lm_head = nn.Linear(lm_dim, vocab_size, bias=False)
        if tie_embeddings:
            self.lm_head.weight = self.embed.weight

    def encode_images(self, pixel_values: torch.Tensor, image_grid_thw: torch.Tensor) -> torch.Tensor:
        """[rows, patch_dim] -> [rows / 4, lm_dim]; each image attends only to its own patches."""
        sizes = [t * h * w for t, h, w in image_grid_thw.tolist()]
        if sum(sizes) != pixel_values.shape[0]:
            raise ValueError(
                f"image_grid_thw describes {sum(sizes)} patches but pixel_values has "
                f"{pixel_values.shape[0]} rows: the batch's grids and pixels disagree"
            )
        x = self.patch_embed(pixel_values)
        images = nn.utils.rnn.pad_sequence(x.split(sizes), batch_first=True)
        padding = torch.arange(images.shape[1], device=x.device)[None] >= torch.tensor(sizes, device=x.device)[:, None]
        for layer in self.vision_layers:
            images = layer(images, src_key_padding_mask=padding)
        x = torch.cat([image[:n] for image, n in zip(images, sizes)])
        merged = self.merger_norm(x).reshape(-1, 4 * x.shape[-1])
        return self.merger_mlp(merged)

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor,
        image_grid_thw: torch.Tensor,
    ) -> torch.Tensor:
        is_image = input_ids == IMAGE_PAD_ID
        image_tokens = int(is_image.sum())
        rows = pixel_values.shape[0]
        if rows % 4 or image_tokens != rows // 4:
            raise ValueError(
                f"input_ids hold {image_tokens} image tokens ({IMAGE_PAD_ID}) but pixel_values has "
                f"{rows} rows, which merge 2x2 into {rows / 4:g} image embeddings: each image "
                f"needs one token per merged embedding"
            )
        x = self.embed(input_ids)
        if rows:
            vision = self.encode_images(pixel_values, image_grid_thw)
            x = x.masked_scatter(is_image[..., None], vision.to(x.dtype))
        t = input_ids.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        mask = causal & attention_mask.bool()[:, None, None, :]
        # A query must see at least one key: a left-padded row's first pads would otherwise see
        # none, which some attention kernels answer with NaN that then reaches real tokens.
        mask |= torch.eye(t, dtype=torch.bool, device=x.device)
        for layer in self.lm_layers:
            x = layer(x, mask)
        hidden = self.norm(x)[:, :-1]
        targets = labels[:, 1:]
        scored = targets != IGNORE_INDEX
        # Only labelled positions reach the head: [B, T, vocab] logits would dominate memory.
        logits = self.lm_head(hidden[scored])
        return F.cross_entropy(logits.float(), targets[scored])


class TrainStep:
    """One AdamW step per call on a batch; returns the loss. See make_train_step."""

    INPUTS = ("input_ids", "labels", "attention_mask", "pixel_values")

    def __init__(self, model: TinyQwenVL, device: torch.device, dtype: torch.dtype, lr: float):
        self.model = model
        self.device = device
        self.dtype = dtype
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=device.type == "cuda")

    def _to_device(self, value) -> torch.Tensor:
        tensor = value if isinstance(value, torch.Tensor) else torch.from_numpy(value)
        return tensor.to(self.device, non_blocking=True)

    def __call__(self, batch: dict) -> float:
        missing = [key for key in (*self.INPUTS, "image_grid_thw") if key not in batch]
        if missing:
            raise ValueError(
                f"batch lacks {', '.join(missing)}: the step needs {', '.join(self.INPUTS)} "
                f"and image_grid_thw, as mmfeed.Loader yields them"
            )
        inputs = {key: self._to_device(batch[key]) for key in self.INPUTS}
        # The grid stays on the host: only its sizes are read, and reading them from the device
        # would synchronise it.
        grid = torch.as_tensor(batch["image_grid_thw"])
        with torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype != torch.float32):
            loss = self.model(**inputs, image_grid_thw=grid)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return loss.item()


def make_train_step(
    device: str = "cuda", dtype: torch.dtype | None = None, preset: str = "default", lr: float = 1e-4
) -> TrainStep:
    """A callable step(batch) -> float: batch tensors or numpy arrays to `device`, forward under
    autocast to `dtype` (float32: no autocast), backward, AdamW, zero_grad, device synchronised.
    dtype None: bfloat16 on a GPU, float32 on the CPU (where the CPU lacks bfloat16 instructions,
    as AMD EPYC without AVX-512 does, torch's bfloat16 matmul falls back to a reference loop that
    took minutes per tiny step). preset: "default" (the GPU benchmark) or "tiny" (CPU smoke
    tests); weights are random."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}")
    device = torch.device(device)
    if dtype is None:
        dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    with device:
        model = TinyQwenVL(**PRESETS[preset])
    return TrainStep(model, device, dtype, lr)


class _NvmlUtilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class Nvml:
    """One GPU's utilisation through NVML (libnvidia-ml.so.1, shipped with the driver)."""

    def __init__(self, lib: ctypes.CDLL, handle: ctypes.c_void_p):
        self._lib = lib
        self._handle = handle

    @classmethod
    def open(cls, index: int = 0) -> Nvml | None:
        """The GPU at `index`, or None when the library, the driver or the GPU is absent."""
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError:
            return None
        if lib.nvmlInit_v2() != 0:
            return None
        handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)) != 0:
            lib.nvmlShutdown()
            return None
        nvml = cls(lib, handle)
        try:
            nvml.utilization()  # some virtualised GPUs answer NOT_SUPPORTED: treat as absent
        except RuntimeError:
            nvml.close()
            return None
        return nvml

    def utilization(self) -> float:
        """The share of the last sample period (1/6 s to 1 s, by GPU) a kernel ran, 0..1."""
        rates = _NvmlUtilization()
        status = self._lib.nvmlDeviceGetUtilizationRates(self._handle, ctypes.byref(rates))
        if status != 0:
            raise RuntimeError(f"nvmlDeviceGetUtilizationRates failed with NVML status {status}")
        return rates.gpu / 100

    def close(self) -> None:
        self._lib.nvmlShutdown()


class Sampler:
    """Samples `source.utilization()` (an Nvml) every `interval_s` on a thread, from start() to
    stop(); stop() returns the mean, 0..1, or None when no sample could be read (a failing read
    ends the sampling, not the run)."""

    def __init__(self, source: Nvml, interval_s: float = 0.1):
        self._source = source
        self._interval_s = interval_s
        self._samples: list[float] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            try:
                self._samples.append(self._source.utilization())
            except RuntimeError as e:
                print(f"nvml sampler: {e}; GPU utilisation not sampled further", file=sys.stderr)
                return
            if self._stopping.wait(self._interval_s):
                return

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> float | None:
        self._stopping.set()
        self._thread.join()
        return sum(self._samples) / len(self._samples) if self._samples else None
