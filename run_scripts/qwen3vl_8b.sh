#!/usr/bin/env bash
# Qwen3-VL-8B GRPO recipe: Qwen/Qwen3-VL-8B-Instruct, answers on Qwen3-VL's 0-1000 grid (adapter qwen3-vl), images
# under the eval profile qwen3-vl-8b's pixel budget; every value and its source in recipes/qwen3vl/8b.yaml.
# One command on a GPU node (torchrun over the visible GPUs):     bash run_scripts/qwen3vl_8b.sh
# On SLURM (8xH100 per node):  RECIPE=qwen3vl_8b.sh sbatch --nodes 1 --gpus-per-node=8 run_scripts/slurm/gta1.sbatch
# Print the resolved launch without running:                      bash run_scripts/qwen3vl_8b.sh --dry-run
# The launcher is the GTA1 recipes' (run_scripts/gta1_recipe.sh: batch maths in Python, memory estimate, torchrun,
# preemption-safe resume); every setting is one of its environment variables (MODEL, DATA_CONFIG, OUTPUT_DIR,
# MAX_STEPS, GLOBAL_PROMPTS, ROLLOUTS_PER_DEVICE, NUM_GENERATIONS, ZERO, MAX_PIXELS, ...), passed only when set: the
# recipe values (DeepSpeed config included) live in the YAML; extra arguments are passed to python -m
# gui_grounding.train and override both. CPU twin: run_scripts/qwen3vl_tiny_cpu.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export RECIPE_YAML="${RECIPE_YAML:-$ROOT/recipes/qwen3vl/8b.yaml}"
export OUTPUT_DIR="${OUTPUT_DIR:-$ROOT/runs/qwen3vl-8b}"
exec bash "$ROOT/run_scripts/gta1_recipe.sh" "$@"
