#!/usr/bin/env bash
# A real single-machine SLURM (Debian's munge + slurmctld + slurmd on localhost) in a scratch directory, for tests.
#
#   bash run_scripts/slurm/local_cluster.sh start  [DIR]   # install packages if missing, configure, start, wait idle
#   bash run_scripts/slurm/local_cluster.sh status [DIR]   # daemons + sinfo
#   bash run_scripts/slurm/local_cluster.sh stop   [DIR]   # stop slurmd, slurmctld, munged (DIR is kept)
#   source <(bash run_scripts/slurm/local_cluster.sh env [DIR])   # export SLURM_CONF for sbatch/squeue/scontrol
#
# DIR defaults to $GG_SLURM_DIR or /tmp/gg-slurm. Everything lives there: munge key/socket/pid/log, slurm.conf,
# state, spool, logs and pid files. Needs root (slurmd runs jobs as the submitting user; apt-get installs).
# The client commands must find the config: `start` prints `export SLURM_CONF=DIR/slurm.conf`.
# Environment: GG_SLURM_DIR [/tmp/gg-slurm], GG_SLURM_CPUS [nproc], GG_SLURM_MEM_MB [free memory - 1 GiB, >= 512],
#   GG_SLURM_PORT [16817, or the next free pair; slurmd uses PORT+1], GG_SLURM_TIMEOUT [60] seconds to wait for the node to be idle.
# A requeued job may start again after cred_expire (20 s here; SLURM default 120 s).
# CPU-only, no cgroups (proctrack/linuxproc, task/none), no accounting database (no sacct: use scontrol/squeue).
set -euo pipefail
CMD="${1:-status}"
DIR="${2:-${GG_SLURM_DIR:-/tmp/gg-slurm}}"
PORT="${GG_SLURM_PORT:-16817}"
CONF="$DIR/slurm.conf"
SOCK="$DIR/munge/munge.socket"
log() { echo "[local_cluster] $*" >&2; }

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

install_pkgs() {
  local need=()
  command -v munged >/dev/null || [ -x /usr/sbin/munged ] || need+=(munge)
  { command -v slurmctld >/dev/null || [ -x /usr/sbin/slurmctld ]; } && command -v sbatch >/dev/null || need+=(slurm-wlm)
  [ ${#need[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || { log "need root to apt-get install ${need[*]}"; exit 1; }
  log "apt-get install ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; }
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

write_conf() {
  local cpus mem
  if [ -z "${GG_SLURM_PORT:-}" ]; then  # another cluster (other DIR) may hold the default ports: take the next pair
    for _ in $(seq 1 50); do port_busy "$PORT" || port_busy $((PORT + 1)) || break; PORT=$((PORT + 2)); done
  fi
  cpus="${GG_SLURM_CPUS:-$(nproc)}"
  mem="${GG_SLURM_MEM_MB:-$(( $(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo) - 1024 ))}"
  [ "$mem" -ge 512 ] 2>/dev/null || mem=512
  cat > "$CONF" <<CONF
# written by run_scripts/slurm/local_cluster.sh
ClusterName=gglocal
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK,cred_expire=20
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
JobRequeue=1
ReturnToService=2
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=600
KillWait=30
Waittime=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
}

start() {
  install_pkgs
  mkdir -p "$DIR"/{munge,state,spool,log}
  chmod 700 "$DIR/munge"
  if ! pid_alive "$DIR/munge/munged.pid"; then
    [ -f "$DIR/munge/munge.key" ] || { dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none; chmod 400 "$DIR/munge/munge.key"; }
    log "munged (socket $SOCK)"
    /usr/sbin/munged --key-file "$DIR/munge/munge.key" --socket "$SOCK" --pid-file "$DIR/munge/munged.pid" \
      --log-file "$DIR/munge/munged.log" --seed-file "$DIR/munge/munged.seed" --force
  fi
  if pid_alive "$DIR/slurmctld.pid"; then :; else write_conf; fi  # a running cluster keeps its config
  export SLURM_CONF="$CONF"
  if ! pid_alive "$DIR/slurmctld.pid"; then
    log "slurmctld"
    /usr/sbin/slurmctld -f "$CONF" -c   # -c: start with clean state (no jobs from an earlier run)
  fi
  if ! pid_alive "$DIR/slurmd.pid"; then
    log "slurmd"
    /usr/sbin/slurmd -f "$CONF" -N localhost
  fi
  local t=0 limit="${GG_SLURM_TIMEOUT:-60}" state=""
  while :; do
    state=$(sinfo -h -N -n localhost -o %T 2>/dev/null || true)
    case "$state" in idle*|mixed*|allocated*) break ;; esac
    if [ "$t" -ge "$limit" ]; then
      log "node not idle after ${limit}s (state '${state}'); logs:"; tail -n 20 "$DIR"/log/*.log >&2 || true; exit 1
    fi
    case "$state" in down*|drain*) scontrol update NodeName=localhost State=RESUME 2>/dev/null || true ;; esac
    sleep 1; t=$((t + 1))
  done
  log "up: node localhost $state after ${t}s"
  echo "export SLURM_CONF=$CONF"
}

stop() {
  local f pid
  for f in "$DIR/slurmd.pid" "$DIR/slurmctld.pid" "$DIR/munge/munged.pid"; do
    if pid_alive "$f"; then
      pid=$(cat "$f"); kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
      log "stopped $(basename "$f" .pid) ($pid)"
    fi
    rm -f "$f"
  done
}

status() {
  local f rc=0
  for f in "$DIR/munge/munged.pid" "$DIR/slurmctld.pid" "$DIR/slurmd.pid"; do
    if pid_alive "$f"; then echo "$(basename "$f" .pid): running ($(cat "$f"))"; else echo "$(basename "$f" .pid): stopped"; rc=1; fi
  done
  [ "$rc" = 0 ] && SLURM_CONF="$CONF" sinfo -N -l || true
  return "$rc"
}

case "$CMD" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 start|stop|status|env [DIR]" >&2; exit 2 ;;
esac
