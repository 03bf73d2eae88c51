#!/usr/bin/env bash
# Shared by lifesearch.sbatch and lifesearch-multinode.sbatch (sourced, not run): start a Ray
# head and workers on the job's nodes with srun, wait until all have joined, run
# `lifesearch run` against that cluster, and requeue the job when it is preempted.
# shellcheck shell=bash

# Ports derived from the job id, so two jobs sharing a node never collide; 100 ports per job.
ray_ports() {
  local base=$(( 20000 + (SLURM_JOB_ID % 400) * 100 ))
  RAY_PORT=$base
  RAY_PORT_ARGS=(
    "--node-manager-port=$((base + 1))" "--object-manager-port=$((base + 2))"
    "--ray-client-server-port=$((base + 3))" "--dashboard-agent-grpc-port=$((base + 4))"
    "--dashboard-agent-listen-port=$((base + 5))" "--metrics-export-port=$((base + 6))"
    "--runtime-env-agent-port=$((base + 7))" "--min-worker-port=$((base + 10))"
    "--max-worker-port=$((base + 99))"
  )
}

# Node-local and short: Ray's unix socket paths must stay under ~107 characters.
ray_temp_dir() { echo "${LIFESEARCH_RAY_TMP:-/tmp}/ray-${SLURM_JOB_ID}"; }

# Ray >= 2.59 authenticates nodes with a shared token: one per job, in a file on the shared
# filesystem ($HOME by default) that only the user can read; srun passes the variables on.
ray_token() {
  export RAY_AUTH_MODE=token
  export RAY_AUTH_TOKEN_PATH="${LIFESEARCH_RAY_TOKEN_DIR:-$HOME/.ray}/lifesearch-${SLURM_JOB_ID}.token"
  mkdir -p "$(dirname "$RAY_AUTH_TOKEN_PATH")"
  (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$RAY_AUTH_TOKEN_PATH")
}

node_ip() {  # the address a node is reached at, asked on the node itself
  srun --nodes=1 --ntasks=1 -w "$1" hostname --ip-address | awk '{print $1}'
}

start_ray() {  # start_ray NODE... : the first node is the head
  local nodes=("$@") head=$1 gpus=${SLURM_GPUS_ON_NODE:-0} cpus=${SLURM_CPUS_ON_NODE:-1} tmp
  tmp=$(ray_temp_dir)
  ray_ports
  ray_token
  HEAD_IP=$(node_ip "$head")
  export RAY_ADDRESS="$HEAD_IP:$RAY_PORT"
  echo "ray head: $head ($RAY_ADDRESS), ${#nodes[@]} node(s), $gpus GPU(s) and $cpus CPU(s) per node"
  srun --nodes=1 --ntasks=1 -w "$head" --overlap \
    ray start --head --node-ip-address="$HEAD_IP" --port="$RAY_PORT" "${RAY_PORT_ARGS[@]}" \
    --num-gpus="$gpus" --num-cpus="$cpus" --temp-dir="$tmp" --include-dashboard=false \
    --disable-usage-stats --block &
  RAY_PIDS=($!)
  sleep "${LIFESEARCH_RAY_HEAD_WAIT:-10}"
  local node ip
  for node in "${nodes[@]:1}"; do
    ip=$(node_ip "$node")
    srun --nodes=1 --ntasks=1 -w "$node" --overlap \
      ray start --address="$RAY_ADDRESS" --node-ip-address="$ip" "${RAY_PORT_ARGS[@]}" \
      --num-gpus="$gpus" --num-cpus="$cpus" --temp-dir="$tmp" --disable-usage-stats --block &
    RAY_PIDS+=($!)
  done
  lifesearch cluster wait --nodes "${#nodes[@]}" --timeout "${LIFESEARCH_RAY_JOIN_TIMEOUT:-600}"
}

stop_ray() {
  local pid
  for pid in "${RAY_PIDS[@]:-}"; do
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  done
  wait 2>/dev/null || true
  rm -f "${RAY_AUTH_TOKEN_PATH:-}"
}

# SIGTERM (preemption, or --signal=B:TERM@120 before the time limit) goes to the driver,
# which finishes its current step, flushes its records and exits 0; then the job is
# requeued and the rerun resumes where this one stopped.
on_term() {
  echo "SIGTERM: stopping the run for requeue"
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
