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
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

DIR="${LIFESEARCH_SLURM_DIR:-/tmp/lifesearch-slurm}"
CONF="$DIR/slurm.conf"
NODES="${LIFESEARCH_SLURM_NODES:-1}"
HOST="$(hostname -s)"
MUNGE_PID=/run/munge/munged.pid

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
  local cpus node i=0
  mkdir -p "$DIR/state" "$DIR/log"
  for node in $(node_names); do mkdir -p "$DIR/spool-$node"; done
  cpus="$(nproc)"
  # Slurm 22.05 keys. No cgroup plugins (none in a container, none needed): linuxproc tracks a
  # step's processes by parentage. cred_expire=10: a requeued job may start again after 10 s
  # (default 120). Short scheduler intervals: the tests wait on requeues, not on the scheduler.
  cat >"$CONF" <<EOF
ClusterName=lifesearch-ci
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=6817
SlurmdPort=6818
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
EOF
  for node in $(node_names); do
    i=$((i + 1))
    if [ "$NODES" -eq 1 ]; then
      echo "NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN" >>"$CONF"
    else  # several slurmd on one host: each its own port
      echo "NodeName=$node NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((6818 + i)) CPUs=$cpus State=UNKNOWN" >>"$CONF"
    fi
  done
  echo "PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" >>"$CONF"
}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_munge() {
  if alive "$MUNGE_PID"; then return 0; fi
  mkdir -p /run/munge && chown munge:munge /run/munge && chmod 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged || { say "munged did not start (see /var/log/munge/munged.log)"; return 1; }
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
    if [ "$NODES" -eq 1 ]; then slurmd -f "$CONF"; else slurmd -f "$CONF" -N "$node"; fi \
      || { say "slurmd $node did not start (see $DIR/log/slurmd-$node.log)"; return 1; }
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
  for f in "$DIR"/slurmd-*.pid "$DIR/slurmctld.pid" "$MUNGE_PID"; do
    if alive "$f"; then
      pid=$(cat "$f")
      kill "$pid" 2>/dev/null
      for ((t = 0; t < 40; t++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done  # bounded: 10 s
    fi
  done
  say "stopped"
}

run_tests() {  # run_tests PYTHON: tests/slurm against this Slurm; none may skip
  SLURM_CONF="$CONF" LIFESEARCH_REQUIRE_SLURM=1 scripts/ci/must_run.sh slurm "${1:-python3}" -p no:randomly tests/slurm
}

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
