#!/usr/bin/env bash
# GTA1 recipe for 32b: Qwen2.5-VL-32B-Instruct; GTA1-32B's base (2025-07).
# One command on a GPU node (torchrun over the visible GPUs):     bash run_scripts/gta1_32b.sh
# On SLURM:   RECIPE=gta1_32b.sh sbatch --nodes N run_scripts/slurm/gta1.sbatch
# Print the resolved launch without running:                      bash run_scripts/gta1_32b.sh --dry-run
# Every setting is an environment variable of run_scripts/gta1_recipe.sh (MODEL, DATA_CONFIG, OUTPUT_DIR, MAX_STEPS,
# GLOBAL_PROMPTS, ROLLOUTS_PER_DEVICE, NUM_GENERATIONS, ZERO, MAX_PIXELS, ...), passed only when set: the recipe
# values (DeepSpeed config included) live in recipes/gta1/32b.yaml; extra arguments are passed to
# python -m gui_grounding.train and override both.
set -euo pipefail
export RECIPE_YAML="${RECIPE_YAML:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/recipes/gta1/32b.yaml}"
exec bash "$(dirname "${BASH_SOURCE[0]}")/gta1_recipe.sh" "$@"
