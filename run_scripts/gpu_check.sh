#!/usr/bin/env bash
# One prepared GPU check (benchmarks/gpu_check.py): split attention in bf16, the Qwen2.5-VL-7B-shaped GRPO step naive
# vs shared prompt (time, peak memory, prefill), and larger groups/screens if time is left. About 4-5 minutes on one
# H100/H200; writes gpu_check.json and gpu_check.md to OUT_DIR.
#
#   bash run_scripts/gpu_check.sh [OUT_DIR] [extra gpu_check.py flags...]   # default OUT_DIR: $OUT or runs/gpu_check
#   SHAPE=tiny bash run_scripts/gpu_check.sh /tmp/gc                        # the CPU path, seconds
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
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())" >&2
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2
PYTHONUNBUFFERED=1 exec "$PY" "$ROOT/benchmarks/gpu_check.py" --shape "${SHAPE:-7b}" --out "$OUT_DIR" "$@"
