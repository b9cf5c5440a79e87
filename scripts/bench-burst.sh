#!/usr/bin/env bash
# bench-burst.sh — a submission storm against the submission buffer
# (issue 5): BURST (10000) sbatch calls from CLIENTS (16) parallel clients
# into one queue whose rate (50 jobs/s) they exceed by far, on a private
# two-node cluster (scripts/up.sh; TIDE_RUN, TIDE_PORT, TIDE_BIN as there).
# Prints TSV rows like bench-cluster.sh: the time until every sbatch had
# its answer, how many jobs the controller then holds (none may be lost),
# how many waited in the buffer, and squeue's latency during the storm
# (the scheduler and the listing must not stall behind it).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BURST=${BURST:-10000}
CLIENTS=${CLIENTS:-16}
export TIDE_RUN=${TIDE_RUN:-$(mktemp -d /tmp/tide-burst.XXXXXX)}
export TIDE_PORT=${TIDE_PORT:-6831}
export TIDE_NODES=2 TIDE_CONTAINERD=off
export TIDE_CTLD_EXTRA='
queues:
  - {name: burst, guaranteed: 16, cap: 16}
submit: {rate_per_queue: 50, buffer: 20000}
'
log() { echo "[$(date +%T)] $*" >&2; }
trap '"$ROOT/scripts/down.sh" >/dev/null 2>&1 || true' EXIT
"$ROOT/scripts/up.sh" >&2 || exit 1
# shellcheck disable=SC1091
. "$TIDE_RUN/env.sh"
WORK=$TIDE_RUN/work
mkdir -p "$WORK" && cd "$WORK" || exit 1

# metric NAME: the sum of a counter's samples from /metrics, read on the
# controller's socket (node_addr serves TLS since issue 21).
metric() {
  curl -sf --unix-socket "$TIDE_SOCKET" http://tidectld/metrics |
    awk -v m="$1" 'index($0, m) == 1 && $0 !~ /^#/ {s += $NF} END {print s + 0}'
}
client() { # n out
  local i
  for ((i = 0; i < $1; i++)); do
    sbatch --parsable -A burst --wrap true -o /dev/null 2>>"$WORK/sbatch.err" | cut -d';' -f1
  done > "$2"
}

log "burst of $BURST submissions from $CLIENTS clients into a queue limited to 50 jobs/s"
t0=$EPOCHREALTIME
for ((k = 0; k < CLIENTS; k++)); do client $((BURST / CLIENTS)) "$WORK/ids.$k" & done
# squeue while the storm runs.
LAT=()
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do
  s=$EPOCHREALTIME; squeue -h -o %i >/dev/null 2>&1
  LAT+=("$(awk -v a=$EPOCHREALTIME -v b="$s" 'BEGIN{printf "%.3f", (a-b)*1000}')")
  sleep 0.5
done
wait
t1=$EPOCHREALTIME
ids=$(cat "$WORK"/ids.* | grep -c '^[0-9][0-9]*$')
uniq=$(cat "$WORK"/ids.* | sort -u | grep -c '^[0-9][0-9]*$')
want=$(( (BURST / CLIENTS) * CLIENTS ))
known=$(sacct -n -X -P -o JobID -S now-1hour 2>/dev/null | sort -u | grep -c .)
buffered=$(metric 'tide_submissions_throttled_total{outcome="buffered"')
refused=$(metric 'tide_submissions_throttled_total{outcome="refused"')
log "accepted $ids/$want (distinct $uniq) in $(awk -v a="$t1" -v b="$t0" 'BEGIN{printf "%.2f", a-b}') s; controller knows $known; buffered $buffered, refused-then-retried $refused"
if [ "$ids" -ne "$want" ] || [ "$uniq" -ne "$want" ] || [ "$known" -lt "$want" ]; then
  log "LOST submissions: see $WORK/sbatch.err"; tail -5 "$WORK/sbatch.err" >&2
fi
printf 'burst_accept\ts\t%s\t%s\t1\n' "$(awk -v a="$t1" -v b="$t0" 'BEGIN{printf "%.3f", a-b}')" "-"
printf 'burst_accepted\tjobs\t%s\t%s\t1\n' "$uniq" "-"
printf 'burst_known\tjobs\t%s\t%s\t1\n' "$known" "-"
printf 'burst_buffered\tjobs\t%s\t%s\t1\n' "$buffered" "-"
if [ ${#LAT[@]} -gt 0 ]; then
  printf '%s\n' "${LAT[@]}" | sort -n | awk -v n=${#LAT[@]} '{a[NR]=$1} END {
    p50 = a[int((n + 1) / 2)]; p99 = a[n - int(n / 100)]
    printf "burst_squeue\tms\t%s\t%s\t%d\n", p50, p99, n }'
fi
scancel -u "$(id -un)" >/dev/null 2>&1
