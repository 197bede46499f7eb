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
#   MASTER_PORT     rendezvous port [a free port on single-node runs, else 29500]
#   RDZV_ID         rendezvous id [SLURM_JOB_ID, else "local"]
#   MAX_RESTARTS    torchrun --max-restarts [0]
#   DRY_RUN=1       print the resolved torchrun command and exit
#   PYTHON          interpreter [.venv/bin/python of this repo]
#   ENTRY           the training module [vlm_r1.grpo_jsonl; the GTA1 recipes use gui_grounding.train]
# On CPU (no GPU) the processes talk over gloo; set OMP_NUM_THREADS to cores / NPROC_PER_NODE.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"

if [ -z "${NPROC_PER_NODE:-}" ]; then
  NPROC_PER_NODE=$( (command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -c '^GPU') || echo 0)
  [ "$NPROC_PER_NODE" -gt 0 ] 2>/dev/null || NPROC_PER_NODE=1
fi
NNODES="${NNODES:-${SLURM_JOB_NUM_NODES:-1}}"
if [ -z "${MASTER_ADDR:-}" ]; then
  if [ -n "${SLURM_JOB_NODELIST:-}" ] && command -v scontrol >/dev/null; then
    MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
  else
    MASTER_ADDR=127.0.0.1
  fi
fi
if [ -z "${MASTER_PORT:-}" ]; then
  if [ "$NNODES" = 1 ]; then
    MASTER_PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  else
    MASTER_PORT=29500
  fi
fi
RDZV_ID="${RDZV_ID:-${SLURM_JOB_ID:-local}}"
if [ "$NNODES" -gt 1 ] && [ "$MASTER_ADDR" = 127.0.0.1 ]; then
  msg="NNODES=$NNODES but no rendezvous host: set MASTER_ADDR (the first node's address) or launch under SLURM"
  if [ "${DRY_RUN:-0}" = 1 ]; then echo "[train_grpo] WARNING: $msg" >&2; else echo "[train_grpo] ERROR: $msg" >&2; exit 2; fi
fi
if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(( $(nproc) / NPROC_PER_NODE > 0 ? $(nproc) / NPROC_PER_NODE : 1 ))}"
fi

echo "[train_grpo] torchrun nnodes=$NNODES nproc_per_node=$NPROC_PER_NODE rdzv=$MASTER_ADDR:$MASTER_PORT id=$RDZV_ID" >&2
CMD=("$PYTHON" -m torch.distributed.run
  --nnodes "$NNODES" --nproc_per_node "$NPROC_PER_NODE"
  --rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv_id "$RDZV_ID"
  --max_restarts "${MAX_RESTARTS:-0}"
  -m "${ENTRY:-vlm_r1.grpo_jsonl}" "$@")
if [ "${DRY_RUN:-0}" = 1 ]; then  # print the resolved command and exit
  printf '%q ' "${CMD[@]}"; echo
  exit 0
fi
exec "${CMD[@]}"
