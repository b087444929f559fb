"""The process shape that ended in SIGSEGV at exit on the H200 (issue 19), for check_device.py:
three loaders one after the other in one process (one before torch has touched CUDA, one
after, one with device="cuda:0"), host batches cloned and kept, the last batches of each held in
globals, the device loader left open, nothing freed by hand. Must exit 0.

Usage: exit_sequence.py MANIFEST"""

import sys
from pathlib import Path

import torch

import mmfeed

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = dict(
    tokenizer=str(ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"),
    max_pixels=401408,
    batch_size=4,
    seed=1,
    tensors="torch",
)
manifest = sys.argv[1]

kept = []
with mmfeed.Loader(manifest, **OPTIONS) as before_torch:
    for batch in before_torch:
        kept.append({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in batch.items()})
last_host = batch
pinned_by_torch = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)  # torch starts CUDA
with mmfeed.Loader(manifest, **OPTIONS) as after_torch:
    for batch in after_torch:  # noqa: B007  (the last batch is kept past the loader's close)
        pass
last_after = batch
on_device = mmfeed.Loader(manifest, device="cuda:0", **OPTIONS)
for i, batch in enumerate(on_device):
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value.cpu(), kept[i][key]), (i, key)
last_device = batch
print(f"exit_sequence: {i + 1} device batches equal the host ones; exiting with everything held")
