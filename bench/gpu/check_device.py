"""The GPU half of the Python package's tests, for bench/gpu/run.sh: on a machine with CUDA,
batches are page-locked and device="cuda:0" delivers device tensors equal to the host ones.
Prints what it checked; exits non-zero on the first mismatch."""

import json
import sys
import tempfile
from pathlib import Path

import torch

import mmfeed

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))

import datagen  # noqa: E402
TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"


def main() -> int:
    assert torch.cuda.is_available(), "no CUDA device"
    with tempfile.TemporaryDirectory() as tmp:
        datagen.generate(tmp, samples=24, seed=3, max_megapixels=1.0, workers=2)
        manifest = Path(tmp) / "manifest.jsonl"
        options = dict(tokenizer=TOKENIZER, max_pixels=401408, batch_size=4, seed=1, tensors="torch")
        with mmfeed.Loader(manifest, **options) as host_loader:
            host = []
            for b in host_loader:
                # Page-locked as the driver sees it (torch asks cudaPointerGetAttributes).
                assert b["pixel_values"].is_pinned() and b["input_ids"].is_pinned(), "batch memory not pinned"
                host.append({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in b.items()})
            memory = host_loader.metrics()["batch_memory"]
        print(f"check_device: batch memory: {memory}")
        assert "pinned batch memory on device 0" in memory and "refused" not in memory, memory
        for device in ("cuda:0", "cuda"):  # "cuda": torch's current device
            with mmfeed.Loader(manifest, device=device, **options) as loader:
                for i, batch in enumerate(loader):
                    for key, value in batch.items():
                        if isinstance(value, torch.Tensor):
                            assert value.device == torch.device("cuda", 0), (device, key, value.device)
                            assert torch.equal(value.cpu(), host[i][key]), (device, i, key)
                assert i + 1 == len(host)
                assert "on device 0" in loader.metrics()["batch_memory"]
    print(json.dumps({"check_device": "ok", "batches": len(host)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
