#!/usr/bin/env bash
# The GTA1 GRPO recipe launcher (common part of gta1_7b.sh / gta1_32b.sh / gta1_72b.sh / gta1_tiny_cpu.sh).
#
#   RECIPE_YAML=recipes/gta1/7b.yaml bash run_scripts/gta1_recipe.sh [--dry-run] [extra gui_grounding.train flags]
#
# GTA1's settings live in the recipe YAML (recipes/gta1/{7b,32b,72b,tiny_cpu}.yaml, every value with its source),
# read by `python -m gui_grounding.train --config`. This script only adds what depends on the cluster: the batch math
# (GLOBAL_PROMPTS x NUM_GENERATIONS completions per optimisation step -> per-device batch and gradient accumulation for
# the world size), the DeepSpeed config path, the data, the output directory, torchrun/SLURM. Environment variables
# below override the YAML when set; extra arguments override both. --dry-run prints the resolved values that decide the
# objective (loss_type, sampling, beta, G, lr, max_pixels, prompt mode, ...) and the torchrun command, and exits.
# Resumes automatically from the newest COMPLETE checkpoint in OUTPUT_DIR (preemption-safe; vlm_r1/preemption.py).
#
# Environment (defaults in brackets):
#   RECIPE_YAML           recipe file [recipes/gta1/7b.yaml]
#   MODEL                 checkpoint or hub id [the YAML's model_name_or_path]
#   DATA_CONFIG           data mixture YAML [data_config/gta1_mix.yaml]   (or DATA=a.jsonl:b.jsonl)
#   OUTPUT_DIR            [runs/<recipe name>-gta1]
#   GLOBAL_PROMPTS (prompts per optimisation step) [128]  NUM_GENERATIONS [8]
#   ROLLOUTS_PER_DEVICE   completions per GPU per micro-step (per_device_train_batch_size) [8]
#   NNODES / NPROC_PER_NODE / MASTER_ADDR / MASTER_PORT   see run_scripts/train_grpo.sh (SLURM-aware)
#   ZERO [3]  DEEPSPEED [configs/deepspeed/zero$ZERO.json, "none" for plain DDP]
#   YAML overrides, passed only when set: MAX_STEPS LR BETA TEMPERATURE PROMPT_MODE MAX_COMPLETION_LENGTH MAX_PIXELS
#   MIN_PIXELS SAVE_STEPS SAVE_TOTAL_LIMIT REPORT_TO (e.g. "tensorboard wandb") SEED BF16 ATTN
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then DRY_RUN=1; shift; fi

die() { echo "[gta1_recipe] ERROR: $*" >&2; exit 2; }
RECIPE_YAML="${RECIPE_YAML:-$ROOT/recipes/gta1/7b.yaml}"
[ -f "$RECIPE_YAML" ] || die "recipe file $RECIPE_YAML not found"
OUTPUT_DIR="${OUTPUT_DIR:-$ROOT/runs/$(basename "$RECIPE_YAML" .yaml)-gta1}"
GLOBAL_PROMPTS="${GLOBAL_PROMPTS:-128}"
NUM_GENERATIONS="${NUM_GENERATIONS:-8}"
ROLLOUTS_PER_DEVICE="${ROLLOUTS_PER_DEVICE:-8}"
NNODES="${NNODES:-${SLURM_JOB_NUM_NODES:-1}}"
if [ -z "${NPROC_PER_NODE:-}" ]; then
  NPROC_PER_NODE=$( (command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -c '^GPU') || echo 0)
  [ "$NPROC_PER_NODE" -gt 0 ] 2>/dev/null || NPROC_PER_NODE=1
fi
export NNODES NPROC_PER_NODE
export MAX_RESTARTS="${MAX_RESTARTS:-3}"  # torchrun restarts resume from the newest complete checkpoint

# ---- batch math: GLOBAL_PROMPTS x NUM_GENERATIONS completions per optimisation step, whatever the node count ----
WORLD=$(( NNODES * NPROC_PER_NODE ))
[ "$WORLD" -gt 0 ] || die "world size is $WORLD (NNODES=$NNODES NPROC_PER_NODE=$NPROC_PER_NODE)"
ROLLOUTS_PER_STEP=$(( GLOBAL_PROMPTS * NUM_GENERATIONS ))
MICRO=$(( WORLD * ROLLOUTS_PER_DEVICE ))
if [ $(( ROLLOUTS_PER_STEP % WORLD )) -ne 0 ]; then
  P=$GLOBAL_PROMPTS; while [ $(( P * NUM_GENERATIONS % WORLD )) -ne 0 ]; do P=$(( P + 1 )); done
  die "$GLOBAL_PROMPTS prompts x $NUM_GENERATIONS rollouts = $ROLLOUTS_PER_STEP completions per step cannot be spread \
evenly over $WORLD processes. Use GLOBAL_PROMPTS=$P (the next count that divides), or a node count whose GPU count \
divides $ROLLOUTS_PER_STEP."
fi
PER_PROCESS=$(( ROLLOUTS_PER_STEP / WORLD ))
if [ $(( PER_PROCESS % ROLLOUTS_PER_DEVICE )) -ne 0 ]; then
  die "each of the $WORLD processes handles $PER_PROCESS completions per step, which ROLLOUTS_PER_DEVICE=\
$ROLLOUTS_PER_DEVICE does not divide. Choose a divisor of $PER_PROCESS (it sets per_device_train_batch_size; \
gradient accumulation = $PER_PROCESS / ROLLOUTS_PER_DEVICE)."
fi
GRAD_ACCUM=$(( ROLLOUTS_PER_STEP / MICRO ))
if [ "$GLOBAL_PROMPTS" -lt 128 ]; then
  echo "[gta1_recipe] NOTE: $GLOBAL_PROMPTS prompts per step; GTA1 warns that batches under 128 are unstable." >&2
fi

# ---- DeepSpeed, data, overrides ----------------------------------------------------------------------------------
ZERO="${ZERO:-3}"
DEEPSPEED="${DEEPSPEED:-$ROOT/configs/deepspeed/zero$ZERO.json}"
if [ "$DEEPSPEED" = none ]; then DS_ARGS=(--deepspeed ""); else DS_ARGS=(--deepspeed "$DEEPSPEED"); fi
if [ -n "${DATA:-}" ]; then DATA_ARGS=(--data_file_paths "$DATA"); else
  DATA_ARGS=(--data_config "${DATA_CONFIG:-$ROOT/data_config/gta1_mix.yaml}"); fi
OVERRIDES=()
add() { [ -n "${2:-}" ] && OVERRIDES+=("$1" "$2"); return 0; }
add --model_name_or_path "${MODEL:-}"
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
# shellcheck disable=SC2206
[ -n "${REPORT_TO:-}" ] && OVERRIDES+=(--report_to $REPORT_TO)

ARGS=(
  --config "$RECIPE_YAML" "${DATA_ARGS[@]}" --output_dir "$OUTPUT_DIR"
  --per_device_train_batch_size "$ROLLOUTS_PER_DEVICE" --gradient_accumulation_steps "$GRAD_ACCUM"
  --num_generations "$NUM_GENERATIONS" "${DS_ARGS[@]}" "${OVERRIDES[@]}"
)
cat >&2 <<MSG
[gta1_recipe] recipe=$RECIPE_YAML model=${MODEL:-as in the recipe}
[gta1_recipe] world size $WORLD = $NNODES node(s) x $NPROC_PER_NODE process(es)
[gta1_recipe] per optimisation step: $GLOBAL_PROMPTS prompts x $NUM_GENERATIONS rollouts = $ROLLOUTS_PER_STEP completions
[gta1_recipe]   = $WORLD processes x $ROLLOUTS_PER_DEVICE completions/micro-step x $GRAD_ACCUM gradient accumulation steps
[gta1_recipe] deepspeed=${DEEPSPEED} output=$OUTPUT_DIR
MSG
if [ "$DRY_RUN" = 1 ]; then
  # the resolved objective (YAML + environment + arguments), as the entry point will run it
  "$PYTHON" -m gui_grounding.train "${ARGS[@]}" "$@" --dry_run >/dev/null || die "the arguments do not parse (see above)"
  DRY_RUN=1 ENTRY=gui_grounding.train exec bash "$ROOT/run_scripts/train_grpo.sh" "${ARGS[@]}" "$@"
fi
ENTRY=gui_grounding.train exec bash "$ROOT/run_scripts/train_grpo.sh" "${ARGS[@]}" "$@"
