#!/usr/bin/env bash
# One prepared GPU check (benchmarks/gpu_check.py): the Qwen2.5-VL-7B-shaped GRPO step naive vs shared prompt at G=8
# 1080p (3 timed steps each: time, MFU, peak memory; the prefill; a torch.profiler breakdown of one more warm step
# with the optimizer), the same G=8 steps on the previous commit's tree (before/after, same card), then G=16 and 4K
# once each if time is left. Under 5 minutes on one H100/H200; writes gpu_check.json and gpu_check.md to OUT_DIR.
#
#   bash run_scripts/gpu_check.sh [OUT_DIR] [extra gpu_check.py flags...]   # default OUT_DIR: $OUT or runs/gpu_check
#   SHAPE=tiny bash run_scripts/gpu_check.sh /tmp/gc                        # the CPU path, seconds
#
# The previous commit (BASELINE): a directory holding its vlm_r1/ and groundwork/ (and a COMMIT file naming it), or a
# git revision this checkout can read (then extracted with `git archive` into /tmp/gpu_check_baseline). Default:
# ./.gpu_check_baseline when it exists. A copy without .git (a device machine's) takes the directory, prepared where
# git is: `bash run_scripts/gpu_check_baseline.sh REV` writes ./.gpu_check_baseline (ignored by git; carry it along).
# BASELINE=none skips the comparison.
#
# Wheels brought along (a machine without network): every .whl in $WHEELS (default ./.whl) is installed with --no-deps
# into /tmp/gpu_check_site and put first on PYTHONPATH (our pins: transformers 5.23.0, trl 1.16.0, datasets 5.2.0 and
# datasets' dill/multiprocess; download them with `pip download --no-deps --only-binary=:all: --python-version 3.12
# ...`, docs/TRAINING.md "GPU check"). If transformers from the wheels does not import there, the machine's own
# transformers is used instead (the JSON records which versions ran). torch is always the machine's.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${1:-${OUT:-$ROOT/runs/gpu_check}}"
[ $# -gt 0 ] && shift
WHEELS="${WHEELS:-$ROOT/.whl}"
PY="${PYTHON:-python3}"
SITE=/tmp/gpu_check_site
log() { printf '[gpu_check.sh] %s\n' "$*" >&2; }

mkdir -p "$OUT_DIR"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  log "installing $(ls "$WHEELS"/*.whl | wc -l) wheels from $WHEELS into $SITE"
  rm -rf "$SITE"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl ||
    { log "wheel install failed"; exit 1; }
  if PYTHONPATH="$SITE:$PYTHONPATH" "$PY" -c "from transformers import Qwen2_5_VLForConditionalGeneration; import trl" \
    2>"$OUT_DIR/import_check.log"; then
    export PYTHONPATH="$SITE:$PYTHONPATH"
  else
    log "transformers/trl from the wheels do not import here (see $OUT_DIR/import_check.log); using the machine's transformers"
    rm -rf "$SITE"/transformers "$SITE"/transformers-*
    export PYTHONPATH="$SITE:$PYTHONPATH"
  fi
fi
BASELINE="${BASELINE:-$ROOT/.gpu_check_baseline}"
BASELINE_ARGS=()
if [ "$BASELINE" = none ]; then
  log "no before/after comparison (BASELINE=none)"
elif [ -f "$BASELINE/vlm_r1/__init__.py" ]; then
  BASELINE_ARGS=(--baseline "$BASELINE")
elif git -C "$ROOT" rev-parse --verify -q "$BASELINE^{commit}" >/dev/null 2>&1; then
  rm -rf /tmp/gpu_check_baseline && mkdir -p /tmp/gpu_check_baseline
  git -C "$ROOT" archive "$BASELINE" vlm_r1 groundwork | tar -x -C /tmp/gpu_check_baseline &&
    git -C "$ROOT" rev-parse "$BASELINE^{commit}" >/tmp/gpu_check_baseline/COMMIT &&
    BASELINE_ARGS=(--baseline /tmp/gpu_check_baseline)
else
  log "no previous tree at '$BASELINE' (a directory with vlm_r1/, or a git revision): no before/after comparison"
fi
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" >&2
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2
PYTHONUNBUFFERED=1 exec "$PY" "$ROOT/benchmarks/gpu_check.py" --shape "${SHAPE:-7b}" --out "$OUT_DIR" \
  "${BASELINE_ARGS[@]}" "$@"
