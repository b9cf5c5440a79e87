#!/usr/bin/env bash
# bench-sim.sh — the simulator's row of `make bench`: peak memory (RSS)
# and wall time of bin/tide-sim replaying the whole Philly trace (82,247
# jobs) on 96 nodes x 8 GPUs under fifo, backfill and tide, once (about
# 16 s on 2 cores). TSV rows on stdout, as bench-cluster.sh writes them;
# none when the trace is missing (PHILLY_TRACE names another copy).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SIM=${TIDE_SIM:-$ROOT/bin/tide-sim}
TRACE=${PHILLY_TRACE:-$ROOT/../shared/traces/philly-pollux/jobs.csv.gz}
if [ ! -f "$TRACE" ]; then
  echo "bench-sim: no Philly trace at $TRACE (set PHILLY_TRACE): no simulator row" >&2
  exit 0
fi
args=(--trace "$TRACE" --nodes 96 --gpus-per-node 8 --compare fifo,backfill,tide --seed 1)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
if /usr/bin/time -f '%M %e' -o "$tmp" true 2>/dev/null; then
  /usr/bin/time -f '%M %e' -o "$tmp" "$SIM" "${args[@]}" >/dev/null
  read -r kib secs <"$tmp"
else
  # No GNU time: the kernel's high-water mark (VmHWM), read until the
  # process exits (its status loses the line when it does).
  t0=$(date +%s.%N)
  "$SIM" "${args[@]}" >/dev/null &
  pid=$!
  kib=0
  while v=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$pid/status" 2>/dev/null) && [ -n "$v" ]; do
    kib=$v
    sleep 0.05
  done
  wait "$pid"
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
fi
mib=$(awk -v k="$kib" 'BEGIN {printf "%.1f", k / 1024}')
printf 'sim_rss_philly\tMiB\t%s\t%s\t1\n' "$mib" "$mib"
printf 'sim_wall_philly\ts\t%s\t%s\t1\n' "$secs" "$secs"
