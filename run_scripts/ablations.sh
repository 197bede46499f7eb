#!/usr/bin/env bash
# The seed's ablations on the synthetic toy set, one switch per run, from one shared SFT warm start:
# reward function (click / distance / gaussian_point / click_distance_bonus), KL (beta 0.04), rollouts per prompt (4 vs
# 8), prompts per step (2 vs 16), dynamic sampling, loss preset vlm_r1, a random-reward control, and the thinking
# prompt (its own thinking-format SFT, click + click_format rewards).
# Writes OUT/ablations/results.{json,md} (final test click accuracy, reward first -> last, mean completion length,
# wall time) and OUT/ablations/curves.png. About 4 CPU minutes per setting on 2 cores.
#
#   bash run_scripts/ablations.sh                      # all settings into runs/toy
#   OUT=runs/toy2 bash run_scripts/ablations.sh --only "distance (MSE-like)" --no-thinking
#   bash run_scripts/ablations.sh --grpo-steps 300     # any `gui-grounding toy --help` flag
set -euo pipefail
cd "$(dirname "$0")/.."
bash run_scripts/setup_env.sh
OUT="${OUT:-runs/toy}"
.venv/bin/gui-grounding toy ablations --out "$OUT" "$@"
echo "table: $OUT/ablations/results.md   curves: $OUT/ablations/curves.png"
