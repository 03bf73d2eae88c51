#!/usr/bin/env bash
# Two hosts on one machine, for tests/multinode: this host (the head) and a second host in its own
# network, UTS and mount namespaces (its own hostname, address, /etc/hosts and node-local /tmp),
# joined by a veth pair on a private /30. On them: a two-node Slurm (slurmctld and one slurmd
# here, one slurmd there; munge shared) and a standing two-node Ray cluster (head here, worker
# there, token auth). Root only; Slurm and munge come from scripts/ci/slurm_env.sh (sourced).
#   scripts/ci/multinode_env.sh start [PYTHON]   build the second host, start Slurm and Ray; prints the exports
#   scripts/ci/multinode_env.sh stop             stop everything by pid, delete the namespaces and the veth
#   scripts/ci/multinode_env.sh test [PYTHON]    start, run tests/multinode (a skip counts as a failure), stop
#   scripts/ci/multinode_env.sh kill-worker      kill -9 every process of the second host (a node dies)
#   scripts/ci/multinode_env.sh worker-up        (re)boot the second host: its namespaces, slurmd, Ray worker
#   scripts/ci/multinode_env.sh on-worker CMD... run a command on the second host (its namespaces)
# Nothing leaves the two namespaces' /30 (no route, no default route in the second host); the
# one-node Slurm of slurm_env.sh may run beside it (other ports, its own directory).
# Environment: LIFESEARCH_MULTINODE_DIR (default /var/tmp/lifesearch-mn: not under /tmp, which
# the second host has of its own); LIFESEARCH_MN_NET (default 10.213.77: .1 here, .2 there).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

DIR="${LIFESEARCH_MULTINODE_DIR:-/var/tmp/lifesearch-mn}"
NET="${LIFESEARCH_MN_NET:-10.213.77}"
HEAD_IP="$NET.1"
WORKER_IP="$NET.2"
HEAD_NODE=lsmn-head
WORKER_NODE=lsmn-worker
NS=lsmn-worker       # the second host's network namespace (ip netns)
VETH_HEAD=lsmn-h0    # the veth end here
VETH_WORKER=lsmn-w0  # the end in the second host
HOLDER="$DIR/worker-host.pid"  # the process holding the second host's UTS and mount namespaces
CTLD_PORT=6827       # the one-node Slurm uses 6817/6818
SLURMD_PORT=6828
CTLD_ADDR="$HEAD_IP"
# A node whose slurmd dies is marked down after 10 s (not 300): the node-loss test waits on it.
# Job ids from 100: the sbatch scripts derive Ray's ports from the job id, and the one-node Slurm's
# jobs (ids from 1) may run on this host at the same time.
EXTRA_CONF=$'SlurmdTimeout=10\nFirstJobId=100'
RAY_PORT=6390        # the standing Ray cluster; Slurm jobs' own clusters use 20000 and up
PY="${LIFESEARCH_PYTHON:-python3}"
if [ "${1:-}" = start ] || [ "${1:-}" = test ] || [ "${1:-}" = worker-up ]; then PY="${2:-$PY}"; fi

LIFESEARCH_SLURM_DIR="$DIR"
# shellcheck source=scripts/ci/slurm_env.sh
source scripts/ci/slurm_env.sh
NODES=2

say() { echo "multinode env: $*" >&2; }

node_names() { echo "$HEAD_NODE"; echo "$WORKER_NODE"; }

# Each node at the address it is reached at, with half of this machine's CPUs: the multi-node script
# asks for whole nodes (--exclusive), so each node's Ray gets its node's CPUs, and two 1-CPU
# replicas on a 2-core machine then land one on each node, never both on the head.
node_lines() {
  local half=$(($1 / 2))
  if [ "$half" -lt 1 ]; then half=1; fi
  echo "NodeName=$HEAD_NODE NodeAddr=$HEAD_IP CPUs=$half State=UNKNOWN"
  echo "NodeName=$WORKER_NODE NodeAddr=$WORKER_IP CPUs=$half State=UNKNOWN"
}

start_slurmd() {  # the head's here, the worker's inside the second host
  if [ "$1" = "$HEAD_NODE" ]; then slurmd -f "$CONF" -N "$1"; else on_worker slurmd -f "$CONF" -N "$1"; fi
}

on_worker() { nsenter --target "$(cat "$HOLDER")" --net --uts --mount -- "$@"; }

ray_bin() { local d; d="$(dirname "$(command -v "$PY")")"; if [ -x "$d/ray" ]; then echo "$d/ray"; else command -v ray; fi; }

# -- the second host ---------------------------------------------------------------

net_up() {
  ip netns list | grep -qw "^$NS" || ip netns add "$NS" || return 1
  if ! ip link show "$VETH_HEAD" >/dev/null 2>&1; then
    ip link add "$VETH_HEAD" type veth peer name "$VETH_WORKER" netns "$NS" || return 1
  fi
  ip addr replace "$HEAD_IP/30" dev "$VETH_HEAD" && ip link set "$VETH_HEAD" up \
    && ip -n "$NS" addr replace "$WORKER_IP/30" dev "$VETH_WORKER" && ip -n "$NS" link set "$VETH_WORKER" up \
    && ip -n "$NS" link set lo up
}

host_up() {  # the namespaces, and a process that holds the UTS and mount ones
  net_up || { say "could not create the network namespace $NS and the veth pair (root is needed)"; return 1; }
  if alive "$HOLDER"; then return 0; fi
  mkdir -p "$DIR"
  printf '127.0.0.1 localhost\n%s %s\n%s %s\n' "$HEAD_IP" "$HEAD_NODE" "$WORKER_IP" "$WORKER_NODE" >"$DIR/worker-hosts"
  echo "$WORKER_NODE" >"$DIR/worker-hostname"
  rm -f "$HOLDER"
  # a checkout (or its python) under /tmp must stay visible to the second host, whose /tmp is its own
  local keep=() prefix
  prefix=$(dirname "$(dirname "$(command -v "$PY")")")
  case "$PWD/" in /tmp/*) keep+=("$PWD") ;; esac
  case "$prefix/" in "$PWD/"*) ;; /tmp/*) keep+=("$prefix") ;; esac
  # unshare makes the new mounts private: /tmp, /etc/hosts and /etc/hostname are the second host's own; what
  # `keep` names is bound aside (under DIR) before the private /tmp is mounted, then moved back to its path
  # (nsenter, not `ip netns exec`, which would mount a /sys without the cgroup tree slurmd reads)
  # shellcheck disable=SC2016  # expanded by that sh
  nsenter --net="/run/netns/$NS" unshare --uts --mount --propagation private sh -c '
    node=$1 dir=$2 holder=$3; shift 3
    i=0; for p in "$@"; do i=$((i + 1)); mkdir -p "$dir/keep$i" && mount --bind "$p" "$dir/keep$i" || exit 1; done
    mount -t tmpfs -o size=2g,mode=1777 tmpfs /tmp || exit 1
    i=0; for p in "$@"; do i=$((i + 1)); mkdir -p "$p" && mount --move "$dir/keep$i" "$p" || exit 1; done
    hostname "$node" && mount --bind "$dir/worker-hosts" /etc/hosts && mount --bind "$dir/worker-hostname" /etc/hostname \
      && echo $$ >"$holder" && exec sleep infinity' sh "$WORKER_NODE" "$DIR" "$HOLDER.new" "${keep[@]}" >/dev/null 2>&1 &
  disown  # stopped by pid (kill_worker), not by this shell: no job notice when it goes
  local t
  for ((t = 0; t < 40; t++)); do [ -s "$HOLDER.new" ] && break; sleep 0.25; done  # bounded: 10 s
  mv -f "$HOLDER.new" "$HOLDER" 2>/dev/null
  alive "$HOLDER" || { say "the second host's namespaces did not come up"; return 1; }
}

worker_pids() { ip netns pids "$NS" 2>/dev/null; }

kill_worker() {  # every process of the second host, at once (kill -9): the node is lost
  local t p
  for ((t = 0; t < 20; t++)); do  # bounded: a process started meanwhile is caught by the next round
    p=$(worker_pids)
    [ -z "$p" ] && break
    # shellcheck disable=SC2086
    kill -9 $p 2>/dev/null
    sleep 0.25
  done
  rm -f "$HOLDER" "$DIR/slurmd-$WORKER_NODE.pid" "$DIR/ray-worker.pid"
  [ -z "$(worker_pids)" ]
}

net_down() {
  ip link del "$VETH_HEAD" 2>/dev/null
  ip netns del "$NS" 2>/dev/null
  return 0
}

# -- the standing Ray cluster --------------------------------------------------------

ray_env() {
  export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$DIR/ray.token" RAY_USAGE_STATS_ENABLED=0
  # no memory monitor: it kills replicas when the whole machine runs short, and a test machine is shared
  export RAY_memory_monitor_refresh_ms=0
  if [ ! -s "$RAY_AUTH_TOKEN_PATH" ]; then
    (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$RAY_AUTH_TOKEN_PATH")
  fi
}

ray_ports() {  # BASE: this node's fixed ports, so nothing collides with the jobs' clusters
  echo "--node-manager-port=$(($1 + 1)) --object-manager-port=$(($1 + 2)) --dashboard-agent-grpc-port=$(($1 + 3))"
  echo "--dashboard-agent-listen-port=$(($1 + 4)) --metrics-export-port=$(($1 + 5)) --runtime-env-agent-port=$(($1 + 6))"
  echo "--min-worker-port=$(($1 + 10)) --max-worker-port=$(($1 + 49))"
}

# `ray start --block` in its own session, its pid in PIDFILE; the whole session is stopped by pid
ray_up() {  # ray_up WHERE PIDFILE ARGS...: WHERE is "here" or "worker"
  local where=$1 pidfile=$2 t
  shift 2
  if alive "$pidfile"; then return 0; fi
  ray_env
  local run=(setsid "$(ray_bin)" start "$@" --block --disable-usage-stats)
  if [ "$where" = worker ]; then run=(nsenter --target "$(cat "$HOLDER")" --net --uts --mount -- "${run[@]}"); fi
  "${run[@]}" >>"$DIR/log/ray-$where.log" 2>&1 &
  echo $! >"$pidfile"
  disown
}

ray_nodes_up() {  # wait (bounded: 120 s) until N nodes are alive
  PYTHONPATH="$PWD" "$PY" -m lifesearch_local cluster wait --nodes "$1" --timeout 120 \
    --address "$HEAD_IP:$RAY_PORT" >/dev/null && return 0
  say "the Ray cluster did not reach $1 node(s); logs: $DIR/log/ray-*.log"
  return 1
}

ray_start() {
  mkdir -p "$DIR/log"
  # shellcheck disable=SC2046  # the ports are words
  ray_up here "$DIR/ray-head.pid" --head --node-ip-address="$HEAD_IP" --port="$RAY_PORT" $(ray_ports 6400) \
    --num-cpus=1 --temp-dir=/tmp/lsmn-ray --include-dashboard=false || return 1
  ray_nodes_up 1 || return 1
  ray_worker_up
}

ray_at_worker() {  # ray_at_worker 0|1: wait (bounded: 90 s) until Ray counts that many live nodes at the worker's address
  ray_env
  PYTHONPATH="$PWD" "$PY" - "$HEAD_IP:$RAY_PORT" "$WORKER_IP" "$1" <<'PY' || { say "Ray did not see $1 live node(s) at $WORKER_IP in 90 s"; return 1; }
import sys, time
import ray
ray.init(address=sys.argv[1], logging_level="ERROR")
deadline = time.monotonic() + 90
while time.monotonic() < deadline:  # bounded
    if sum(1 for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == sys.argv[2]) == int(sys.argv[3]):
        sys.exit(0)
    time.sleep(0.5)
sys.exit(1)
PY
}

ray_worker_up() {
  alive "$DIR/ray-worker.pid" && return 0
  ray_at_worker 0 || return 1  # a worker killed a moment ago: Ray notices before the new one joins
  # shellcheck disable=SC2046
  ray_up worker "$DIR/ray-worker.pid" --address="$HEAD_IP:$RAY_PORT" --node-ip-address="$WORKER_IP" \
    $(ray_ports 6450) --num-cpus=1 --temp-dir=/tmp/lsmn-ray || return 1
  ray_at_worker 1
}

tree() {  # tree PID: the pid and every descendant (from ps)
  local c
  echo "$1"
  for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do tree "$c"; done
}

stop_pid_tree() {  # stop_pid_tree PIDFILE: TERM the process and its descendants, KILL what is left after 10 s
  alive "$1" || { rm -f "$1"; return 0; }
  local pids t p
  pids=$(tree "$(cat "$1")")
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null
  for ((t = 0; t < 40; t++)); do
    p=
    for q in $pids; do kill -0 "$q" 2>/dev/null && p=$q; done
    [ -z "$p" ] && break
    sleep 0.25
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null
  rm -f "$1"
}

# -- the whole -----------------------------------------------------------------------

worker_up() {  # boot (or reboot) the second host: namespaces, slurmd, Ray worker
  host_up || return 1
  mkdir -p "$DIR/log" "$DIR/spool-$WORKER_NODE"
  if ! alive "$DIR/slurmd-$WORKER_NODE.pid"; then
    start_slurmd "$WORKER_NODE" || { say "slurmd $WORKER_NODE did not start (see $DIR/log/slurmd-$WORKER_NODE.log)"; return 1; }
  fi
  if alive "$DIR/ray-head.pid"; then ray_worker_up || return 1; fi
  wait_idle
}

exports() {
  echo "export SLURM_CONF=$CONF"
  echo "export LIFESEARCH_MN_RAY_ADDRESS=$HEAD_IP:$RAY_PORT LIFESEARCH_MN_RAY_TOKEN=$DIR/ray.token"
  echo "export LIFESEARCH_MN_ENV=$PWD/scripts/ci/multinode_env.sh LIFESEARCH_MN_WORKER=$WORKER_NODE LIFESEARCH_MN_HEAD=$HEAD_NODE"
  echo "export LIFESEARCH_PYTHON=$(command -v "$PY")"  # the env's later subcommands (worker-up) use it too
  echo "export LIFESEARCH_MN_HEAD_IP=$HEAD_IP LIFESEARCH_MN_WORKER_IP=$WORKER_IP"
}

mn_start() {
  install || return 1
  mkdir -p "$DIR/log"
  host_up || return 1
  if ! alive "$DIR/slurmctld.pid"; then
    start >/dev/null || return 1  # slurm_env.sh's: conf, munge, slurmctld, both slurmd
  else
    worker_up >/dev/null || return 1
  fi
  ray_start || return 1
  say "up: $(sinfo -h -N -o '%N(%T)' | tr '\n' ' ')and Ray at $HEAD_IP:$RAY_PORT (2 nodes); logs: $DIR/log"
  exports
}

mn_stop() {
  local f
  stop_pid_tree "$DIR/ray-head.pid"
  if [ -s "$DIR/slurmctld.pid" ] || compgen -G "$DIR/slurmd-*.pid" >/dev/null; then
    stop >/dev/null 2>&1  # slurm_env.sh's: cancel the jobs, stop the daemons by pid, munge if last
  fi
  kill_worker >/dev/null  # whatever is left in the second host (its Ray worker, its namespaces)
  for f in "$DIR/ray-head.pid" "$DIR/ray-worker.pid" "$DIR/ray.token"; do rm -f "$f"; done
  net_down
  say "stopped"
}

if [ "$(id -u)" -ne 0 ]; then say "root is needed (network namespaces, Slurm's daemons)"; exit 1; fi
case "${1:-start}" in
  start) trap 'if [ "$?" -ne 0 ]; then mn_stop; fi' EXIT; mn_start ;;
  stop) mn_stop ;;
  kill-worker) kill_worker ;;
  worker-up) worker_up ;;
  on-worker) shift; alive "$HOLDER" || { say "the second host is down"; exit 3; }; on_worker "$@" ;;
  test)
    t0=$SECONDS
    trap mn_stop EXIT
    mn_start >"$DIR.exports" || exit 1
    echo "multinode env: ready in $((SECONDS - t0)) s"
    # shellcheck disable=SC1090
    . "$DIR.exports" && rm -f "$DIR.exports"
    LIFESEARCH_REQUIRE_MULTINODE=1 scripts/ci/must_run.sh multinode "$PY" -p no:randomly \
      --basetemp="$DIR/pytest" tests/multinode
    ;;
  *) echo "usage: $0 start|stop|test|kill-worker|worker-up [PYTHON]" >&2; exit 2 ;;
esac
