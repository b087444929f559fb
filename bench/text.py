"""bench/text: tokenizer throughput on one core, same corpus, same run: mmfeed against Hugging
Face `tokenizers` (RAYON_NUM_THREADS=1, encode_batch without special tokens), on the Qwen3
tokenizer.json and the 10 MB test corpus (tests/python/corpus.py). Every id list is checked
equal before timing.

Usage: python bench/text.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import corpus  # noqa: E402
from tokenizers import Tokenizer as HFTokenizer  # noqa: E402

import mmfeed  # noqa: E402

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    docs = corpus.build()
    n_bytes = sum(len(d.encode("utf-8")) for d in docs)
    ours = mmfeed.Tokenizer.from_file(TOKENIZER)
    hf = HFTokenizer.from_file(str(TOKENIZER))
    want = [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)]
    got = ours.encode_batch(docs)
    assert got == want, "ids differ"
    n_tokens = sum(map(len, got))

    def fresh_ours():  # a new tokenizer: its piece cache starts empty, like HF's below
        mmfeed.Tokenizer.from_file(TOKENIZER).encode_batch(docs)

    t_ours_warm = best(lambda: ours.encode_batch(docs), args.repeat)
    t_ours_cold = best(fresh_ours, args.repeat)
    t_hf = best(lambda: hf.encode_batch(docs, add_special_tokens=False), args.repeat)
    print(f"bench/text: {n_bytes / 1e6:.1f} MB, {n_tokens / 1e6:.2f} M tokens, one thread, best of {args.repeat}\n")
    print(f"{'tokenizer':<36}{'MB/s':>8}{'M tokens/s':>12}{'ratio':>8}")
    for label, t in (
        ("HF tokenizers", t_hf),
        ("mmfeed (new tokenizer each run)", t_ours_cold),
        ("mmfeed (warm piece cache)", t_ours_warm),
    ):
        print(f"{label:<36}{n_bytes / 1e6 / t:>8.1f}{n_tokens / 1e6 / t:>12.2f}{t_hf / t:>7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
