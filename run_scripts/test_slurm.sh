#!/usr/bin/env bash
# The "tested on a real scheduler" check (issue 5): starts a single-machine SLURM from Debian's packages in a scratch
# directory (run_scripts/slurm/local_cluster.sh), runs the `slurm` tests (tests/test_slurm.py: the tiny CPU recipe
# submitted with sbatch via run_scripts/slurm/gta1.sbatch, once to completion and once preempted + requeued +
# resumed), then stops the cluster. Needs root (apt-get install munge slurm-wlm; the daemons). About 3 minutes on
# 2 CPU cores. Extra arguments go to pytest.
#   sudo bash run_scripts/test_slurm.sh
# Environment: GG_SLURM_DIR [a new mktemp -d directory, removed afterwards], GG_SLURM_KEEP=1 keeps the cluster
# running and the directory (then: export SLURM_CONF=$GG_SLURM_DIR/slurm.conf), plus those of tests/test_slurm.py.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ "$(id -u)" != 0 ]; then echo "[test_slurm] needs root (apt-get, slurmd/slurmctld/munged)" >&2; exit 1; fi
CREATED=0
if [ -z "${GG_SLURM_DIR:-}" ]; then GG_SLURM_DIR=$(mktemp -d /tmp/gg-slurm.XXXXXX); CREATED=1; fi
export GG_SLURM_DIR SLURM_CONF="$GG_SLURM_DIR/slurm.conf"
cleanup() {
  if [ "${GG_SLURM_KEEP:-0}" = 1 ]; then
    echo "[test_slurm] cluster left running: export SLURM_CONF=$SLURM_CONF; stop: bash run_scripts/slurm/local_cluster.sh stop $GG_SLURM_DIR" >&2
    return
  fi
  bash run_scripts/slurm/local_cluster.sh stop "$GG_SLURM_DIR" || true
  [ "$CREATED" = 1 ] && rm -rf "$GG_SLURM_DIR"
  return 0
}
trap cleanup EXIT
bash run_scripts/setup_env.sh
bash run_scripts/slurm/local_cluster.sh start "$GG_SLURM_DIR" >/dev/null
export TOKENIZERS_PARALLELISM=false
"$ROOT/.venv/bin/python" -m pytest -ra -s -m slurm tests/test_slurm.py "$@"
