#!/usr/bin/env bash
# The test suite on a fresh machine: installs system packages the tests need (chromium for the web collector,
# python3-doc for real pages), sets up .venv, runs pytest. Extra arguments go to pytest.
#   bash run_scripts/test.sh                 # default suite (< 20 minutes on 2 CPU cores)
#   bash run_scripts/test.sh -m slow         # the slow checks only
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -d /usr/share/doc/python3-doc/html ] || need+=(python3-doc)
fc-list 2>/dev/null | grep -qi dejavu || need+=(fonts-dejavu-core)
# OpenCV (cleaning detectors; rapidocr pulls the non-headless wheel) loads libGL and glib at import
ldconfig -p 2>/dev/null | grep -q "libGL.so.1" || need+=(libgl1)
ldconfig -p 2>/dev/null | grep -q "libgthread-2.0.so.0" || need+=(libglib2.0-0)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "[test.sh] apt-get install ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "[test.sh] missing system packages: ${need[*]} (run as root or install them; collector tests will fail)" >&2
  fi
fi
bash run_scripts/setup_env.sh
export TOKENIZERS_PARALLELISM=false
exec "$ROOT/.venv/bin/python" -m pytest -ra "$@" tests
