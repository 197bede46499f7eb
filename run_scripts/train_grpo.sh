#!/usr/bin/env bash
# torchrun launcher for `python -m vlm_r1.grpo_jsonl` (or ENTRY=gui_grounding.train) — the shape of the cluster recipes.
#
#   NPROC_PER_NODE=2 bash run_scripts/train_grpo.sh --model_name_or_path DIR --data_file_paths a.jsonl ... [flags]
#
# Every argument is passed to vlm_r1.grpo_jsonl (see `python -m vlm_r1.grpo_jsonl --help`).
# Environment (defaults in brackets):
#   NPROC_PER_NODE  processes per node [number of visible GPUs, else 1]
#   NNODES          nodes [SLURM_JOB_NUM_NODES, else 1]
#   MASTER_ADDR     rendezvous host [first host of SLURM_JOB_NODELIST, else 127.0.0.1]
#   MASTER_PORT     rendezvous port [one node: 0, i.e. torchrun's store binds a free port itself; several nodes:
#                   29500 + SLURM_JOB_ID % 3000 (29500-32499, below Linux's ephemeral range 32768-60999) under
#                   SLURM, else 29500]
#   RDZV_ID         rendezvous id [SLURM_JOB_ID; else one node: local-<host>-<pid>-<random>; several nodes: "local"
#                   (set the same RDZV_ID on every node)]
#   MAX_RESTARTS    torchrun --max-restarts [0]
#   DRY_RUN=1       print the resolved torchrun command and exit [0]
# The numbers among them (and DRY_RUN, 0 or 1) are checked before anything runs (python -m vlm_r1.launcher_env): a
# bad value is one "[train_grpo] ERROR: NAME: must be ..., got '...'" line, exit 2.
#   PYTHON          interpreter [.venv/bin/python of this repo]
#   ENTRY           the training module [vlm_r1.grpo_jsonl; the GTA1 recipes use gui_grounding.train]
# On CPU (no GPU) the processes talk over gloo; set OMP_NUM_THREADS to cores / NPROC_PER_NODE.
#
# Runs that share a machine never meet (issue 11): torchrun's c10d rendezvous hosts its store on MASTER_PORT, and when
# that port is already taken it does not fail, it silently connects to whatever store listens there and joins the
# rendezvous of the same id. With a port probed here and released (taken by another job in the seconds before
# torchrun binds it) and the same id "local" for every run, a run joined a stranger's full rendezvous and waited until
# that job ended. So: one node binds port 0 (no probe, no race), hosts its own store (is_host=1: a taken explicit
# port fails at once) and gets a unique id; several nodes get a port and id of their own from SLURM_JOB_ID.
# Restarts (MAX_RESTARTS; the GTA1 recipes use 3): torch 2.13's torchrun hands the restarted workers the same shared
# rendezvous store without a per-attempt prefix, so they read the dead attempt's keys (gloo peer addresses, barrier
# counts) and connect to dead peers or wait forever: the preemption test hung so, after a worker died at exit under
# load and torchrun restarted the group. TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (default here) gives every attempt a
# fresh store of its own.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"

# The launcher variables are checked first, by the one rule (vlm_r1/launch.py LAUNCHER_VARIABLES, as the recipe
# launcher's plan checks them): a bad one (MAX_RESTARTS=abc, NNODES=0, DRY_RUN=yes, MASTER_PORT=0 on several nodes)
# is one line naming it and exit 2, before torchrun or a dry run. Each is written back canonical (NNODES=" 02" -> 2;
# blank -> unset), so the tests below and torchrun read the number Python read.
NNODES="${NNODES:-${SLURM_JOB_NUM_NODES:-}}"
CHECKED="$(PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m vlm_r1.launcher_env --prog train_grpo \
  NNODES NPROC_PER_NODE MASTER_PORT MAX_RESTARTS DRY_RUN)" || exit 2
while IFS='=' read -r name value; do [ -n "$name" ] && printf -v "$name" '%s' "$value"; done <<< "$CHECKED"
if [ -z "${NPROC_PER_NODE:-}" ]; then
  NPROC_PER_NODE=$( (command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -c '^GPU') || echo 0)
  [ "$NPROC_PER_NODE" -gt 0 ] 2>/dev/null || NPROC_PER_NODE=1
fi
NNODES="${NNODES:-1}"
if [ -z "${MASTER_ADDR:-}" ]; then
  if [ -n "${SLURM_JOB_NODELIST:-}" ] && command -v scontrol >/dev/null; then
    MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
  else
    MASTER_ADDR=127.0.0.1
  fi
fi
RDZV_CONF=()
if [ "$NNODES" = 1 ]; then
  MASTER_PORT="${MASTER_PORT:-0}"  # 0: the store binds a free port atomically (a probed-then-released port races)
  RDZV_CONF=(--rdzv_conf is_host=1)  # this node hosts the store; a taken port is an error, never a stranger's store
  RDZV_ID="${RDZV_ID:-${SLURM_JOB_ID:-local-$(hostname -s 2>/dev/null || echo host)-$$-$RANDOM$RANDOM}}"
else
  if [ -z "${MASTER_PORT:-}" ]; then
    if [[ "${SLURM_JOB_ID:-}" =~ ^[0-9]+$ ]]; then
      MASTER_PORT=$(( 29500 + 10#$SLURM_JOB_ID % 3000 ))  # two jobs sharing a node differ unless ids are 3000 apart
    else
      MASTER_PORT=29500
    fi
  fi
  RDZV_ID="${RDZV_ID:-${SLURM_JOB_ID:-local}}"
fi
if [ "$NNODES" -gt 1 ] && [ "$MASTER_ADDR" = 127.0.0.1 ]; then
  msg="NNODES=$NNODES but no rendezvous host: set MASTER_ADDR (the first node's address) or launch under SLURM"
  if [ "${DRY_RUN:-0}" = 1 ]; then echo "[train_grpo] WARNING: $msg" >&2; else echo "[train_grpo] ERROR: $msg" >&2; exit 2; fi
fi
if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(( $(nproc) / NPROC_PER_NODE > 0 ? $(nproc) / NPROC_PER_NODE : 1 ))}"
fi

export TORCH_DISABLE_SHARE_RDZV_TCP_STORE="${TORCH_DISABLE_SHARE_RDZV_TCP_STORE:-1}"  # restarts get a fresh store
echo "[train_grpo] torchrun nnodes=$NNODES nproc_per_node=$NPROC_PER_NODE rdzv=$MASTER_ADDR:$MASTER_PORT id=$RDZV_ID" >&2
CMD=("$PYTHON" -m torch.distributed.run
  --nnodes "$NNODES" --nproc_per_node "$NPROC_PER_NODE"
  --rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv_id "$RDZV_ID" "${RDZV_CONF[@]}"
  --max_restarts "${MAX_RESTARTS:-0}"
  -m "${ENTRY:-vlm_r1.grpo_jsonl}" "$@")
if [ "${DRY_RUN:-0}" = 1 ]; then  # print the resolved command and exit
  printf '%q ' "${CMD[@]}"; echo
  exit 0
fi
exec "${CMD[@]}"
