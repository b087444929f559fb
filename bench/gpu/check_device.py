"""The GPU half of the package's tests, for bench/gpu/run.sh: on a machine with CUDA,
1. batch memory is page-locked as torch sees it (is_pinned), whichever of the loader and torch
   touches CUDA first (each order in a fresh process);
2. device="cuda:0" and device="cuda" deliver device tensors equal to the host batches, every copy
   from pinned memory, and once warm the copy stage allocates no device memory;
3. the exit sequence (bench/gpu/exit_sequence.py: loaders one after the other, batches kept in
   globals, a device loader left open) exits 0.
Prints what it checked; exits non-zero on the first failure."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import mmfeed

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))

import datagen  # noqa: E402

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = dict(tokenizer=str(TOKENIZER), max_pixels=401408, batch_size=4, seed=1, tensors="torch")

PINNED_IN_ORDER = """
import json, sys, torch, mmfeed
options = json.loads(sys.argv[2])
if sys.argv[1] == "torch-first":
    torch.zeros(1, device="cuda")  # the trainer has started on the GPU
with mmfeed.Loader(sys.argv[3], **options) as loader:
    pinned = [all(v.is_pinned() for v in b.values() if isinstance(v, torch.Tensor)) for b in loader]
print(json.dumps({"order": sys.argv[1], "batches": len(pinned), "all_pinned": all(pinned)}))
"""


def main() -> int:
    assert torch.cuda.is_available(), "no CUDA device"
    with tempfile.TemporaryDirectory() as tmp:
        datagen.generate(tmp, samples=24, seed=3, max_megapixels=1.0, workers=2)
        manifest = Path(tmp) / "manifest.jsonl"
        for order in ("loader-first", "torch-first"):
            done = subprocess.run(
                [sys.executable, "-c", PINNED_IN_ORDER, order, json.dumps(OPTIONS), str(manifest)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, (order, done.returncode, done.stderr[-2000:])
            result = json.loads(done.stdout)
            print(f"check_device: is_pinned, {order}: {result}")
            assert result["all_pinned"], f"{order}: torch does not see the batch memory as pinned"
        with mmfeed.Loader(manifest, **OPTIONS) as host_loader:
            host = [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in b.items()} for b in host_loader]
            memory = host_loader.metrics()["batch_memory"]
        print(f"check_device: batch memory: {memory}")
        assert "pinned batch memory on device 0" in memory and "refused" not in memory, memory
        for device in ("cuda:0", "cuda"):  # "cuda": torch's current device
            with mmfeed.Loader(manifest, device=device, epochs=2, **OPTIONS) as loader:
                batches = 0
                for batch in loader:
                    expected = host[batches % len(host)] if batch["epoch"] == 0 else None
                    for key, value in batch.items():
                        if isinstance(value, torch.Tensor):
                            assert value.device == torch.device("cuda", 0), (device, key, value.device)
                            if expected is not None:
                                assert torch.equal(value.cpu(), expected[key]), (device, batches, key)
                    batches += 1
                copy = loader.metrics()["device_copy"]
            print(f"check_device: device={device}: {batches} batches, copy stage {json.dumps(copy)}")
            assert batches == 2 * len(host) and copy["pageable_copies"] == 0, copy
            assert copy["device_buffers"]["allocations"] < len(host), "device blocks are not reused"
        done = subprocess.run(
            [sys.executable, "-X", "faulthandler", str(ROOT / "bench" / "gpu" / "exit_sequence.py"), str(manifest)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        print(f"check_device: exit sequence: exit status {done.returncode}; {done.stdout.strip()[-500:]}")
        assert done.returncode == 0, done.stderr[-3000:]
    print(json.dumps({"check_device": "ok", "batches": len(host)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
