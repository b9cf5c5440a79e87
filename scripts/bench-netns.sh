#!/usr/bin/env bash
# bench-netns.sh — the cost of crossing hosts: submit -> start and the
# commands' latency with 10,000 pending jobs (bench-cluster.sh's parts
# "start pending"), measured RUNS times (default 3) on a single-host
# cluster (the CLI on the controller's unix socket) and on a netns
# cluster (TIDE_HOSTS=netns: the CLI on the login node, over TCP with
# MUNGE credentials), the two modes taking turns so that the machine's
# drift spreads over both. Prints, per measure and mode, the range of
# the runs' medians, and the ratio of the medians of those medians
# (netns / single host). TSV of every run under BENCH_OUT.
#
# Needs root (the netns mode). Environment: RUNS, BENCH_OUT, and
# bench-cluster.sh's PENDING, START_N, LAT_N.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
RUNS=${RUNS:-3}
OUT=${BENCH_OUT:-$ROOT/bench-results}/netns
mkdir -p "$OUT"
rm -f "$OUT"/*.tsv
PORT=${TIDE_BENCH_PORT:-6818}
export TIDE_NODE_CPUS=${TIDE_NODE_CPUS:-$("$ROOT/scripts/node-cpus.sh")}
[ -n "$TIDE_NODE_CPUS" ] || TIDE_NODE_CPUS=all
export CGROUP_PASS=0 TIDE_BENCH_PARTS="start pending" TIDE_CONTAINERD=off
for ((r = 1; r <= RUNS; r++)); do
  for mode in single netns; do
    echo "== run $r/$RUNS, $mode" >&2
    hosts=
    [ "$mode" = netns ] && hosts=netns
    TIDE_HOSTS=$hosts TIDE_RUN=$ROOT/run/bench-$mode TIDE_PORT=$PORT "$ROOT/scripts/bench-tide.sh" >"$OUT/$mode.$r.tsv"
  done
done

printf '%-34s %-4s %-28s %-28s %s\n' measure unit "single host: medians" "netns: medians" "netns/single"
for key in start_latency squeue_pending squeue_j_pending sinfo_pending sbatch_pending; do
  line=$(for mode in single netns; do
    awk -F'\t' -v k="$key" -v m="$mode" '$1 == k { print m, $2, $3 }' "$OUT"/"$mode".*.tsv
  done | awk -v k="$key" '
    { u = $2; v[$1] = v[$1] " " $3 }
    function med(s,   a, n, i, j, t) {
      n = split(s, a, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function rng(s,   a, n, i, lo, hi) {
      n = split(s, a, " "); lo = a[1]; hi = a[1]
      for (i = 2; i <= n; i++) { if (a[i] + 0 < lo + 0) lo = a[i]; if (a[i] + 0 > hi + 0) hi = a[i] }
      return lo "-" hi " (" n " runs)"
    }
    END {
      if (v["single"] == "" || v["netns"] == "") { printf "%-34s %-4s %s\n", k, u, "(missing)"; exit }
      printf "%-34s %-4s %-28s %-28s %.2f\n", k, u, rng(v["single"]), rng(v["netns"]), med(v["netns"]) / med(v["single"])
    }')
  echo "$line"
done
