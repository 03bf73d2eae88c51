#!/usr/bin/env bash
# One node's Ray, started by ray-cluster.sh inside a job step (srun): `ray start ... --block`, with
# this shell's pid in PIDFILE so that stop_ray can reach it on its node. SIGTERM (stop_ray, or
# Slurm ending the job) stops Ray and ends the step with status 0: a normal end logs no
# `srun: error` and no cancelled step. Ray failing on its own keeps its status (non-zero).
# Usage: ray-node.sh PIDFILE RAY-START-ARGS...
pidfile=$1
shift
ray=
trap 'if [ -n "$ray" ]; then kill -TERM "$ray" 2>/dev/null; wait "$ray"; fi; rm -f "$pidfile"; exit 0' TERM
mkdir -p "$(dirname "$pidfile")"
echo "$$" >"$pidfile"
ray start "$@" --block &
ray=$!
wait "$ray"
rc=$?
rm -f "$pidfile"
echo "ray-node: ray start exited with status $rc" >&2
exit "$rc"
