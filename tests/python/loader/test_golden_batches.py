"""Issue 17: restructuring the engine must not change what it delivers. The digests in
tests/data/golden_batches.json were taken from the Loader before its stages were split; every
configuration here must still produce those batches: the same samples in the same order, ids,
labels, masks, grids and positions byte for byte, pixel sums within 1e-6 per element. To re-record after a deliberate
change of output: `python tests/python/loader/test_golden_batches.py --record` (and say why in the
commit)."""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

import mmfeed

ROOT = Path(__file__).resolve().parents[3]
TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
GOLDEN = ROOT / "tests" / "data" / "golden_batches.json"
CONFIGS = {
    "padded": dict(batch_size=4, seed=3, epochs=2),
    "packed": dict(token_budget=1500, pack_window=8, seed=5),
    "mrope": dict(batch_size=3, mrope=True, shuffle=False, pad_to_multiple_of=8),
    "serial": dict(batch_size=4, seed=3, mode="serial"),
    "rank 1 of 3": dict(batch_size=2, rank=1, world_size=3, seed=7),
    "qwen3-vl": dict(batch_size=4, model="qwen3-vl", max_pixels=200_704, mrope=True, seed=2),
}


def data(tmp: Path) -> Path:
    import datagen

    datagen.generate(tmp, samples=16, seed=17, max_megapixels=0.4, workers=2)
    return tmp / "manifest.jsonl"


def digests(manifest: Path) -> dict:
    out = {}
    for name, options in CONFIGS.items():
        options = {"max_pixels": 100_000, **options}
        with mmfeed.Loader(manifest, tokenizer=TOKENIZER, tensors="np", **options) as loader:
            batches = []
            for b in loader:
                arrays = {k: v for k, v in b.items() if isinstance(v, np.ndarray)}
                record = {"epoch": b["epoch"], "sample_ids": b["sample_ids"]}
                for k, v in sorted(arrays.items()):
                    if v.dtype == np.float32:  # pixels: the sums, compared within a tolerance (below)
                        record[k] = [
                            str(v.dtype),
                            list(v.shape),
                            float(v.astype(np.float64).sum()),
                            float(np.abs(v.astype(np.float64)).sum()),
                        ]
                    else:  # integers: exact
                        record[k] = f"{v.dtype} {list(v.shape)} {hashlib.sha256(v.tobytes()).hexdigest()[:16]}"
                batches.append(record)
            assert not loader.errors(), loader.errors()
        out[name] = batches
    return out


def test_batches_are_byte_identical_to_the_recorded_ones(tmp_path):
    recorded = json.loads(GOLDEN.read_text())
    now = digests(data(tmp_path))
    assert sorted(now) == sorted(recorded)
    for name in CONFIGS:
        assert len(now[name]) == len(recorded[name]), name
        for got, want in zip(now[name], recorded[name]):
            pixels, want_pixels = got.pop("pixel_values"), want.pop("pixel_values")
            assert got == want, name
            # The float rows may differ in the last bit where a machine's SIMD kernel rounds
            # otherwise (FMA): 1e-6 per element, as the image parity tests allow.
            assert pixels[:2] == want_pixels[:2], name
            size = max(1, int(np.prod(pixels[1])))
            assert abs(pixels[2] - want_pixels[2]) <= 1e-6 * size and abs(pixels[3] - want_pixels[3]) <= 1e-6 * size


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        GOLDEN.write_text(json.dumps(digests(data(Path(tmp))), indent=1) + "\n")
    print(f"recorded {GOLDEN}")
