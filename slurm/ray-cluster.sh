#!/usr/bin/env bash
# Shared by lifesearch.sbatch and lifesearch-multinode.sbatch (sourced, not run): start a Ray
# head and workers on the job's nodes with srun, wait until all have joined, run
# `lifesearch run` against that cluster, and requeue the job when it is preempted.
# shellcheck shell=bash

LIFESEARCH_SLURM_DIR="${LIFESEARCH_HOME:-${SLURM_SUBMIT_DIR:-.}}/slurm"

# Ports derived from the job id, so two jobs sharing a node never collide; 100 ports per job.
# No Ray Client server (`ray://`): the driver runs inside the job and joins by address, and the
# client server needs `ray[client]` (grpcio), which `pip install -e .` does not bring.
ray_ports() {
  local base=$(( 20000 + (SLURM_JOB_ID % 400) * 100 ))
  RAY_PORT=$base
  RAY_PORT_ARGS=(
    "--node-manager-port=$((base + 1))" "--object-manager-port=$((base + 2))"
    "--dashboard-agent-grpc-port=$((base + 4))"
    "--dashboard-agent-listen-port=$((base + 5))" "--metrics-export-port=$((base + 6))"
    "--runtime-env-agent-port=$((base + 7))" "--min-worker-port=$((base + 10))"
    "--max-worker-port=$((base + 99))"
  )
}

# Node-local and short: Ray's unix socket paths must stay under ~107 characters.
ray_temp_dir() { echo "${LIFESEARCH_RAY_TMP:-/tmp}/ray-${SLURM_JOB_ID}"; }

# Each node's Ray output, appended across requeues (next to the job's log by default).
ray_log() { echo "${LIFESEARCH_RAY_LOG_DIR:-${SLURM_SUBMIT_DIR:-.}/logs}/ray-${SLURM_JOB_ID}-$1.log"; }

# Ray >= 2.59 authenticates nodes with a shared token: one per job, in a file on the shared
# filesystem ($HOME by default) that only the user can read; srun passes the variables on.
ray_token() {
  export RAY_AUTH_MODE=token
  export RAY_AUTH_TOKEN_PATH="${LIFESEARCH_RAY_TOKEN_DIR:-$HOME/.ray}/lifesearch-${SLURM_JOB_ID}.token"
  mkdir -p "$(dirname "$RAY_AUTH_TOKEN_PATH")"
  (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$RAY_AUTH_TOKEN_PATH")
}

# The address a node is reached at: the IPv4 address Slurm itself reaches it at (its NodeAddr),
# else what the node's own hostname resolves to, asked on the node. A host whose hostname
# resolves to another interface than the one its peers reach (a second network) then still
# gets a Ray address that the other nodes can reach.
node_ip() {
  local addr
  addr=$(scontrol show node -o "$1" 2>/dev/null | sed -n 's/.*NodeAddr=\([0-9.]*\) .*/\1/p')
  if [[ "$addr" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] && [ "$addr" != 127.0.0.1 ]; then echo "$addr"; return; fi
  srun --nodes=1 --ntasks=1 -w "$1" hostname --ip-address | awk '{print $1}'
}

ray_node() {  # ray_node NODE RAY-START-ARGS... : one node's Ray in its own job step, in the background
  local node=$1 log
  shift
  log=$(ray_log "$node")
  mkdir -p "$(dirname "$log")"
  srun --nodes=1 --ntasks=1 -w "$node" --overlap \
    bash "$LIFESEARCH_SLURM_DIR/ray-node.sh" "$(ray_temp_dir)/$node.pid" "$@" >>"$log" 2>&1 &
  RAY_PIDS+=($!)
  RAY_NODES+=("$node")
}

# Wait (bounded) until N nodes have joined. In the background, so that SIGTERM reaches on_term at
# once (bash runs a trap only after a foreground command ends); the wait fails within a second,
# naming the node's log, when the step of the head or of a worker has ended.
cluster_wait() {  # cluster_wait N
  local i workers=()
  for ((i = 1; i < ${#RAY_PIDS[@]}; i++)); do
    workers+=(--node "${RAY_PIDS[$i]}:the Ray worker on ${RAY_NODES[$i]}:$(ray_log "${RAY_NODES[$i]}")"
              --expect "${RAY_IPS[$i]}:the Ray worker on ${RAY_NODES[$i]}")  # named if it has not joined in time
  done
  lifesearch cluster wait --nodes "$1" --timeout "${LIFESEARCH_RAY_JOIN_TIMEOUT:-600}" \
    --head-pid "${RAY_PIDS[0]}" --head-log "$(ray_log "${RAY_NODES[0]}")" --head-name "the Ray head on ${RAY_NODES[0]}" \
    "${workers[@]}" &
  WAIT_PID=$!
  local rc=0
  wait "$WAIT_PID" || rc=$?
  WAIT_PID=
  return "$rc"
}

start_ray() {  # start_ray NODE... : the first node is the head
  local nodes=("$@") head=$1 gpus=${SLURM_GPUS_ON_NODE:-0} cpus=${SLURM_CPUS_ON_NODE:-1} tmp node ip
  tmp=$(ray_temp_dir)
  ray_ports
  ray_token
  RAY_PIDS=()
  RAY_NODES=()
  HEAD_IP=$(node_ip "$head")
  RAY_IPS=("$HEAD_IP")
  export RAY_ADDRESS="$HEAD_IP:$RAY_PORT"
  echo "ray head: $head ($RAY_ADDRESS), ${#nodes[@]} node(s), $gpus GPU(s) and $cpus CPU(s) per node; Ray logs: $(ray_log '<node>')"
  ray_node "$head" --head --node-ip-address="$HEAD_IP" --port="$RAY_PORT" "${RAY_PORT_ARGS[@]}" \
    --num-gpus="$gpus" --num-cpus="$cpus" --temp-dir="$tmp" --include-dashboard=false --disable-usage-stats
  cluster_wait 1 || return  # the head is up (workers need it), or it failed: said in one line
  for node in "${nodes[@]:1}"; do
    ip=$(node_ip "$node")
    ray_node "$node" --address="$RAY_ADDRESS" --node-ip-address="$ip" "${RAY_PORT_ARGS[@]}" \
      --num-gpus="$gpus" --num-cpus="$cpus" --temp-dir="$tmp" --disable-usage-stats
    RAY_IPS+=("$ip")
  done
  if [ "${#nodes[@]}" -gt 1 ]; then cluster_wait "${#nodes[@]}"; fi
}

# SIGTERM to each node's ray-node.sh (on its node, through srun), which stops Ray and ends its
# step cleanly; bounded: after 60 s a node still up has its step killed.
stop_ray() {
  local i t pid
  for i in "${!RAY_PIDS[@]}"; do
    kill -0 "${RAY_PIDS[$i]}" 2>/dev/null || continue
    # shellcheck disable=SC2016  # expanded on the node, by that bash
    srun --nodes=1 --ntasks=1 -w "${RAY_NODES[$i]}" --overlap \
      bash -c 'kill -TERM "$(cat "$0")"' "$(ray_temp_dir)/${RAY_NODES[$i]}.pid" 2>/dev/null \
      || kill "${RAY_PIDS[$i]}" 2>/dev/null || true
  done
  for ((t = 0; t < 120; t++)); do
    pid=
    for i in "${RAY_PIDS[@]:-}"; do if [ -n "$i" ] && kill -0 "$i" 2>/dev/null; then pid=$i; fi; done
    [ -z "$pid" ] && break
    sleep 0.5
  done
  for i in "${RAY_PIDS[@]:-}"; do if [ -n "$i" ]; then kill "$i" 2>/dev/null || true; fi; done
  wait 2>/dev/null || true
  RAY_PIDS=()
  rm -f "${RAY_AUTH_TOKEN_PATH:-}"
}

# SIGTERM (`scancel --signal=TERM --batch`, or --signal=B:TERM@… before the time limit) goes to
# the driver first, which finishes its current step, flushes its records and exits 0; only then
# does Ray go down, and the job is requeued: the rerun resumes where this one stopped.
on_term() {
  trap '' TERM  # once: Slurm signals again when the requeue below ends this instance
  echo "SIGTERM: stopping the run for requeue"
  if [ -n "${WAIT_PID:-}" ]; then kill -TERM "$WAIT_PID" 2>/dev/null || true; fi
  if [ -n "${DRIVER_PID:-}" ]; then
    kill -TERM "$DRIVER_PID" 2>/dev/null || true
    wait "$DRIVER_PID" || true  # the driver flushes and exits 0; a stray code must not block the requeue
  fi
  stop_ray
  scontrol requeue "$SLURM_JOB_ID"
  exit 0
}

run_lifesearch() {  # run_lifesearch CONFIG [extra args]
  lifesearch run --config "$@" &
  DRIVER_PID=$!
  local rc=0
  wait "$DRIVER_PID" || rc=$?
  DRIVER_PID=
  return "$rc"
}
