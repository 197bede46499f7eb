#!/usr/bin/env bash
# The GTA1 GRPO recipe (common part of gta1_7b.sh / gta1_32b.sh / gta1_72b.sh / gta1_tiny_cpu.sh).
#
#   MODEL=ByteDance-Seed/UI-TARS-1.5-7B bash run_scripts/gta1_recipe.sh [--dry-run] [extra vlm_r1.grpo_jsonl flags]
#
# Recipe defaults (seed_summary.md, gta1_and_peers.md 1.1-1.2): 250 optimisation steps, 128 prompts x 8 rollouts per
# step, lr 1e-6, beta 0 (no KL, no reference model), temperature 1.0, non-thinking prompt, click reward, vision tokens
# banned, vision tower frozen, bf16 + gradient checkpointing on GPUs, flash-attention 2 when installed (sdpa
# otherwise), max_pixels 4096*2160 as GTA1, checkpoint every 10 steps, TensorBoard. Resumes automatically from the
# newest COMPLETE checkpoint in OUTPUT_DIR (preemption-safe; see vlm_r1/preemption.py).
#
# Environment (defaults in brackets); anything else: append grpo_jsonl flags, they override the recipe's:
#   MODEL                 checkpoint or hub id (required)
#   DATA_CONFIG           data mixture YAML [data_config/gta1_mix.yaml]   (or DATA=a.jsonl:b.jsonl)
#   OUTPUT_DIR            [runs/<model name>-gta1]
#   MAX_STEPS [250]  GLOBAL_PROMPTS (prompts per optimisation step) [128]  NUM_GENERATIONS [8]
#   ROLLOUTS_PER_DEVICE   completions per GPU per micro-step (per_device_train_batch_size) [8]
#   NNODES / NPROC_PER_NODE / MASTER_ADDR / MASTER_PORT   see run_scripts/train_grpo.sh (SLURM-aware)
#   LR [1e-6]  BETA [0]  TEMPERATURE [1.0]  PROMPT_MODE [non_thinking]  MAX_COMPLETION_LENGTH [128]
#   MAX_PIXELS [8847360]  MIN_PIXELS [3136]
#   ZERO [3]  DEEPSPEED [configs/deepspeed/zero$ZERO.json, "none" for plain DDP]
#   SAVE_STEPS [10]  SAVE_TOTAL_LIMIT [3]  REPORT_TO [tensorboard] (e.g. "tensorboard wandb")  SEED [42]
#   BF16 [true on GPUs, false on CPU]  ATTN [flash_attention_2 if flash_attn imports, else sdpa]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then DRY_RUN=1; shift; fi

die() { echo "[gta1_recipe] ERROR: $*" >&2; exit 2; }
MODEL="${MODEL:?set MODEL to a checkpoint path or hub id}"
OUTPUT_DIR="${OUTPUT_DIR:-$ROOT/runs/$(basename "$MODEL")-gta1}"
MAX_STEPS="${MAX_STEPS:-250}"
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

# ---- precision, attention, DeepSpeed ----------------------------------------------------------------------------
HAS_GPU=$("$PYTHON" -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)
BF16="${BF16:-$([ "$HAS_GPU" = 1 ] && echo true || echo false)}"
if [ -z "${ATTN:-}" ]; then
  if "$PYTHON" -c "import flash_attn" 2>/dev/null; then ATTN=flash_attention_2; else
    ATTN=sdpa; echo "[gta1_recipe] NOTE: flash-attn not installed: attention = sdpa (pip install -e .[gpu])" >&2; fi
fi
ZERO="${ZERO:-3}"
DEEPSPEED="${DEEPSPEED:-$ROOT/configs/deepspeed/zero$ZERO.json}"
DS_ARGS=()
[ "$DEEPSPEED" = none ] || DS_ARGS=(--deepspeed "$DEEPSPEED")
if [ -n "${DATA:-}" ]; then DATA_ARGS=(--data_file_paths "$DATA"); else
  DATA_ARGS=(--data_config "${DATA_CONFIG:-$ROOT/data_config/gta1_mix.yaml}"); fi

ARGS=(
  --model_name_or_path "$MODEL" --task_type gui_grounding --prompt_mode "${PROMPT_MODE:-non_thinking}"
  --reward_funcs click "${DATA_ARGS[@]}" --output_dir "$OUTPUT_DIR"
  --max_steps "$MAX_STEPS" --per_device_train_batch_size "$ROLLOUTS_PER_DEVICE"
  --gradient_accumulation_steps "$GRAD_ACCUM" --num_generations "$NUM_GENERATIONS"
  --learning_rate "${LR:-1e-6}" --beta "${BETA:-0}" --temperature "${TEMPERATURE:-1.0}"
  --max_completion_length "${MAX_COMPLETION_LENGTH:-128}" --max_pixels "${MAX_PIXELS:-8847360}"
  --min_pixels "${MIN_PIXELS:-3136}" --freeze_vision_modules true --ban_vision_tokens true
  --bf16 "$BF16" --gradient_checkpointing "$([ "$HAS_GPU" = 1 ] && echo true || echo false)"
  --attn_implementation "$ATTN" "${DS_ARGS[@]}"
  --save_strategy steps --save_steps "${SAVE_STEPS:-10}" --save_total_limit "${SAVE_TOTAL_LIMIT:-3}"
  --logging_steps 1 --report_to ${REPORT_TO:-tensorboard} --seed "${SEED:-42}" --data_seed "${SEED:-42}"
  --resume_from_checkpoint latest
)
cat >&2 <<MSG
[gta1_recipe] model=$MODEL
[gta1_recipe] world size $WORLD = $NNODES node(s) x $NPROC_PER_NODE process(es)
[gta1_recipe] per optimisation step: $GLOBAL_PROMPTS prompts x $NUM_GENERATIONS rollouts = $ROLLOUTS_PER_STEP completions
[gta1_recipe]   = $WORLD processes x $ROLLOUTS_PER_DEVICE completions/micro-step x $GRAD_ACCUM gradient accumulation steps
[gta1_recipe] steps $MAX_STEPS -> $(( MAX_STEPS * GLOBAL_PROMPTS )) prompts, $(( MAX_STEPS * ROLLOUTS_PER_STEP )) completions
[gta1_recipe] deepspeed=${DEEPSPEED} bf16=$BF16 attention=$ATTN output=$OUTPUT_DIR
MSG
if [ "$DRY_RUN" = 1 ]; then
  DRY_RUN=1 exec bash "$ROOT/run_scripts/train_grpo.sh" "${ARGS[@]}" "$@"
fi
exec bash "$ROOT/run_scripts/train_grpo.sh" "${ARGS[@]}" "$@"
