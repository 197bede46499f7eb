#!/usr/bin/env bash
# The GTA1 GRPO recipe launcher (common part of gta1_7b.sh / gta1_32b.sh / gta1_72b.sh / gta1_tiny_cpu.sh).
#
#   RECIPE_YAML=recipes/gta1/7b.yaml bash run_scripts/gta1_recipe.sh [--dry-run] [extra gui_grounding.train flags]
#
# The recipe YAML (recipes/gta1/{7b,32b,72b,tiny_cpu}.yaml, every value with its source) is the single source of the
# recipe's values, read by `python -m gui_grounding.train --config`. This script passes a flag only when the user set
# its environment variable below (NUM_GENERATIONS=16 -> --num_generations 16; unset: no flag, the YAML's value wins);
# extra arguments override both. What depends on the cluster is computed in Python from the recipe as training
# resolves it (python -m gui_grounding.plan: GLOBAL_PROMPTS x num_generations completions per optimisation step =
# nodes x GPUs per node x per-device batch x gradient accumulation), then torchrun/SLURM (run_scripts/train_grpo.sh).
# --dry-run prints that batch maths, the resolved values that decide the objective (loss_type, sampling, beta, G, lr,
# max_pixels, prompt mode, ...), the predicted peak GPU memory per rank (gui_grounding/ops/estimate.py; GPU_MEMORY_GIB)
# and the torchrun command, and exits.
# Resumes automatically from the newest COMPLETE checkpoint in OUTPUT_DIR (preemption-safe; vlm_r1/preemption.py).
#
# Environment (defaults in brackets):
#   RECIPE_YAML           recipe file [recipes/gta1/7b.yaml]
#   DATA_CONFIG           data mixture YAML [data_config/gta1_mix.yaml]   (or DATA=a.jsonl:b.jsonl)
#   OUTPUT_DIR            [runs/<recipe name>-gta1]
#   GLOBAL_PROMPTS        prompts (groups) per optimisation step [128]
#   ROLLOUTS_PER_DEVICE   completions per GPU per micro-step (per_device_train_batch_size) [8]
#   NNODES / NPROC_PER_NODE / MASTER_ADDR / MASTER_PORT   see run_scripts/train_grpo.sh (SLURM-aware)
#   GPU_MEMORY_GIB        --dry-run: GPU memory the memory estimate is compared with [80, an H100]
# Passed only when set (else the recipe YAML's value):
#   MODEL (--model_name_or_path) NUM_GENERATIONS MAX_STEPS LR BETA TEMPERATURE PROMPT_MODE MAX_COMPLETION_LENGTH
#   MAX_PIXELS MIN_PIXELS SAVE_STEPS SAVE_TOTAL_LIMIT REPORT_TO (e.g. "tensorboard wandb") SEED BF16 ATTN
#   ZERO (2, 3, 3_offload -> configs/deepspeed/zero$ZERO.json)  DEEPSPEED (a config path, "none" for plain DDP; wins
#   over ZERO)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then DRY_RUN=1; shift; fi

die() { echo "[gta1_recipe] ERROR: $*" >&2; exit 2; }
RECIPE_YAML="${RECIPE_YAML:-$ROOT/recipes/gta1/7b.yaml}"
[ -f "$RECIPE_YAML" ] || die "recipe file $RECIPE_YAML not found"
OUTPUT_DIR="${OUTPUT_DIR:-$ROOT/runs/$(basename "$RECIPE_YAML" .yaml)-gta1}"
NNODES="${NNODES:-${SLURM_JOB_NUM_NODES:-1}}"
if [ -z "${NPROC_PER_NODE:-}" ]; then
  NPROC_PER_NODE=$( (command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -c '^GPU') || echo 0)
  [ "$NPROC_PER_NODE" -gt 0 ] 2>/dev/null || NPROC_PER_NODE=1
fi
export NNODES NPROC_PER_NODE
export MAX_RESTARTS="${MAX_RESTARTS:-3}"  # torchrun restarts resume from the newest complete checkpoint

# ---- DeepSpeed, data, overrides: a flag only where the user set its variable -------------------------------------
DS_ARGS=()
if [ -n "${DEEPSPEED:-}" ]; then
  if [ "$DEEPSPEED" = none ]; then DS_ARGS=(--deepspeed ""); else DS_ARGS=(--deepspeed "$DEEPSPEED"); fi
elif [ -n "${ZERO:-}" ]; then
  DS_ARGS=(--deepspeed "$ROOT/configs/deepspeed/zero$ZERO.json")
  [ -f "${DS_ARGS[1]}" ] || die "ZERO=$ZERO: ${DS_ARGS[1]} not found"
fi
if [ -n "${DATA:-}" ]; then DATA_ARGS=(--data_file_paths "$DATA"); else
  DATA_ARGS=(--data_config "${DATA_CONFIG:-$ROOT/data_config/gta1_mix.yaml}"); fi
OVERRIDES=()
add() { [ -n "${2:-}" ] && OVERRIDES+=("$1" "$2"); return 0; }
add --model_name_or_path "${MODEL:-}"
add --num_generations "${NUM_GENERATIONS:-}"
add --max_steps "${MAX_STEPS:-}"
add --learning_rate "${LR:-}"
add --beta "${BETA:-}"
add --temperature "${TEMPERATURE:-}"
add --prompt_mode "${PROMPT_MODE:-}"
add --max_completion_length "${MAX_COMPLETION_LENGTH:-}"
add --max_pixels "${MAX_PIXELS:-}"
add --min_pixels "${MIN_PIXELS:-}"
add --save_steps "${SAVE_STEPS:-}"
add --save_total_limit "${SAVE_TOTAL_LIMIT:-}"
add --seed "${SEED:-}"
add --data_seed "${SEED:-}"
add --bf16 "${BF16:-}"
add --attn_implementation "${ATTN:-}"
# REPORT_TO="tensorboard wandb" (or "tensorboard,wandb"): one argv word per integration (--report_to takes a list)
if [ -n "${REPORT_TO:-}" ]; then
  IFS=$', \t\n' read -r -a REPORT_WORDS <<< "$REPORT_TO"
  if [ "${#REPORT_WORDS[@]}" -gt 0 ]; then OVERRIDES+=(--report_to "${REPORT_WORDS[@]}"); fi
fi
RECIPE_ARGS=(--config "$RECIPE_YAML" "${DATA_ARGS[@]}" --output_dir "$OUTPUT_DIR" "${DS_ARGS[@]}" "${OVERRIDES[@]}" "$@")

# ---- batch maths in Python, from the recipe as training resolves it (gui_grounding/ops/plan.py) ----------------------
# --launcher-env: every numeric variable above (NNODES, MAX_RESTARTS, MASTER_PORT, NUM_GENERATIONS, GPU_MEMORY_GIB, ...)
# is checked there, in one place (gui_grounding/ops/plan.py LAUNCHER_VARIABLES): a bad one is one line naming it
PLAN=(--launcher-env --nnodes "$NNODES" --nproc-per-node "$NPROC_PER_NODE")
[ -n "${GLOBAL_PROMPTS:-}" ] && PLAN+=(--global-prompts "$GLOBAL_PROMPTS")
[ -n "${ROLLOUTS_PER_DEVICE:-}" ] && PLAN+=(--rollouts-per-device "$ROLLOUTS_PER_DEVICE")
[ -n "${GPU_MEMORY_GIB:-}" ] && PLAN+=(--gpu-memory-gib "$GPU_MEMORY_GIB")
[ "$DRY_RUN" = 1 ] && PLAN+=(--dry-run)
LAUNCHER_ARGS="$("$PYTHON" -m gui_grounding.plan "${PLAN[@]}" -- "${RECIPE_ARGS[@]}")" || exit 2
mapfile -t BATCH_ARGS <<< "$LAUNCHER_ARGS"  # --per_device_train_batch_size B --gradient_accumulation_steps A [...]
ARGS=("${BATCH_ARGS[@]}" "${RECIPE_ARGS[@]}")
echo "[gta1_recipe] recipe=$RECIPE_YAML output=$OUTPUT_DIR" >&2
if [ "$DRY_RUN" = 1 ]; then
  DRY_RUN=1 ENTRY=gui_grounding.train exec bash "$ROOT/run_scripts/train_grpo.sh" "${ARGS[@]}"
fi
ENTRY=gui_grounding.train exec bash "$ROOT/run_scripts/train_grpo.sh" "${ARGS[@]}"
