#!/usr/bin/env bash
# Issue 55 item 7: score the same held-out rows with the target (and every checkpoint) on the
# GPU in bf16 and on the CPU in float32, and report the difference (tau within 2%; the
# target's top-1 changes counted, and how many were near-ties). Run from the repository root:
#
#   scripts/gpu_check.sh                  # cuda bf16 against cpu float32
#   scripts/gpu_check.sh --device cpu     # the twin without a GPU: cpu bf16 against float32
#   scripts/gpu_check.sh --prompts 4 --max-new 32   # smaller (3 categories x 4 prompts)
#
# Needs the project's environment with a CUDA build of torch on the GPU machine (PYTHON names
# its interpreter; default .venv/bin/python). Writes .bench/gpu_check.json; exit 1 when a
# drafter's overall tau moved by more than 2%.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
"$PYTHON" -c 'import torch; print(f"torch {torch.__version__}, cuda available: {torch.cuda.is_available()}, devices: {torch.cuda.device_count()}")'
exec env PYTHONPATH="$PWD/src:$PWD/bench${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" scripts/gpu_check.py "$@"
