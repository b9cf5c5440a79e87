#!/usr/bin/env bash
# bench-scale.sh — make bench-scale (issue 26): the whole controller
# (daemon, node protocol, store) at scale on one machine. It starts a
# private tidectld (SQLite in a temporary directory, 127.0.0.1) and one
# tided that emulates BENCH_NODES nodes (tided --emulate: each a real
# node daemon with its own name, connection, fake GPUs and place in the
# switch tree; jobs run no process, they last the TIDE_EMULATE duration
# they carry), then measures, in order:
#
#   1. registration: seconds from tided's start until every node is idle;
#   2. heartbeats: the controller's CPU share of one core over
#      BENCH_WINDOW at that size, idle (and the emulator's, for scale);
#   3. the cluster filled (one 8-GPU job per node, running until the end)
#      and BENCH_SUBMIT submissions from 16, then 64 concurrent API
#      clients (no process start-up): jobs per second;
#   4. a backlog of BENCH_PENDING pending jobs in all (submitted through
#      the API), then: scheduling pass p50/p99 over BENCH_WINDOW (from
#      tide_schedule_cycle_seconds), squeue and sacct wall time (the real
#      commands, output discarded), the controller's RSS;
#   5. restart: the controller killed (SIGKILL) and started again, seconds
#      until it answers the job list, and until every node is back.
#
# It prints a table with the issue's targets next to the figures, and
# the raw values in $WORK/results.txt. Everything it starts it stops by
# pid; the temporary directory goes at the end (BENCH_KEEP=1 keeps it).
#
# BENCH_SLURM_RESULTS=FILE (the results of scripts/bench-scale-slurm.sh,
# as make bench-scale-slurm runs them) adds the comparison with Slurm:
# the same run also measures the controller's CPU during the
# registration, BENCH_SUBMIT submissions from 16 and then 64 concurrent
# sbatch processes (Slurm's clients are CLI processes: Slurm has no
# submission API without slurmrestd) and the load average, and the
# table gets a Slurm column and the ratio, Tide better or worse.
#
# Environment: BENCH_NODES (2000), BENCH_PENDING (20000: about a minute
# and a half in all; the issue's figures are at 100000), BENCH_SUBMIT
# (jobs per submission measure, 5000), BENCH_WINDOW (30s), BENCH_PORT
# (a free port from 6900), BENCH_GPUS (8 per node), BENCH_HEARTBEAT
# (tided's heartbeat, 10s, the default), TIDE_BIN (./bin),
# BENCH_SLURM_RESULTS (none), BENCH_PROFILE (a file: the controller's
# CPU profile over the passes' window is written there; BENCH_WINDOW
# in seconds), BENCH_PROFILE_SUBMIT (a file: the same over BENCH_WINDOW
# from the first sustained submissions on; the API clients' own profiles
# go to FILE.client16 and FILE.client64).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN=${TIDE_BIN:-$ROOT/bin}
BIN=$(cd "$BIN" && pwd)
NODES=${BENCH_NODES:-2000}
PENDING=${BENCH_PENDING:-20000}
SUBMIT=${BENCH_SUBMIT:-5000}
WINDOW=${BENCH_WINDOW:-30s}
GPUS=${BENCH_GPUS:-8}
HEARTBEAT=${BENCH_HEARTBEAT:-10s}

for v in NODES PENDING SUBMIT GPUS; do
  case ${!v} in
  '' | *[!0-9]*) echo "bench-scale: BENCH_$v=${!v} is not a number" >&2; exit 1 ;;
  esac
done
[ "$NODES" -ge 1 ] || { echo "bench-scale: BENCH_NODES must be at least 1" >&2; exit 1; }
SLURM_RES=${BENCH_SLURM_RESULTS:-}
if [ -n "$SLURM_RES" ]; then
  case $SLURM_RES in /*) ;; *) SLURM_RES=$OLDPWD/$SLURM_RES ;; esac # relative to where it was run
  [ -r "$SLURM_RES" ] || { echo "bench-scale: BENCH_SLURM_RESULTS=$SLURM_RES: no such readable file (scripts/bench-scale-slurm.sh writes it)" >&2; exit 1; }
  grep -q '^nodes ' "$SLURM_RES" || { echo "bench-scale: BENCH_SLURM_RESULTS=$SLURM_RES holds no results of scripts/bench-scale-slurm.sh (no \"nodes\" line)" >&2; exit 1; }
fi
for b in tidectld tided squeue sacct ${SLURM_RES:+sbatch}; do
  [ -x "$BIN/$b" ] || { echo "bench-scale: $BIN/$b missing; run make build" >&2; exit 1; }
done

# A free port pair (node_addr, metrics_addr).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${BENCH_PORT:-}
if [ -z "$PORT" ]; then
  for p in $(seq 6900 2 6998); do
    if port_free "$p" && port_free $((p + 1)); then PORT=$p; break; fi
  done
fi
[ -n "$PORT" ] || { echo "bench-scale: no free port pair in 6900-6999 (set BENCH_PORT)" >&2; exit 1; }
MPORT=$((PORT + 1))

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tide-bench-scale.XXXXXX")
chmod 755 "$WORK"
# The emulated nodes' job directories on tmpfs when there is one, as on
# a real node (/run/tided).
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  NODESTATE=$(mktemp -d /dev/shm/tide-bench-scale.XXXXXX)
else
  NODESTATE=$WORK/nodes
fi
CTLD_PID=
TIDED_PID=
cleanup() {
  for p in $TIDED_PID $CTLD_PID; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in $TIDED_PID $CTLD_PID; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$NODESTATE"
  if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "bench-scale: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# The measuring helper, built once (test/tools/benchscale).
go build -o "$WORK/benchscale" ./test/tools/benchscale
BS=$WORK/benchscale
export TIDE_SOCKET=$WORK/ctld.sock
RESULTS=$WORK/results.txt
: >"$RESULTS"
# val KEY: the value a measure printed as "KEY value".
val() { awk -v k="$1" '$1 == k { v = $2 } END { print v }' "$RESULTS"; }
record() { tee -a "$RESULTS" >&2; }
nowns() { date +%s%N; }
# ticks PID: its user and system time, in clock ticks.
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
cpu_s() { awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f\n", (b - a) / hz }'; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' /; }
[ -z "$SLURM_RES" ] || echo "load_start $(loadavg)" | record

"$BIN/tidectld" keygen "$WORK/cluster.key" >/dev/null
if [ "$(id -u)" = 0 ]; then ROOTJOBS=true; else ROOTJOBS=false; fi
mkdir -p "$WORK/jobs"
chmod 1777 "$WORK/jobs"

# The controller: its partitions, nodes and switch tree come from the
# emulator itself (tided emulate-config), so names and leaves match.
{
  cat <<YAML
version: 1
cluster_name: scale
state_dir: $WORK/ctld
socket: $WORK/ctld.sock
node_addr: 127.0.0.1:$PORT
metrics_addr: 127.0.0.1:$MPORT
tls: {mode: off}
key_file: $WORK/cluster.key
allow_root_jobs: $ROOTJOBS
log_level: warn
timeouts: {node: 60s, kill_wait: 5s, min_job_age: 5m}
scheduler: {interval: 1s}
limits:
  connections: $((3 * NODES + 512))
  connections_per_peer: $((3 * NODES + 256))
  unauthenticated: $((NODES + 256))
  unauthenticated_per_peer: $((NODES + 256))
YAML
  "$BIN/tided" emulate-config --emulate "$NODES" --emulate-gpus "$GPUS" --partition emu
} >"$WORK/tide.yaml"

start_ctld() {
  "$BIN/tidectld" --config "$WORK/tide.yaml" >>"$WORK/tidectld.log" 2>&1 &
  CTLD_PID=$!
}
rss_mb() { awk '/^VmRSS:/ { printf "%.0f\n", $2 / 1024 }' "/proc/$1/status"; }

echo "== bench-scale: $NODES emulated nodes × $GPUS GPUs, $PENDING pending jobs, controller on 127.0.0.1:$PORT, work in $WORK" >&2
start_ctld
"$BS" wait-api -timeout 60s >/dev/null

# 1. Registration: every node at once.
c0=$(ticks "$CTLD_PID")
t0=$(nowns)
"$BIN/tided" --config /dev/null --controller "127.0.0.1:$PORT" --key-file "$WORK/cluster.key" --state-dir "$NODESTATE" \
  --heartbeat "$HEARTBEAT" --log-level warn --allow-root-jobs="$ROOTJOBS" \
  --emulate "$NODES" --emulate-gpus "$GPUS" >>"$WORK/tided.log" 2>&1 &
TIDED_PID=$!
"$BS" wait-idle -n "$NODES" -since "$t0" -timeout 5m | record
if [ -n "$SLURM_RES" ]; then
  echo "reg_ctld_cpu_s $(cpu_s "$c0" "$(ticks "$CTLD_PID")")" | record
  echo "reg_emulator_cpu_s $(cpu_s 0 "$(ticks "$TIDED_PID")")" | record
fi
echo "tided_rss_mb $(rss_mb "$TIDED_PID")" | record

# 2. Steady heartbeats, idle cluster: the controller's and the emulator's
# CPU over the same window.
"$BS" cpu -pid "$TIDED_PID" -for "$WINDOW" | sed 's/^cpu_pct/tided_cpu_pct/' >"$WORK/tided-cpu.txt" &
cpu_job=$!
"$BS" cpu -pid "$CTLD_PID" -for "$WINDOW" | sed 's/^cpu_pct/hb_cpu_pct/' | record
wait "$cpu_job"
record <"$WORK/tided-cpu.txt"
echo "idle_rss_mb $(rss_mb "$CTLD_PID")" | record

# 3. Fill every node (8-GPU jobs that run until the end), then the
# sustained submissions, which wait behind them.
t0=$(nowns)
"$BS" submit -n "$NODES" -clients 16 -gpus "$GPUS" -emulate inf -workdir "$WORK/jobs" >/dev/null
"$BS" wait-running -n "$NODES" -since "$t0" | sed 's/^running_s/fill_running_s/' | record
# profile_start FILE: the controller's CPU profile over BENCH_WINDOW
# into FILE (nothing without FILE; operator access: root over the unix
# socket), in the background; profile_wait waits for it.
prof_pid=
profile_start() {
  prof_pid=
  [ -n "$1" ] || return 0
  curl -sS --unix-socket "$WORK/ctld.sock" -o "$1" "http://tidectld/debug/pprof/profile?seconds=${WINDOW%s}" &
  prof_pid=$!
}
profile_wait() { [ -z "$prof_pid" ] || wait "$prof_pid" || echo "bench-scale: the CPU profile $1 failed" >&2; }
# From the first sustained submissions on (the backlog's follow them).
profile_start "${BENCH_PROFILE_SUBMIT:-}"
for c in 16 64; do
  "$BS" submit -n "$SUBMIT" -clients "$c" -gpus 1 -emulate 60s -workdir "$WORK/jobs" -pid "$CTLD_PID" \
    ${BENCH_PROFILE_SUBMIT:+-cpuprofile "$BENCH_PROFILE_SUBMIT.client$c"} |
    awk -v c="$c" '$1 == "jobs_per_s" || $1 ~ /_cpu_us_per_job$/ { k = ($1 == "jobs_per_s") ? "per_s" : $1; print "submit_" c "_" k, $2 }' | record
done
# For the comparison with Slurm: the same from sbatch processes.
cli=0
if [ -n "$SLURM_RES" ]; then
  cli=$SUBMIT
  for c in 16 64; do
    TIDE_EMULATE=60s "$BS" cli -timeout 3h -n "$SUBMIT" -clients "$c" -- "$BIN/sbatch" --gpus=1 -o /dev/null -D "$WORK/jobs" --wrap true |
      awk -v c="$c" '$1 == "jobs_per_s" { print "cli_submit_" c "_per_s", $2 } $1 == "failed" { print "cli_submit_" c "_failed", $2 }' | record
  done
fi

# 4. The backlog, then the measures at that size.
left=$((PENDING - 2 * SUBMIT - 2 * cli))
if [ "$left" -gt 0 ]; then
  "$BS" submit -n "$left" -clients 64 -gpus 1 -emulate 60s -workdir "$WORK/jobs" |
    awk '$1 == "jobs_per_s" { print "backlog_per_s", $2 }' | record
fi
profile_wait "${BENCH_PROFILE_SUBMIT:-}"
pending=$("$BIN/squeue" -h -t PD -o %i | wc -l)
echo "pending $pending" | record
profile_start "${BENCH_PROFILE:-}" # over the passes' window
"$BS" passes -metrics "http://127.0.0.1:$MPORT/metrics" -for "$WINDOW" | record
profile_wait "${BENCH_PROFILE:-}"
"$BS" time -n 5 -- "$BIN/squeue" | sed 's/^/squeue_/' | record
"$BS" time -n 5 -- "$BIN/sacct" -a -X -S "$(date -d '-1 hour' +%Y-%m-%dT%H:%M:%S)" | sed 's/^/sacct_/' | record
echo "rss_mb $(rss_mb "$CTLD_PID")" | record

# 5. Restart: kill -9, start again; serving = the job list answers
# (with every job it had before: restart_jobs against jobs_before).
echo "jobs_before $("$BIN/squeue" -h -o %i | wc -l)" | record
kill -KILL "$CTLD_PID"
wait "$CTLD_PID" 2>/dev/null || true
t0=$(nowns)
start_ctld
"$BS" wait-api -since "$t0" -timeout 5m | sed 's/^serving_s/restart_serving_s/; s/^jobs/restart_jobs/' | record

# The table.
[ -z "$SLURM_RES" ] || echo "load_end $(loadavg)" | record
pct() { awk -v v="$1" -v t="$2" 'BEGIN { if (v == "") print "—"; else if (v + 0 < t + 0) print "yes"; else print "no" }'; }
atleast() { awk -v v="$1" -v t="$2" 'BEGIN { if (v == "") print "—"; else if (v + 0 >= t + 0) print "yes"; else print "no" }'; }
if [ -z "$SLURM_RES" ]; then
  printf '\n%-58s %14s %14s %s\n' "bench-scale ($NODES nodes × $GPUS GPUs, $(val pending) pending)" "Tide" "target" "met"
  row() { printf '%-58s %14s %14s %s\n' "$1" "$2" "$3" "$4"; }
else
  # sval KEY: the value of KEY in Slurm's results; vs TIDE SLURM
  # lower|higher: how Tide compares, by the ratio of the two.
  sval() { awk -v k="$1" '$1 == k { v = $2 } END { print v }' "$SLURM_RES"; }
  vs() {
    awk -v t="$1" -v s="$2" -v better="$3" 'BEGIN {
      if (t == "" || s == "" || t !~ /^[0-9.]+$/ || s !~ /^[0-9.]+$/ || t + 0 == 0 || s + 0 == 0) { print "—"; exit }
      r = (better == "lower") ? s / t : t / s
      if (r >= 0.95 && r <= 1.05) print "about the same"
      else if (r > 1) printf "Tide %.1f× better\n", r; else printf "Tide %.1f× worse\n", 1 / r }'
  }
  snodes=$(sval nodes) spending=$(sval pending)
  printf '\n%-58s %14s %14s %-5s %14s %s\n' "bench-scale ($NODES nodes × $GPUS GPUs, $(val pending) pending)" "Tide" "target" "met" "Slurm 22.05" "Tide vs Slurm"
  if [ "$snodes" != "$NODES" ] || [ "$spending" != "$(val pending)" ]; then
    echo "NOTE: Slurm ran at $snodes nodes and ${spending:-?} pending jobs (its results: $SLURM_RES), Tide at $NODES and $(val pending)"
  fi
  # row LABEL TIDE TARGET MET [SLURM [lower|higher]]: without lower or
  # higher the two are shown but not compared (not the same measure).
  row() {
    local cmp=—
    [ -z "${6:-}" ] || cmp=$(vs "$2" "${5:-}" "$6")
    printf '%-58s %14s %14s %-5s %14s %s\n' "$1" "$2" "$3" "$4" "${5:-—}" "$cmp"
  }
fi
sv() { [ -z "$SLURM_RES" ] || sval "$1"; }
row "$NODES nodes registered and idle (s)" "$(val idle_s)" "< 30" "$(pct "$(val idle_s)" 30)" "$(sv idle_s)" lower
if [ -n "$SLURM_RES" ]; then
  row "  controller CPU during the registration (s)" "$(val reg_ctld_cpu_s)" "" "" "$(sv reg_ctld_cpu_s)" lower
  row "  emulation's CPU until all idle (s; Slurm: its slurmd)" "$(val reg_emulator_cpu_s)" "" "" "$(sv reg_slurmd_cpu_s)"
fi
row "controller CPU, steady heartbeats (% of one core)" "$(val hb_cpu_pct)" "< 10" "$(pct "$(val hb_cpu_pct)" 10)" "$(sv hb_cpu_pct)" lower
row "  emulator CPU meanwhile (% of one core)" "$(val tided_cpu_pct)" "" "" "$(sv slurmd_cpu_pct)"
row "  $NODES whole-node jobs submitted and running (s)" "$(val fill_running_s)" "" "" "$(sv fill_running_s)"
row "API submissions, 16 clients (jobs/s)" "$(val submit_16_per_s)" ">= 5000" "$(atleast "$(val submit_16_per_s)" 5000)" "${SLURM_RES:+n/a (no API)}"
row "API submissions, 64 clients (jobs/s)" "$(val submit_64_per_s)" ">= 5000" "$(atleast "$(val submit_64_per_s)" 5000)" "${SLURM_RES:+n/a (no API)}"
row "  controller / client CPU per job, 16 clients (µs)" "$(val submit_16_ctld_cpu_us_per_job) / $(val submit_16_client_cpu_us_per_job)" "" ""
row "  controller / client CPU per job, 64 clients (µs)" "$(val submit_64_ctld_cpu_us_per_job) / $(val submit_64_client_cpu_us_per_job)" "" ""
if [ -n "$SLURM_RES" ]; then
  row "sbatch processes, 16 clients (jobs/s)" "$(val cli_submit_16_per_s)" "" "" "$(sv cli_submit_16_per_s)" higher
  row "sbatch processes, 64 clients (jobs/s)" "$(val cli_submit_64_per_s)" "" "" "$(sv cli_submit_64_per_s)" higher
fi
row "scheduling pass p50 at the backlog (ms)" "$(val pass_p50_ms)" "" ""
row "scheduling pass p99 at the backlog (ms)" "$(val pass_p99_ms)" "< 200" "$(pct "$(val pass_p99_ms)" 200)" "$(sv sched_main_max_cycle_ms)"
if [ -n "$SLURM_RES" ]; then
  row "scheduling pass mean (ms; Slurm: main cycle, sdiag)" "$(val pass_mean_ms)" "" "" "$(sv sched_main_mean_cycle_ms)" lower
  row "  passes in the window (Slurm: main cycles)" "$(val passes)" "" "" "$(sv sched_main_total_cycles)"
  row "  Slurm: jobs tested per main cycle (mean depth)" "" "" "" "$(sv sched_main_mean_depth_cycle)"
  bf=$(sv sched_bf_mean_cycle_ms)/$(sv sched_bf_max_cycle_ms) # no mean: no backfill cycle ended in the window
  row "  Slurm: backfill cycle mean / max (ms)" "" "" "" "$([ "${bf%/*}" = "" ] && echo "no cycle" || echo "$bf")"
fi
row "squeue at the backlog, median (s)" "$(val squeue_median_s)" "< 1" "$(pct "$(val squeue_median_s)" 1)" "$(sv squeue_median_s)" lower
row "sacct at the backlog, median (s)" "$(val sacct_median_s)" "" "" "${SLURM_RES:+n/a (slurmdbd)}"
row "controller RSS at the backlog (MiB)" "$(val rss_mb)" "< 1024" "$(pct "$(val rss_mb)" 1024)" "$(sv rss_mb)" lower
row "restart (kill -9) to serving (s)" "$(val restart_serving_s)" "< 15" "$(pct "$(val restart_serving_s)" 15)" "$(sv restart_serving_s)" lower
row "  jobs listed after the restart / before" "$(val restart_jobs)/$(val jobs_before)" "" "" "${SLURM_RES:+$(sv restart_jobs)/$(sv jobs_before)}"
row "  emulator RSS at $NODES nodes (MiB${SLURM_RES:+; Slurm: its slurmd, PSS})" "$(val tided_rss_mb)" "" "" "$(sv slurmd_pss_mb)"
if [ -n "$SLURM_RES" ]; then
  echo
  echo "Slurm: $(grep -m1 '^# bench-scale-slurm' "$SLURM_RES" | cut -c3-); load average (1/5/15 min) $(sv load_start) at its start, $(sv load_end) at its end"
  echo "Tide: load average $(val load_start) at its start, $(val load_end) at its end"
  echo "Slurm's \"pass p99\" is its main cycle's max and its mean the main cycle's (sdiag over $(sv sched_window_s) s), not the same statistic as Tide's; Slurm's API figures and sacct are not measured (no slurmrestd, no slurmdbd). See docs/performance.md."
fi
echo
echo "raw values:" >&2
cat "$RESULTS" >&2
