"""Writes docs/options.md, the Loader's options with their types, defaults and meanings, from the
one option table (include/mmfeed/loader_options.h, as the built module lists it). `make docs`
runs it; tests/python/tools/test_docs.py fails when the page and the table differ.

Usage: python scripts/options_doc.py [--check]   (--check: exit 1 when docs/options.md is stale)
"""

from __future__ import annotations

import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "options.md"

HEADER = """# Loader options

Every option of `mmfeed.Loader(...)`, `mmfeed.torch.Dataset(...)`, `mmfeed.ray.Loader(...)`, the
config files of `mmfeed run --config` (JSON or TOML) and `mmfeed::set_loader_option` (C++), in the
order of the option table (`include/mmfeed/loader_options.h`), which this page is generated from
(`make docs`). Python adds `tensors` ("torch" or "np"), `device` (a CUDA device for the engine's
copy stage), `inputs` (an `mmfeed.LoaderInputs` read once) and `sources` (a list of
`{"manifest", "weight", "media_root", "max_pixels", "chat_template"}`, instead of the per-source
lists below); see [loading.md](loading.md).

| option | type | default | meaning |
|---|---|---|---|
"""


def default_text(kind: str, value: str) -> str:
    if kind == "bool":
        return f"`{value.capitalize()}`"
    if kind.startswith("list["):
        return "`[]`" if value == "" else f"`[{value}]`"
    if kind == "str":
        return '`""`' if value == "" else f'`"{value}"`'
    if "|" in kind:
        return f'`"{value}"`'
    return f"`{value}`"


def render() -> str:
    from mmfeed import _mmfeed

    rows = []
    for o in _mmfeed.loader_options():
        kind = " \\| ".join(f'"{c}"' for c in o["type"].split("|")) if "|" in o["type"] else o["type"]
        doc = o["doc"].replace("|", "\\|")
        rows.append(f"| `{o['name']}` | {kind} | {default_text(o['type'], o['default'])} | {doc} |")
    return HEADER + "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
