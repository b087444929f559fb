#!/usr/bin/env bash
# Idempotent set-up: Debian packages (apt-get) and the project's virtual environment (.venv).
# Re-running it when everything is present only checks and returns.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential pkg-config git
  libcurl4-openssl-dev libssl-dev zlib1g-dev libzstd-dev zstd openssl
  libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev libwebp-dev
  libsimdjson-dev libtomlplusplus-dev libyaml-cpp-dev libpcre2-dev libutf8proc-dev libhwy-dev libexpat1-dev
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev ffmpeg
  libsoxr-dev libfftw3-dev espeak-ng
  libgtest-dev libgmock-dev libbenchmark-dev clang-format-14
  nginx libnginx-mod-http-lua
  gnome-backgrounds
)

# `make fuzz` also needs clang with its libFuzzer runtime.
[[ "${MMFEED_FUZZ:-0}" == 1 ]] && APT_PACKAGES+=(clang-14 libclang-rt-14-dev)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""
  [[ "$(id -u)" == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi

stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "setup: installing Python requirements into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt 2>&1 \
    | grep -v '^WARNING: Location' || true
  .venv/bin/python -c "import torch, transformers, PIL, nanobind, moto" \
    || { echo "setup: Python requirements failed to install" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

# Megatron-Energon's prepare step, an oracle of the shard tests, beside .venv (its own pins clash
# with requirements.txt's: tests/requirements-energon.txt says how).
stamp=.oracles/energon/.requirements.sha256
want=$(sha256sum tests/requirements-energon.txt | cut -d' ' -f1)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "setup: installing tests/requirements-energon.txt into .oracles/energon"
  rm -rf .oracles/energon
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --target .oracles/energon \
    -r tests/requirements-energon.txt 2>&1 | grep -v '^WARNING: Location' || true
  PYTHONPATH=.oracles/energon .venv/bin/python -c "import megatron.energon.cli.main" \
    || { echo "setup: the energon oracle failed to install" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

# MMFEED_TORCHVISION=1 (make test, make bench-torchvision): the torchvision environment .venv-tv,
# where the oracles that need PyPI's torchvision run (transformers' video processors, its
# torchvision image backend): about 5.5 GB, its own torch build, kept apart from .venv.
if [[ "${MMFEED_TORCHVISION:-0}" == 1 ]]; then
  [[ -x .venv-tv/bin/python ]] || { echo "setup: creating .venv-tv"; "$python" -m venv .venv-tv; }
  stamp=.venv-tv/.requirements.sha256
  want=$(sha256sum bench/requirements-torchvision.txt | cut -d' ' -f1)
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    echo "setup: installing bench/requirements-torchvision.txt into .venv-tv"
    .venv-tv/bin/python -m pip install -q --disable-pip-version-check -r bench/requirements-torchvision.txt 2>&1 \
      | grep -v '^WARNING: Location' || true
    .venv-tv/bin/python -c "import torchvision, transformers, qwen_vl_utils" \
      || { echo "setup: the torchvision environment failed to install" >&2; exit 1; }
    echo "$want" > "$stamp"
  fi
fi
