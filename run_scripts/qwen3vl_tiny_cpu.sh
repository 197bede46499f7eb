#!/usr/bin/env bash
# The Qwen3-VL-8B recipe shrunk for CPU (tests, local SLURM): recipes/qwen3vl/tiny_cpu.yaml (same objective as
# recipes/qwen3vl/8b.yaml), a tiny random Qwen3-VL built offline (gui-grounding make-tiny-model --arch qwen3_vl), the
# committed sample, 2 processes (gloo), 2 prompts x 8 rollouts per step, plain DDP, a checkpoint every 2 steps. Same
# launcher as the cluster recipe (run_scripts/gta1_recipe.sh).
#   OUTPUT_DIR=runs/q3-tiny MAX_STEPS=4 bash run_scripts/qwen3vl_tiny_cpu.sh [--dry-run]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TINY="${TINY_MODEL_DIR:-$ROOT/runs/tiny-qwen3_vl}"
if [ ! -f "$TINY/config.json" ] && [ "${1:-}" != "--dry-run" ]; then
  "${PYTHON:-$ROOT/.venv/bin/python}" -m gui_grounding.cli make-tiny-model --arch qwen3_vl --out "$TINY" >&2
fi
export RECIPE_YAML="${RECIPE_YAML:-$ROOT/recipes/qwen3vl/tiny_cpu.yaml}"
export MODEL="$TINY" DATA_CONFIG="${DATA_CONFIG:-$ROOT/data_config/demo.yaml}"
export OUTPUT_DIR="${OUTPUT_DIR:-$ROOT/runs/qwen3vl-tiny-cpu}"
export NPROC_PER_NODE="${NPROC_PER_NODE:-2}" GLOBAL_PROMPTS="${GLOBAL_PROMPTS:-2}" ROLLOUTS_PER_DEVICE="${ROLLOUTS_PER_DEVICE:-8}"
export DEEPSPEED="${DEEPSPEED:-none}"
exec bash "$ROOT/run_scripts/gta1_recipe.sh" "$@"
