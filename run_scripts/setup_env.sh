#!/usr/bin/env bash
# Create or reuse ./.venv and install this project into it, idempotently.
# Sourced by demo.sh and test.sh; safe to run on its own:  bash run_scripts/setup_env.sh
#
# CPU machines: torch comes from the local CPU wheel (`pip install torch==2.13.0`), the rest is installed against
# requirements-cpu.txt as constraints so pip can never swap in CUDA torch or pull torchvision.
# GPU clusters: set EXTRAS=gpu (or install `pip install -e .[gpu]` in your own environment).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
EXTRAS="${EXTRAS:-dev,collect}"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do command -v "$cand" >/dev/null 2>&1 && { PY="$cand"; break; }; done
fi

log() { printf '[setup_env] %s\n' "$*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtual environment $VENV with $($PY --version 2>&1)"
  "$PY" -m venv "$VENV"
fi

stamp="$VENV/.gui_grounding_installed"
want="$(cat "$ROOT/setup.py" "$ROOT/requirements-cpu.txt" | sha256sum | cut -c1-16) extras=$EXTRAS"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c "import vlm_r1, gui_grounding" 2>/dev/null; then
  log "environment up to date ($VENV)"
else
  t0=$(date +%s)
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    log "installing torch (CPU build unless a CUDA wheel is the only one available)"
    "$VENV/bin/pip" install -q "torch==2.13.0"
  fi
  log "installing the project (.[${EXTRAS}]) with requirements-cpu.txt as constraints"
  "$VENV/bin/pip" install -q -c "$ROOT/requirements-cpu.txt" -e "$ROOT[${EXTRAS}]"
  if "$VENV/bin/python" -c "import torchvision" 2>/dev/null; then
    log "WARNING: torchvision is installed; on a CPU-only machine it breaks transformers imports (docs/REFERENCES.md#torchvision-on-cpu)."
  fi
  echo "$want" > "$stamp"
  log "installed in $(( $(date +%s) - t0 )) s"
fi
