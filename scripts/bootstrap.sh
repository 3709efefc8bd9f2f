#!/usr/bin/env bash
# Create .venv and install regen with what the demo and the test suite need.
# Idempotent: reinstalls only when pyproject.toml or the llama.cpp build flags changed.
# Usage: scripts/bootstrap.sh [--test]
#
# The embedded model runs on llama-cpp-python, which compiles llama.cpp. A default build uses
# the build machine's own CPU flags (GGML_NATIVE), and a binary built that way dies with SIGILL
# on machines, cloud VMs among them, that advertise instructions they do not really run (AMX,
# AVX-512). So we build a portable wheel ourselves, with an explicit baseline (x86-64-v3:
# AVX2/FMA/F16C; arm64: the plain armv8 baseline), keep it in a cache folder named after its
# flags, and install that wheel, never one that pip cached from some earlier native build.
# Set REGEN_LLAMA_CMAKE_ARGS to choose other flags (e.g. a CUDA build).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
llama_version=0.3.36

case "$(uname -m)" in
  x86_64 | amd64)
    default_flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" ;;
  *)
    default_flags="-DGGML_NATIVE=OFF" ;;
esac
cmake_args=${REGEN_LLAMA_CMAKE_ARGS:-$default_flags}
build_key="llama-cpp-python-$llama_version-$(uname -m)-$(printf '%s' "$cmake_args" | sha256sum | cut -c1-12)"
wheel_dir="${XDG_CACHE_HOME:-$HOME/.cache}/regen/wheels/$build_key"
stamp=.venv/.regen-installed
# What is installed follows pyproject.toml and this script: a change to either reinstalls.
wanted_stamp="$build_key $(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)"

if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi

build_portable_llama() {
  if ! ls "$wheel_dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "bootstrap: building llama-cpp-python $llama_version for any $(uname -m) machine (~5 min)"
    echo "bootstrap:   CMAKE_ARGS=$cmake_args"
    mkdir -p "$wheel_dir.partial"
    # --no-cache-dir and --no-binary: build from source with these flags, whatever pip cached.
    CMAKE_ARGS="$cmake_args" FORCE_CMAKE=1 .venv/bin/pip wheel --quiet --no-cache-dir \
      --no-deps --no-binary llama-cpp-python -w "$wheel_dir.partial" "llama-cpp-python==$llama_version"
    rm -rf "$wheel_dir"
    mv "$wheel_dir.partial" "$wheel_dir"
  fi
  echo "bootstrap: installing the portable llama-cpp-python wheel from $wheel_dir"
  .venv/bin/pip install --quiet --no-deps --force-reinstall --no-index --find-links "$wheel_dir" \
    "llama-cpp-python==$llama_version"
}

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted_stamp" ]; then
  # torch is only needed to read a tokenizer out of a GGUF file (transformers' GGUF loader).
  # The CPU build is pinned first so nothing pulls a multi-GB CUDA build instead.
  echo "bootstrap: installing torch (CPU build)"
  .venv/bin/pip install --quiet 'torch==2.13.0'
  build_portable_llama
  echo "bootstrap: installing regen and its extras"
  .venv/bin/pip install --quiet -e '.[embedded,gguf,dev]'
  # [issue 11, export tests] the trainers' own data loaders, without their GPU stacks (sglang, vllm):
  .venv/bin/pip install --quiet --no-deps 'specforge==0.2.0' 'speculators==0.9.0' 'hs-connectors==0.9.0' 'llamafactory==0.9.5' 'axolotl==0.19.0'
  printf '%s' "$wanted_stamp" > "$stamp"
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
