#!/usr/bin/env bash
# bench-vs-slurm.sh — `make bench-vs-slurm`: run the same measurements
# (scripts/bench-cluster.sh) against the reference Slurm that
# ../shared/slurm-reference/setup.sh starts (four nodes, eight fake GPUs
# each, SCHED_PARAMS=batch_sched_delay=0 by default: "Slurm tuned") and
# against a local Tide cluster, on the same machine in the same run, and
# print both columns with their ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
REF=${SLURM_REF:-$ROOT/../shared/slurm-reference}
OUT=${BENCH_OUT:-$ROOT/bench-results}
mkdir -p "$OUT"
[ -x "$REF/setup.sh" ] || { echo "bench-vs-slurm: $REF/setup.sh not found (set SLURM_REF)" >&2; exit 1; }

# Both clusters' emulated nodes keep to the same host CPUs
# (scripts/node-cpus.sh; up.sh does it for Tide's): slurmd and the
# slurmstepd it forks, like tided, its supervisors and jobs.
NODE_CPUS=$("$ROOT/scripts/node-cpus.sh")
export TIDE_NODE_CPUS=${NODE_CPUS:-all} # up.sh takes exactly these

echo "== reference Slurm" >&2
SCHED_PARAMS=${SCHED_PARAMS-batch_sched_delay=0} "$REF/setup.sh" >&2
if [ -n "$NODE_CPUS" ]; then
  for f in /tmp/slurm-bench/run/slurmd-*.mypid; do
    [ -f "$f" ] || continue
    taskset -a -p -c "$NODE_CPUS" "$(cat "$f")" >/dev/null
  done
  echo "bench-vs-slurm: slurmd and its jobs run on host CPUs $NODE_CPUS" >&2
fi
(
  export SLURM_CONF=/tmp/slurm-bench/etc/slurm.conf
  export PATH=/usr/bin:/usr/sbin:$PATH TARGET=slurm
  CTLD_PID=$(cat /tmp/slurm-bench/run/slurmctld.mypid) WORK=/tmp/slurm-bench/out/tide-bench \
    "$ROOT/scripts/bench-cluster.sh" > "$OUT/slurm.tsv"
) || true
"$REF/setup.sh" stop >&2 || true

TIDE_RUN=$ROOT/run/bench TIDE_PORT=${TIDE_BENCH_PORT:-6818} "$ROOT/scripts/bench-tide.sh" > "$OUT/tide.tsv"
echo "emulated nodes of both clusters on host CPUs: ${NODE_CPUS:-all}"
if [ "${TIDE_HOSTS:-}" = netns ]; then
  echo "Tide in the netns mode (TIDE_HOSTS=netns): hosts in network namespaces, the commands on the login node over TCP with MUNGE"
fi
"$ROOT/scripts/bench-table.sh" /dev/null "$OUT/tide.tsv" "$OUT/slurm.tsv"
