#!/usr/bin/env bash
# GTA1 recipe for 7b with the learned zoom tool (recipes/gta1/7b_zoom.yaml; docs/TRAINING.md "Learned zoom-in").
# One command on a GPU node (torchrun over the visible GPUs):     bash run_scripts/gta1_7b_zoom.sh
# On SLURM:   RECIPE=gta1_7b_zoom.sh sbatch --nodes N run_scripts/slurm/gta1.sbatch
# Print the resolved launch without running:                      bash run_scripts/gta1_7b_zoom.sh --dry-run
# Every setting is an environment variable of run_scripts/gta1_recipe.sh (MODEL, DATA_CONFIG, OUTPUT_DIR, MAX_STEPS,
# GLOBAL_PROMPTS, ROLLOUTS_PER_DEVICE, NUM_GENERATIONS, ZERO, MAX_PIXELS, ...), passed only when set: the recipe
# values (DeepSpeed config included) live in recipes/gta1/7b_zoom.yaml; extra arguments are passed to
# python -m gui_grounding.train and override both.
set -euo pipefail
export RECIPE_YAML="${RECIPE_YAML:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/recipes/gta1/7b_zoom.yaml}"
exec bash "$(dirname "${BASH_SOURCE[0]}")/gta1_recipe.sh" "$@"
