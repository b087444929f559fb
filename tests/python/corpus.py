"""A tokenizer test corpus of at least 10 MB, built from what this machine holds plus
generated multilingual text, deterministic for a seed. Used by the tokenizer tests and the
text benchmark.

Sources: English prose (Debian's /usr/share/doc copyright and changelog files), source code
(the Python files of installed packages, C headers in /usr/include), and generated text in
Chinese, Japanese, Korean, Arabic, Hindi, Cyrillic and Greek scripts, emoji with ZWJ sequences,
skin tones and flags, combining marks in NFC and NFD forms, whitespace runs, CRLF line ends,
special tokens inside text and very long words.
"""

from __future__ import annotations

import gzip
import random
import sys
import unicodedata
from pathlib import Path

SPECIALS = [
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|vision_start|>",
    "<|image_pad|>",
    "<think>",
    "</think>",
    "<tool_call>",
]
SCRIPTS = {
    "zh": [(0x4E00, 0x9FA5)],
    "ja": [(0x3041, 0x3096), (0x30A1, 0x30FA), (0x4E00, 0x62FF)],
    "ko": [(0xAC00, 0xD7A3)],
    "ar": [(0x0621, 0x064A)],
    "hi": [(0x0905, 0x0939), (0x093E, 0x094C)],
    "ru": [(0x0410, 0x044F)],
    "el": [(0x0391, 0x03A1), (0x03A3, 0x03A9), (0x03B1, 0x03C9)],
}
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇧🇷", "❤️", "🧑🏿‍💻", "🐍", "✨", "👋🏻", "🤖"]
PUNCT = {"zh": "，。！？", "ja": "、。！？", "ko": " .,!?", "ar": " ،؟.", "hi": " ।,?", "ru": " .,!?", "el": " .,;"}


def _prose_files() -> list[Path]:
    docs = sorted(Path("/usr/share/doc").glob("*/copyright")) + sorted(Path("/usr/share/doc").glob("*/changelog*.gz"))
    return docs


def _code_files() -> list[Path]:
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    code = sorted(site.glob("*/*.py"))
    code += sorted(Path("/usr/include").glob("*.h"))
    return code


def _read(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def _generated(rng: random.Random, lang: str, n_chars: int) -> str:
    ranges = SCRIPTS[lang]
    out = []
    size = 0
    while size < n_chars:
        lo, hi = rng.choice(ranges)
        word = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8)))
        out.append(word)
        size += len(word) + 1
        out.append(
            rng.choice(PUNCT[lang]) if rng.random() < 0.2 else (" " if lang in ("ko", "ar", "hi", "ru", "el") else "")
        )
        if rng.random() < 0.03:
            out.append(rng.choice(["\n", "\r\n", "\n\n", " 2024 ", " v3.1 ", " GPU "]))
    return "".join(out)


def _mixed(rng: random.Random, n_chars: int) -> str:
    parts: list[str] = []
    size = 0
    while size < n_chars:
        kind = rng.randrange(8)
        if kind == 0:
            part = "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 5)))
        elif kind == 1:
            word = rng.choice(["café", "naïve", "Ångström", "façade", "résumé", "Zürich", "piñata", "crème brûlée"])
            part = unicodedata.normalize(rng.choice(["NFC", "NFD"]), word)
        elif kind == 2:
            part = rng.choice(
                [
                    " " * rng.randint(2, 40),
                    "\t" * rng.randint(1, 6),
                    "\r\n" * rng.randint(1, 3),
                    "\n \n  \n",
                    "\u00a0\u2003\u3000",
                ]
            )
        elif kind == 3:
            part = rng.choice(SPECIALS)
        elif kind == 4:
            part = rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") * rng.randint(50, 3000)
        elif kind == 5:
            part = "".join(chr(rng.randint(0x0300, 0x036F)) for _ in range(rng.randint(1, 4)))
        elif kind == 6:
            part = rng.choice(["I'm", "you're", "WE'VE", "they'll", "He'D", "it's", "'s"])
        else:
            part = " " + " ".join(
                rng.choice(["the", "model", "trains", "on", "images", "and", "text"]) for _ in range(rng.randint(1, 12))
            )
        parts.append(part)
        size += len(part)
    return "".join(parts)


def build(min_bytes: int = 10_000_000, seed: int = 0) -> list[str]:
    """Documents of at most 64 KB each, at least `min_bytes` of UTF-8 in all."""
    rng = random.Random(seed)
    docs: list[str] = []
    total = 0

    def add(text: str) -> None:
        nonlocal total
        for i in range(0, len(text), 16_000):
            chunk = text[i : i + 16_000]
            if chunk:
                docs.append(chunk)
                total += len(chunk.encode("utf-8"))

    for files, share in ((_prose_files(), 0.3), (_code_files(), 0.6)):
        for path in files:
            if total >= min_bytes * share:
                break
            add(_read(path))
    for lang in SCRIPTS:
        add(_generated(rng, lang, 200_000))
    add(_mixed(rng, 1_000_000))
    while total < min_bytes:
        add(_mixed(rng, 50_000))
    return docs
