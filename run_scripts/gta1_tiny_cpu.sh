#!/usr/bin/env bash
# The GTA1 recipe shrunk for CPU (tests, local SLURM): recipes/gta1/tiny_cpu.yaml (same objective as the real
# recipes), tiny random Qwen2.5-VL, committed sample, 2 processes (gloo), 2 prompts x 8 rollouts per step, plain DDP,
# checkpoint every 2 steps. Same script path as the cluster recipes.
#   OUTPUT_DIR=runs/tiny MAX_STEPS=6 bash run_scripts/gta1_tiny_cpu.sh [--dry-run]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TINY="${TINY_MODEL_DIR:-$ROOT/runs/tiny-qwen2_5_vl}"
if [ ! -f "$TINY/config.json" ] && [ "${1:-}" != "--dry-run" ]; then
  "${PYTHON:-$ROOT/.venv/bin/python}" -m gui_grounding.cli make-tiny-model --arch qwen2_5_vl --out "$TINY" >&2
fi
export RECIPE_YAML="${RECIPE_YAML:-$ROOT/recipes/gta1/tiny_cpu.yaml}"
export MODEL="$TINY" DATA_CONFIG="${DATA_CONFIG:-$ROOT/data_config/demo.yaml}"
export OUTPUT_DIR="${OUTPUT_DIR:-$ROOT/runs/gta1-tiny-cpu}"
export NPROC_PER_NODE="${NPROC_PER_NODE:-2}" GLOBAL_PROMPTS="${GLOBAL_PROMPTS:-2}" ROLLOUTS_PER_DEVICE="${ROLLOUTS_PER_DEVICE:-8}"
export DEEPSPEED="${DEEPSPEED:-none}"
exec bash "$ROOT/run_scripts/gta1_recipe.sh" "$@"
