#!/usr/bin/env bash
# `pip install .` as a user runs it, away from the project's .venv: a fresh virtual environment,
# pip's isolated build (scikit-build-core, nanobind and pyarrow in a temporary build environment),
# then the installed CLI and package at work. Fails when an installed binary cannot load, or when
# its run path names anything but a directory relative to itself (the build's temporary pyarrow
# is deleted once pip is done). Needs the Debian packages of scripts/setup.sh, and PyPI.
# Four to seven minutes on two cores, nearly all of it the build.
#   scripts/check_pip_install.sh            (PYTHON=python3.11 by default)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
work=$(mktemp -d "${TMPDIR:-/tmp}/mmfeed-pip-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "check_pip_install: $*" >&2
  exit 1
}

echo "check_pip_install: a fresh venv ($("$python" --version)) in $work"
"$python" -m venv "$work/venv"
venv=$work/venv
# pip's build environment and scikit-build-core's build tree go under TMPDIR: here, inside $work.
mkdir -p "$work/tmp"
start=$(date +%s)
# With the [hf] extra (torch, transformers, accelerate), at the versions the project tests:
# requirements.txt's pins as constraints (a constraint names no extras); PIP_FIND_LINKS, where
# set, offers local wheels.
sed -E 's/\[[^]]*\]//' "$repo/requirements.txt" | grep -E '^[A-Za-z0-9_.-]+==' >"$work/constraints.txt"
TMPDIR=$work/tmp "$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$work/constraints.txt" \
  "$repo[hf]" 2> >(grep -v '^WARNING: Location' >&2) || fail "pip install '$repo[hf]' failed (its output is above)"
echo "check_pip_install: pip install took $(($(date +%s) - start)) s"

site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
cli=$venv/bin/mmfeed
module=$(ls "$site"/mmfeed/_mmfeed.*.so 2>/dev/null) || fail "no native module in $site/mmfeed"
[[ -x $cli ]] || fail "no CLI at $cli"

for binary in "$cli" "$module"; do
  runpath=$(readelf -d "$binary" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p')
  echo "check_pip_install: ${binary#"$venv"/} run path: ${runpath:-(none)}"
  IFS=: read -ra entries <<<"$runpath"
  for entry in "${entries[@]}"; do
    [[ $entry == '$ORIGIN'* ]] || fail "${binary#"$venv"/}: run path entry '$entry' is not relative to \$ORIGIN"
  done
  if ldd "$binary" | grep -q 'not found'; then
    ldd "$binary" | grep 'not found' >&2
    fail "${binary#"$venv"/}: libraries not found (above)"
  fi
done

# From $work, so that nothing of the checkout is on Python's path.
cd "$work"
"$cli" version >/dev/null || fail "'mmfeed version' failed"
"$cli" version | head -1
"$venv/bin/python" -c 'import mmfeed; print("check_pip_install: import mmfeed", mmfeed.__version__)' \
  || fail "import mmfeed failed"
"$venv/bin/python" -c 'import mmfeed.hf; print("check_pip_install: import mmfeed.hf (the [hf] extra)")' \
  || fail "import mmfeed.hf failed with the [hf] extra installed"

# The README's quick start at its smallest: two samples from a Parquet file (the Arrow libraries
# at work), as torch tensors.
"$venv/bin/python" - "$repo/tests/data/qwen3-tokenizer/tokenizer.json" <<'EOF' || fail "the Loader smoke test failed"
import io
import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

import mmfeed

png = io.BytesIO()
Image.new("RGB", (64, 48), (200, 80, 40)).save(png, format="PNG")
conversation = [{"from": "human", "value": "<image>\nWhat colour is this?"}, {"from": "gpt", "value": "Orange."}]
row = {"image": {"bytes": png.getvalue(), "path": "a.png"}, "conversations": json.dumps(conversation)}
image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
schema = pa.schema([("id", pa.string()), ("image", image), ("conversations", pa.string())])
table = pa.Table.from_pylist([{"id": f"s{i}", **row} for i in range(2)], schema=schema)
pq.write_table(table, "smoke.parquet", write_page_index=True)
loader = mmfeed.Loader(
    "smoke.parquet", tokenizer=sys.argv[1], model="qwen3-vl", batch_size=2, max_pixels=65536
)
batches = list(loader)
assert len(batches) == 1 and not loader.errors(), (len(batches), loader.errors())
assert batches[0]["input_ids"].shape[0] == 2 and tuple(batches[0]["image_grid_thw"].shape) == (2, 3)
assert type(batches[0]["input_ids"]).__module__ == "torch"
shapes = {k: tuple(v.shape) for k, v in batches[0].items() if hasattr(v, "shape")}
print("check_pip_install: Loader smoke test:", shapes)
EOF
echo "check_pip_install: ok"
