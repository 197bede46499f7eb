#!/usr/bin/env bash
# The main job, end to end on a fresh machine (2 CPU cores suffice, ~5 minutes):
#   1. set up .venv (idempotent)         2. build a tiny random Qwen2.5-VL offline
#   3. GTA1-style GRPO with torchrun (2 processes, gloo on CPU) on the committed real screenshots
#      (click reward, beta 0, 8 rollouts per instruction, vision tokens banned, vision tower frozen)
#   4. reload the saved checkpoint, predict click points on the test split, print + save an accuracy table.
# Environment: DEMO_OUT [runs/demo], DEMO_STEPS [20], NPROC_PER_NODE [2], DEMO_ARCH [qwen2_5_vl].
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
T0=$(date +%s)
OUT="${DEMO_OUT:-runs/demo}"
STEPS="${DEMO_STEPS:-20}"
ARCH="${DEMO_ARCH:-qwen2_5_vl}"
export NPROC_PER_NODE="${NPROC_PER_NODE:-2}"
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
DATA="data/web_sample"
banner() { printf '\n==== [demo %ss] %s ====\n' "$(( $(date +%s) - T0 ))" "$*"; }
PEAK_FILES=()
timed() {  # run a stage, recording the peak RSS of its largest process when GNU time exists
  local name="$1"; shift
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f "%M" -o "$OUT/.peak_$name" "$@"; PEAK_FILES+=("$OUT/.peak_$name")
  else
    "$@"
  fi
}

banner "1/4 environment"
bash run_scripts/setup_env.sh
PY="$ROOT/.venv/bin/python"
mkdir -p "$OUT"

banner "2/4 tiny $ARCH checkpoint (random weights, built offline)"
[ -f "$OUT/tiny-$ARCH/config.json" ] || "$PY" -m gui_grounding.cli make-tiny-model --arch "$ARCH" --out "$OUT/tiny-$ARCH"

banner "3/4 GRPO: $STEPS steps, torchrun --nproc_per_node $NPROC_PER_NODE, data $DATA/train.jsonl"
rm -rf "$OUT/checkpoints"
timed train bash run_scripts/train_grpo.sh \
  --model_name_or_path "$OUT/tiny-$ARCH" \
  --task_type gui_grounding --prompt_mode non_thinking --reward_funcs click \
  --data_file_paths "$DATA/train.jsonl" \
  --output_dir "$OUT/checkpoints" \
  --max_steps "$STEPS" --per_device_train_batch_size 8 --gradient_accumulation_steps 1 \
  --num_generations 8 --beta 0 --learning_rate 1e-6 --temperature 1.0 --max_completion_length 16 \
  --max_pixels 200704 \
  --freeze_vision_modules true --logging_steps 1 --save_strategy steps --save_steps 10 \
  --report_to tensorboard --seed 0

banner "4/4 reload the checkpoint and evaluate on $DATA/test.jsonl"
rm -rf "$OUT/eval"
timed eval "$PY" -m gui_grounding.cli eval --benchmark canonical --data "$DATA/test.jsonl" \
  --model "$OUT/checkpoints" --out "$OUT/eval" --batch-size 16 --max-new-tokens 16 --max-pixels 200704

T1=$(date +%s)
PEAK=0
for f in "${PEAK_FILES[@]}"; do v=$(tail -n 1 "$f" 2>/dev/null || echo 0); [ "$v" -gt "$PEAK" ] 2>/dev/null && PEAK=$v; done
cat <<MSG

==== demo finished in $(( T1 - T0 )) s ====
checkpoint:   $OUT/checkpoints   (checkpoint-10, checkpoint-20 and the final model; TensorBoard logs under runs/)
curves:       $OUT/checkpoints/training_curves.png   run facts: $OUT/checkpoints/vlm_r1_run.json
metrics:      $OUT/eval/metrics.json   table: $OUT/eval/results.md   failures: $OUT/eval/failures.html
peak RSS of the largest process: $(( PEAK / 1024 )) MiB
NOTE: the model is a tiny RANDOMLY INITIALISED Qwen2.5-VL, so its accuracy is ~0% and most answers have no valid
point: this run proves the pipeline (data -> GRPO -> checkpoint -> reload -> predict -> score), not learning.
With every rollout scoring 0, each group of 8 has zero reward variance, so GRPO's advantages (and loss) are 0:
the situation GTA1's "batch above 128" advice is about, here in its extreme form.
Use a real checkpoint (e.g. --model_name_or_path ByteDance-Seed/UI-TARS-1.5-7B) on a GPU cluster for accuracy.
Learning on CPU is shown on a synthetic toy instead: gui-grounding toy learning --out runs/toy (~10 min, README).
MSG
