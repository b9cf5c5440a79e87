#!/usr/bin/env bash
# bench.sh — `make bench`: Go benchmarks of the scheduling core and the
# store, then the local-cluster measurements (a private cluster under
# run/bench on its own port), printed as one table.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${BENCH_OUT:-$ROOT/bench-results}
mkdir -p "$OUT"
TAGS=$(test -f /usr/include/sqlite3.h && echo libsqlite3 || true)
# The local clusters' nodes keep to these CPUs (up.sh takes them as
# given; the table says which).
NODE_CPUS=$("$ROOT/scripts/node-cpus.sh")
export TIDE_NODE_CPUS=${NODE_CPUS:-all}

echo "== Go benchmarks (scheduler pass and submission checks at 512 nodes x 8 GPUs, store, squeue rendering)" >&2
go test -tags "$TAGS" -run '^$' -bench 'BenchmarkSchedule|BenchmarkWrite|BenchmarkSqueue|BenchmarkValidateSpec' -benchmem -benchtime=2x \
  ./ctld/sched/ ./ctld/ ./accounting/ ./cli/squeue/ 2>&1 | tee "$OUT/go-bench.txt" | grep -E '^Benchmark' >&2 || true

echo "== local cluster" >&2
TIDE_RUN=$ROOT/run/bench TIDE_PORT=${TIDE_BENCH_PORT:-6818} "$ROOT/scripts/bench-tide.sh" > "$OUT/tide.tsv"

echo "== submission storm against the submission buffer (scripts/bench-burst.sh)" >&2
# On one host whatever TIDE_HOSTS says: it reads the controller's
# /metrics on 127.0.0.1.
TIDE_HOSTS= TIDE_RUN=$ROOT/run/bench-burst TIDE_PORT=$((${TIDE_BENCH_PORT:-6818} + 1)) "$ROOT/scripts/bench-burst.sh" >> "$OUT/tide.tsv"

echo "== simulator memory: tide-sim on the Philly trace, 96 nodes x 8 GPUs, 3 policies (scripts/bench-sim.sh)" >&2
"$ROOT/scripts/bench-sim.sh" >> "$OUT/tide.tsv"

echo "emulated nodes on host CPUs: ${NODE_CPUS:-all} (scripts/node-cpus.sh; TIDE_NODE_CPUS=all for every CPU)"
if [ "${TIDE_HOSTS:-}" = netns ]; then
  echo "Tide in the netns mode: hosts in network namespaces, the commands on the login node over TCP with MUNGE (the burst rows: one host)"
fi
"$ROOT/scripts/bench-table.sh" "$OUT/go-bench.txt" "$OUT/tide.tsv"

echo
echo "Placement on 512 nodes x 8 GPUs, 3-level tree (scripts/bench-topo.sh):"
BENCH_OUT=$OUT "$ROOT/scripts/bench-topo.sh"

echo
echo "Simulator replay speed: one week of the Philly trace on 64 nodes x 8 GPUs, per policy (BenchmarkSimPhilly):"
go test -tags "$TAGS" -run '^$' -bench 'BenchmarkSimPhilly' -benchtime=1x ./sim/ > "$OUT/sim-bench.txt" 2>&1 || true
awk '/^BenchmarkSimPhilly/ { for (i = 3; i < NF; i += 2) if ($(i+1) == "jobs/s") printf "  %-40s %12.0f jobs simulated/s\n", $1, $(i) }' "$OUT/sim-bench.txt"

ALI=${ALIBABA_TRACE:-$ROOT/../shared/traces/alibaba-pai-v2023-openb/jobs.csv.gz}
if [ -f "$ALI" ]; then
  echo
  echo "GPU slices, best fit against first fit: the Alibaba PAI 2023 trace (fractional GPUs) packed onto"
  echo "100 nodes x 8 GPUs, jobs arriving in order and never leaving (tide sim --pack; FGD's experiment)."
  echo "alloc = share of GPU capacity allocated; frag/free = free capacity the trace's request mix cannot use:"
  "$ROOT/bin/tide-sim" --pack --trace "$ALI" --nodes 100 --leaf 0 --compare tide,tide+firstfit 2>/dev/null | tail -n +3
fi
