#!/usr/bin/env bash
# A real one-node Slurm on this machine (Debian's slurm-wlm + munge), for the tests in tests/slurm.
#
# Installs the packages once (apt-get; root), writes a one-node slurm.conf into $DIR (a fixed
# temporary directory, so `stop` finds what `start` began), starts munged, slurmctld and slurmd
# by hand (no systemd) and stops them by pid. Idempotent: daemons already up are left alone.
#   scripts/ci/slurm_env.sh start          install if needed, start; prints `export SLURM_CONF=…`
#   scripts/ci/slurm_env.sh stop           cancel every job, stop the daemons
#   scripts/ci/slurm_env.sh test [PYTHON]  start, run tests/slurm with PYTHON (default: python3;
#                                          a skip counts as a failure), print the counts, stop
# Environment: LIFESEARCH_SLURM_DIR (default /tmp/lifesearch-slurm); LIFESEARCH_SLURM_NODES=2
# starts a second slurmd on this host (`slurmd -N`), for the multi-node script.
# Sourced (scripts/ci/multinode_env.sh does), it only defines its functions and settings: the caller
# may set LIFESEARCH_SLURM_DIR, CTLD_PORT, SLURMD_PORT, CTLD_ADDR and EXTRA_CONF first and redefine node_names,
# node_lines and start_slurmd after.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1

DIR="${LIFESEARCH_SLURM_DIR:-/tmp/lifesearch-slurm}"
CONF="$DIR/slurm.conf"
NODES="${LIFESEARCH_SLURM_NODES:-1}"
HOST="$(hostname -s)"
CTLD_PORT="${CTLD_PORT:-6817}"
SLURMD_PORT="${SLURMD_PORT:-6818}"
CTLD_ADDR="${CTLD_ADDR:-127.0.0.1}"
EXTRA_CONF="${EXTRA_CONF:-}"
MUNGE_PID=/run/munge/munged.pid
# One munged serves every Slurm these scripts start (one-node and two-node may run side by side):
# each start leaves a file here, and munged stops with the last one, only if one of them started it.
MUNGE_USERS=/run/lifesearch-munge

say() { echo "slurm env: $*" >&2; }

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
      && command -v sbatch >/dev/null; then
    return 0
  fi
  say "installing slurm-wlm and munge (apt-get)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null; } \
    || { say "apt-get install slurm-wlm munge failed (root and the Debian mirror are needed)"; return 1; }
}

node_names() { local i; for ((i = 1; i <= NODES; i++)); do if [ "$NODES" -eq 1 ]; then echo "$HOST"; else echo "$HOST-$i"; fi; done; }

write_conf() {
  local cpus node
  mkdir -p "$DIR/state" "$DIR/log"
  for node in $(node_names); do mkdir -p "$DIR/spool-$node"; done
  cpus="$(nproc)"
  # Slurm 22.05 keys. No cgroup plugins (none in a container, none needed): linuxproc tracks a
  # step's processes by parentage. cred_expire=10: a requeued job may start again after 10 s
  # (default 120). Short scheduler intervals: the tests wait on requeues, not on the scheduler.
  cat >"$CONF" <<EOF
ClusterName=lifesearch-ci
SlurmctldHost=$HOST($CTLD_ADDR)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool-%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
ReturnToService=2
KillWait=30
MinJobAge=600
JobRequeue=1
${EXTRA_CONF}
EOF
  node_lines "$cpus" >>"$CONF"
  echo "PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" >>"$CONF"
}

node_lines() {  # node_lines CPUS: the NodeName lines of slurm.conf
  local node i=0
  for node in $(node_names); do
    i=$((i + 1))
    if [ "$NODES" -eq 1 ]; then
      echo "NodeName=$node NodeAddr=127.0.0.1 CPUs=$1 State=UNKNOWN"
    else  # several slurmd on one host: each its own port
      echo "NodeName=$node NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((SLURMD_PORT + i)) CPUs=$1 State=UNKNOWN"
    fi
  done
}

start_slurmd() {  # start_slurmd NODE
  if [ "$NODES" -eq 1 ]; then slurmd -f "$CONF"; else slurmd -f "$CONF" -N "$1"; fi
}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

munge_user() { echo "$MUNGE_USERS/$(echo "$DIR" | tr / _)"; }

start_munge() {
  mkdir -p "$MUNGE_USERS"
  touch "$(munge_user)"
  if alive "$MUNGE_PID"; then return 0; fi
  mkdir -p /run/munge && chown munge:munge /run/munge && chmod 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged || { say "munged did not start (see /var/log/munge/munged.log)"; return 1; }
  touch "$MUNGE_USERS/.started"
}

stop_munge() {  # only the last user stops it, and only a munged one of these scripts started
  local t pid
  rm -f "$(munge_user)"
  if compgen -G "$MUNGE_USERS/_*" >/dev/null || [ ! -e "$MUNGE_USERS/.started" ] || ! alive "$MUNGE_PID"; then
    return 0
  fi
  pid=$(cat "$MUNGE_PID")
  kill "$pid" 2>/dev/null
  for ((t = 0; t < 40; t++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done  # bounded: 10 s
  rm -f "$MUNGE_USERS/.started"
}

wait_idle() {  # until every node is idle (bounded: 60 s)
  local t
  for ((t = 0; t < 120; t++)); do
    if [ "$(SLURM_CONF=$CONF sinfo -h -o %T 2>/dev/null | sort -u)" = "idle" ]; then return 0; fi
    sleep 0.5
  done
  say "the node(s) did not become idle in 60 s: $(SLURM_CONF=$CONF sinfo -h -N -o '%N %T %E' 2>&1 | tr '\n' ';')"
  say "logs: $DIR/log"
  return 1
}

start() {
  install || return 1
  if alive "$DIR/slurmctld.pid" && [ -f "$CONF" ]; then
    wait_idle && echo "export SLURM_CONF=$CONF"
    return
  fi
  write_conf
  start_munge || return 1
  export SLURM_CONF="$CONF"
  # -c: a fresh controller, no jobs left from an earlier start
  slurmctld -c -f "$CONF" || { say "slurmctld did not start (see $DIR/log/slurmctld.log)"; return 1; }
  local node
  for node in $(node_names); do
    start_slurmd "$node" || { say "slurmd $node did not start (see $DIR/log/slurmd-$node.log)"; return 1; }
  done
  wait_idle || return 1
  say "up: $(sinfo -h -o '%D node(s) %c CPU(s) each, partition %P' 2>/dev/null), SLURM_CONF=$CONF"
  echo "export SLURM_CONF=$CONF"
}

stop() {
  export SLURM_CONF="$CONF"
  local f t
  if alive "$DIR/slurmctld.pid"; then
    scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    for ((t = 0; t < 60; t++)); do  # bounded: 30 s for the jobs to go
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  local pid
  for f in "$DIR"/slurmd-*.pid "$DIR/slurmctld.pid"; do
    if alive "$f"; then
      pid=$(cat "$f")
      kill "$pid" 2>/dev/null
      for ((t = 0; t < 40; t++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done  # bounded: 10 s
    fi
  done
  stop_munge
  say "stopped"
}

run_tests() {  # run_tests PYTHON: tests/slurm against this Slurm; none may skip
  SLURM_CONF="$CONF" LIFESEARCH_REQUIRE_SLURM=1 scripts/ci/must_run.sh slurm "${1:-python3}" -p no:randomly tests/slurm
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    test)
      t0=$SECONDS
      trap stop EXIT
      start >/dev/null || exit 1
      echo "slurm env: ready in $((SECONDS - t0)) s"
      run_tests "${2:-python3}"
      ;;
    *) echo "usage: $0 start|stop|test [PYTHON]" >&2; exit 2 ;;
  esac
fi
