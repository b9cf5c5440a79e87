#!/usr/bin/env bash
# bench-scale-slurm.sh — the Slurm side of make bench-scale-slurm (issue 26,
# item 4): the measures of scripts/bench-scale.sh, as far as Slurm can take
# them, against the reference Slurm (Debian 12's slurm-wlm 22.05, as
# ../shared/slurm-reference/setup.sh installs and configures it) in its
# multiple-slurmd mode: one slurmctld and BENCH_NODES slurmd daemons on this
# host, each an emulated node with its own name and port, BENCH_CPUS CPUs and
# BENCH_GPUS fake GPUs (character devices that nothing opens). Slurm's own
# defaults throughout (SlurmdTimeout 300 s, so slurmctld pings each node
# every 100 s; sched_interval 60 s, default_queue_depth 100,
# batch_sched_delay 3 s; bf_interval 30 s, bf_max_job_test 500).
#
# In order, as bench-scale.sh does for Tide:
#
#   1. registration: seconds from starting every slurmd (all at once, one
#      loop of background starts) until sinfo shows every node idle; the
#      slurmd daemons' memory (PSS: shared pages counted once);
#   2. heartbeats: slurmctld's CPU share of one core over BENCH_HB_WINDOW
#      (200 s: two of Slurm's 100 s ping rounds) on the idle cluster, and
#      the slurmd daemons' meanwhile;
#   3. the cluster filled (one BENCH_GPUS-GPU `sleep` job per node, running
#      until the end) and BENCH_SUBMIT sbatch submissions from 16, then 64
#      concurrent sbatch processes (Slurm's network API is slurmrestd,
#      which the reference does not run, and libslurm's C API is not
#      used here: CLI processes are the comparison), 1-GPU `--wrap true`
#      jobs that wait behind the full cluster: jobs per second;
#   4. a backlog of BENCH_PENDING pending jobs in all (MaxJobCount raised to
#      hold them), then: the main and backfill scheduling cycles from sdiag
#      over BENCH_SCHED_WINDOW (120 s: two main cycles, about two backfill
#      ones; mean, max and the last), squeue wall time (5 runs, output
#      discarded), slurmctld's RSS;
#   5. restart: slurmctld killed (SIGKILL) and started again, seconds until
#      squeue answers, with how many jobs.
#
# sacct is not measured: Slurm's accounting needs slurmdbd and a MySQL or
# MariaDB database, which the reference does not configure
# (AccountingStorageType=accounting_storage/none); the results say so.
#
# BENCH_SLURM_PROBE=1 stops after step 1 (to find the largest number of
# slurmd this host can run). The results, "key value" lines as
# bench-scale.sh writes them, go to BENCH_SLURM_RESULTS
# (bench-results/slurm-scale.txt); bench-scale.sh prints them as a Slurm
# column when given that file (make bench-scale-slurm does both).
#
# Everything runs in a private directory (not /tmp/slurm-bench, which
# setup.sh wipes: a bench-vs-slurm run may use it meanwhile) on private
# ports. Everything it starts it stops by pid: slurmctld, the slurmd
# daemons, munged when none was running; the jobs' processes (slurmstepd
# and sleep, started by those slurmd) are found by the marker
# TIDE_BENCH_SLURM=<dir> in their environment. BENCH_KEEP=1 keeps the
# directory.
#
# Environment: BENCH_NODES (2000), BENCH_PENDING (20000), BENCH_SUBMIT
# (5000), BENCH_GPUS (8), BENCH_CPUS (8 per node), BENCH_HB_WINDOW (200,
# seconds), BENCH_SCHED_WINDOW (120, seconds), BENCH_SLURM_PORT (the
# controller's, 16917; node i listens on BENCH_SLURM_NODE_PORT0 + i - 1,
# 20001 on), BENCH_SLURM_RESULTS, BENCH_SLURM_PROBE, BENCH_KEEP,
# BENCH_SLURM_MEM_FLOOR_MB (3072: the run stops when less memory than
# that is available), NO_INSTALL=1 (no apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
NODES=${BENCH_NODES:-2000}
PENDING=${BENCH_PENDING:-20000}
SUBMIT=${BENCH_SUBMIT:-5000}
GPUS=${BENCH_GPUS:-8}
CPUS=${BENCH_CPUS:-8}
HB_WINDOW=${BENCH_HB_WINDOW:-200}
SCHED_WINDOW=${BENCH_SCHED_WINDOW:-120}
CTLD_PORT=${BENCH_SLURM_PORT:-16917}
NODE_PORT0=${BENCH_SLURM_NODE_PORT0:-20001}
PROBE=${BENCH_SLURM_PROBE:-0}
BENCH_SLURM_MEM_FLOOR_MB=${BENCH_SLURM_MEM_FLOOR_MB:-3072}
RESULTS=${BENCH_SLURM_RESULTS:-$ROOT/bench-results/slurm-scale.txt}
case $RESULTS in /*) ;; *) RESULTS=$OLDPWD/$RESULTS ;; esac # relative to where it was run

for v in NODES PENDING SUBMIT GPUS CPUS HB_WINDOW SCHED_WINDOW CTLD_PORT NODE_PORT0 BENCH_SLURM_MEM_FLOOR_MB; do
  case ${!v} in
  '' | *[!0-9]*)
    case $v in
    CTLD_PORT) name=BENCH_SLURM_PORT ;;
    NODE_PORT0) name=BENCH_SLURM_NODE_PORT0 ;;
    BENCH_*) name=$v ;;
    *) name=BENCH_$v ;;
    esac
    echo "bench-scale-slurm: $name=${!v} is not a number" >&2
    exit 1
    ;;
  esac
done
[ "$NODES" -ge 2 ] || { echo "bench-scale-slurm: BENCH_NODES must be at least 2" >&2; exit 1; }
[ "$GPUS" -ge 1 ] || { echo "bench-scale-slurm: BENCH_GPUS must be at least 1" >&2; exit 1; }
[ $((NODE_PORT0 + NODES - 1)) -le 32767 ] ||
  { echo "bench-scale-slurm: node ports $NODE_PORT0-$((NODE_PORT0 + NODES - 1)) reach the ephemeral range; lower BENCH_SLURM_NODE_PORT0" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench-scale-slurm: must run as root (slurmd, mknod, munged)" >&2; exit 1; }

# Slurm's commands, never Tide's same-named links (./bin may be on PATH).
SB=/usr/sbin UB=/usr/bin
if [ -z "${NO_INSTALL:-}" ] && ! dpkg -s slurm-wlm munge >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y slurm-wlm munge >&2 || { apt-get update >&2 && apt-get install -y slurm-wlm munge >&2; }
fi
for b in $SB/slurmctld $SB/slurmd $UB/sbatch $UB/squeue $UB/sinfo $UB/sdiag $SB/munged $UB/munge; do
  [ -x "$b" ] || { echo "bench-scale-slurm: $b missing (apt-get install slurm-wlm munge)" >&2; exit 1; }
done
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_free "$CTLD_PORT" || { echo "bench-scale-slurm: port $CTLD_PORT is in use (set BENCH_SLURM_PORT)" >&2; exit 1; }
busy=$(ss -Htln | awk -v lo="$NODE_PORT0" -v hi=$((NODE_PORT0 + NODES - 1)) '{ n = split($4, a, ":"); p = a[n] + 0; if (p >= lo && p <= hi) print p }' | head -3)
[ -z "$busy" ] || { echo "bench-scale-slurm: node ports in use: $busy (set BENCH_SLURM_NODE_PORT0)" >&2; exit 1; }

B=$(mktemp -d "${TMPDIR:-/tmp}/tide-bench-scale-slurm.XXXXXX")
chmod 755 "$B"
mkdir -p "$B"/{etc,state,spool,log,run,fake,jobs}
chmod 1777 "$B/jobs"
CONF=$B/etc/slurm.conf
export SLURM_CONF=$CONF
# The marker that the daemons carry in their environment, and with them
# the slurmstepd they start, and the jobs (sbatch exports its own
# environment, which has it): what the daemons leave behind can be found
# by it. This shell does not carry it. (Not sbatch --export=ALL,VAR:
# a list of variables makes slurmd run `su - USER` for every job to
# read the user's login environment, a login shell per job.)
MARK=TIDE_BENCH_SLURM=$B
CTLD_PID=
SLURMD_PIDS=()
MUNGED_PID=
mkdir -p "$(dirname "$RESULTS")"
: >"$RESULTS"

ours() { # the pids of the live processes that carry this run's marker
  { grep -lzxF "$MARK" /proc/[0-9]*/environ 2>/dev/null || true; } | awk -F/ '{ print $3 }'
}
pss_mb() { # the PSS of the given pids (shared pages shared out), MiB
  { printf '/proc/%s/smaps_rollup\n' "$@" | xargs grep -h '^Pss:' 2>/dev/null || true; } | awk '{ t += $2 } END { printf "%.0f\n", t / 1024 }'
}
cleanup() {
  set +e
  echo "bench-scale-slurm: stopping" >&2
  # The daemons (slurmctld first: no more scheduling), then what they
  # started. Not scancel: with 100,000 jobs a busy slurmctld may not
  # answer it for minutes, and slurmd with running jobs may not exit on
  # SIGTERM.
  local p left
  for p in $CTLD_PID "${SLURMD_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 150); do
    left=
    for p in $CTLD_PID "${SLURMD_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && { left=$p; break; }; done
    [ -n "$left" ] || break
    sleep 0.1
  done
  for p in $CTLD_PID "${SLURMD_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  # The jobs' processes (slurmstepd, sleep) and anything else the
  # daemons started: the marker in their environment.
  left=$(ours)
  if [ -n "$left" ]; then
    echo "bench-scale-slurm: killing $(grep -c . <<<"$left") processes the daemons started (slurmstepd and the jobs)" >&2
    # shellcheck disable=SC2086 # one pid a word
    kill -KILL $left 2>/dev/null
  fi
  if [ -n "$MUNGED_PID" ]; then kill -TERM "$MUNGED_PID" 2>/dev/null; fi
  if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "bench-scale-slurm: kept $B" >&2; else rm -rf "$B"; fi
}
trap cleanup EXIT

record() { tee -a "$RESULTS" >&2; }
nowns() { date +%s%N; }
since() { awk -v a="$(nowns)" -v b="$1" 'BEGIN { printf "%.2f\n", (a - b) / 1e9 }'; }
rss_mb() { awk '/^VmRSS:/ { printf "%.0f\n", $2 / 1024 }' "/proc/$1/status"; }
ticks() { # utime + stime of the given pids, in clock ticks
  local p
  { printf '/proc/%s/stat\n' "$@" | xargs cat 2>/dev/null || true; } | awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }'
}
HZ=$(getconf CLK_TCK)
cpu_pct() { # ticks0 ticks1 seconds
  awk -v a="$1" -v b="$2" -v s="$3" -v hz="$HZ" 'BEGIN { printf "%.1f\n", 100 * (b - a) / hz / s }'
}
memavail() { awk '/^MemAvailable:/ { printf "%.0f\n", $2 / 1024 }' /proc/meminfo; }
# Other people's work shares this host: a run that would leave less than
# BENCH_SLURM_MEM_FLOOR_MB of memory available stops (the evidence of
# the limit) instead of pushing the host into the OOM killer.
FLOOR=$BENCH_SLURM_MEM_FLOOR_MB
mem_guard() { # what is being done
  local m
  m=$(memavail)
  if [ "$m" -lt "$FLOOR" ]; then
    echo "stopped_by memory: MemAvailable ${m} MiB < ${FLOOR} MiB while $1" | record
    exit 1
  fi
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' /; }

# The measuring helper of bench-scale.sh (its time and cli subcommands).
go build -o "$B/benchscale" ./test/tools/benchscale
BS=$B/benchscale

# ---------------------------------------------------------------- munge
# As setup.sh: the system's munged, started here when none runs.
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge
if [ -s /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; then
  echo "bench-scale-slurm: munged already running (pid $(cat /run/munge/munged.pid)), not ours: reused" >&2
else
  runuser -u munge -- $SB/munged --pid-file=/run/munge/munged.pid
  for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
  MUNGED_PID=$(cat /run/munge/munged.pid)
fi
$UB/munge -n | $UB/unmunge >/dev/null

# ---------------------------------------------------------------- config
# setup.sh's configuration, but for MaxJobCount (its 50,000 may not hold
# the backlog) and the private paths and ports.
for g in $(seq 0 $((GPUS - 1))); do mknod "$B/fake/nvidia$g" c 195 "$g"; done
MAXJOBS=$((PENDING + NODES + 1000))
[ "$MAXJOBS" -ge 50000 ] || MAXJOBS=50000
LAST_PORT=$((NODE_PORT0 + NODES - 1))
cat >"$CONF" <<EOF
# bench-scale-slurm.sh: the reference single-host Slurm (setup.sh's
# configuration), $NODES nodes, loopback only.
ClusterName=scale
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$NODE_PORT0
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$B/state
SlurmdSpoolDir=$B/spool/%n
SlurmctldPidFile=$B/run/slurmctld.pid
SlurmdPidFile=$B/run/slurmd-%n.pid
SlurmctldLogFile=$B/log/slurmctld.log
SlurmdLogFile=$B/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MaxJobCount=$MAXJOBS
MinJobAge=30
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=n[1-$NODES] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$NODE_PORT0-$LAST_PORT] CPUs=$CPUS RealMemory=4000 Gres=gpu:$GPUS State=UNKNOWN
PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
cat >"$B/etc/gres.conf" <<EOF
NodeName=n[1-$NODES] Name=gpu File=$B/fake/nvidia[0-$((GPUS - 1))]
EOF
for i in $(seq "$NODES"); do mkdir -p "$B/spool/n$i"; done

start_ctld() {
  env "$MARK" setsid $SB/slurmctld -D -f "$CONF" </dev/null >>"$B/log/slurmctld.stdout" 2>&1 &
  CTLD_PID=$!
}

{
  echo "# bench-scale-slurm $(date -Is) host=$(hostname) cpus=$(nproc) mem=$(free -g | awk '/^Mem:/ { print $2 "G" }') $($SB/slurmctld -V)"
  echo "# limits: nofile=$(ulimit -n) nproc=$(ulimit -u) pid_max=$(cat /proc/sys/kernel/pid_max) somaxconn=$(cat /proc/sys/net/core/somaxconn)"
  echo "nodes $NODES"
  echo "gpus $GPUS"
  echo "max_job_count $MAXJOBS"
  echo "load_start $(loadavg)"
  echo "mem_available_mb_start $(memavail)"
} | record
echo "== bench-scale-slurm: $NODES slurmd × $GPUS fake GPUs, $PENDING pending jobs, slurmctld on 127.0.0.1:$CTLD_PORT, work in $B" >&2
start_ctld
for _ in $(seq 300); do $UB/scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
kill -0 "$CTLD_PID" 2>/dev/null || { cat "$B/log/slurmctld.stdout" "$B/log/slurmctld.log" >&2; echo "bench-scale-slurm: slurmctld died" >&2; exit 1; }

# ---------------------------------------------------------------- 1. registration
idle_count() { (timeout 60 $UB/sinfo -h -N -t idle -o %N 2>/dev/null || true) | wc -l; }
c0=$(ticks "$CTLD_PID")
t0=$(nowns)
for i in $(seq "$NODES"); do
  env "$MARK" setsid $SB/slurmd -D -N "n$i" -f "$CONF" </dev/null >"$B/log/slurmd-n$i.stdout" 2>&1 &
  SLURMD_PIDS+=($!)
done
echo "slurmd_spawn_s $(since "$t0")" | record
last=$(nowns) idle=0
while :; do
  idle=$(idle_count)
  [ "$idle" -ge "$NODES" ] && break
  alive=0
  for p in "${SLURMD_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
  if [ $(($(nowns) - last)) -gt 10000000000 ]; then
    echo "bench-scale-slurm: $idle/$NODES nodes idle, $alive slurmd alive after $(since "$t0")s, load $(loadavg), MemAvailable $(awk '/^MemAvailable:/ { printf "%.1fG", $2 / 1048576 }' /proc/meminfo)" >&2
    last=$(nowns)
  fi
  mem_guard "$idle of $NODES nodes idle, $alive slurmd alive"
  if [ "$alive" -lt "$NODES" ] || [ $(($(nowns) - t0)) -gt 600000000000 ]; then
    echo "bench-scale-slurm: only $idle of $NODES nodes idle, $alive of $NODES slurmd alive after $(since "$t0")s; see $B/log (BENCH_KEEP=1 keeps it)" >&2
    $UB/sinfo -h -N -o '%T %E' | sort | uniq -c | sort -rn | head >&2
    exit 1
  fi
  sleep 0.5
done
echo "idle_s $(since "$t0")" | record
# The CPU that took: slurmctld's (the registrations), and the slurmd
# daemons' (their start-up: the emulation's cost, not the protocol's).
echo "reg_ctld_cpu_s $(awk -v a="$c0" -v b="$(ticks "$CTLD_PID")" -v hz="$HZ" 'BEGIN { printf "%.1f\n", (b - a) / hz }')" | record
echo "reg_slurmd_cpu_s $(awk -v t="$(ticks "${SLURMD_PIDS[@]}")" -v hz="$HZ" 'BEGIN { printf "%.1f\n", t / hz }')" | record
echo "slurmd_pss_mb $(pss_mb "${SLURMD_PIDS[@]}")" | record
echo "slurmd_threads $(for p in "${SLURMD_PIDS[@]}"; do awk '/^Threads:/ { print $2 }' "/proc/$p/status"; done | awk '{ t += $1 } END { print t }')" | record
echo "ctld_idle_rss_mb $(rss_mb "$CTLD_PID")" | record
echo "mem_available_mb_registered $(memavail)" | record
if [ "$PROBE" = 1 ]; then
  echo "load_end $(loadavg)" | record
  echo "bench-scale-slurm: probe done ($NODES slurmd idle); results in $RESULTS" >&2
  exit 0
fi

# ---------------------------------------------------------------- 2. heartbeats
c0=$(ticks "$CTLD_PID") d0=$(ticks "${SLURMD_PIDS[@]}") w0=$(nowns)
sleep "$HB_WINDOW"
c1=$(ticks "$CTLD_PID") d1=$(ticks "${SLURMD_PIDS[@]}") w=$(since "$w0")
echo "hb_cpu_pct $(cpu_pct "$c0" "$c1" "$w")" | record
echo "slurmd_cpu_pct $(cpu_pct "$d0" "$d1" "$w")" | record
echo "hb_window_s $w" | record
echo "idle_rss_mb $(rss_mb "$CTLD_PID")" | record

# ---------------------------------------------------------------- 3. fill, submissions
running() { (timeout 60 $UB/squeue -h -t R -o %i 2>/dev/null || true) | wc -l; }
t0=$(nowns)
# Submissions that fail (a busy slurmctld times out) are made again,
# three rounds at most: every node needs its job.
want=$NODES failed=0
for _ in 1 2 3; do
  [ "$want" -gt 0 ] || break
  out=$(env "$MARK" "$BS" cli -timeout 3h -n "$want" -clients 16 -- $UB/sbatch -N1 --gpus-per-node="$GPUS" -o /dev/null -D "$B/jobs" \
    --wrap 'exec sleep 1000000')
  want=$(awk '$1 == "failed" { print $2 }' <<<"$out")
  failed=$((failed + want))
done
echo "fill_failed $failed" | record
last=$(nowns)
while [ "$(running)" -lt "$NODES" ]; do
  if [ $(($(nowns) - last)) -gt 10000000000 ]; then
    echo "bench-scale-slurm: $(running)/$NODES fill jobs running after $(since "$t0")s" >&2
    last=$(nowns)
  fi
  [ $(($(nowns) - t0)) -lt 900000000000 ] || { echo "bench-scale-slurm: the fill jobs did not all start in 15 minutes" >&2; exit 1; }
  mem_guard "filling: $(running) of $NODES jobs running"
  sleep 1
done
echo "fill_running_s $(since "$t0")" | record
# Slurm marks a job running before its slurmstepd has started it: the
# processes of every job (slurmstepd and sleep, two a job), or two
# minutes more at most. What they cost this host, then.
jobprocs() { ours | grep -vxF -f <(printf '%s\n' "${SLURMD_PIDS[@]}" "$CTLD_PID") || true; }
for _ in $(seq 120); do
  jp=$(jobprocs)
  [ "$(grep -c . <<<"$jp")" -ge $((2 * NODES)) ] && break
  mem_guard "launching the fill jobs: $(grep -c . <<<"$jp") job processes"
  sleep 1
done
echo "fill_launched_s $(since "$t0")" | record
jobprocs=$(jobprocs)
echo "fill_job_procs $(grep -c . <<<"$jobprocs")" | record
# shellcheck disable=SC2086 # one pid a word
echo "fill_job_pss_mb $(pss_mb $jobprocs)" | record
echo "mem_available_mb_filled $(memavail)" | record
for c in 16 64; do
  env "$MARK" "$BS" cli -timeout 3h -n "$SUBMIT" -clients "$c" -- $UB/sbatch --gpus=1 -o /dev/null -D "$B/jobs" --wrap true |
    awk -v c="$c" '$1 == "jobs_per_s" { print "cli_submit_" c "_per_s", $2 } $1 == "failed" { print "cli_submit_" c "_failed", $2 }' | record
done

# ---------------------------------------------------------------- 4. backlog
left=$((PENDING - 2 * SUBMIT))
if [ "$left" -gt 0 ]; then
  env "$MARK" "$BS" cli -timeout 3h -n "$left" -clients 64 -- $UB/sbatch --gpus=1 -o /dev/null -D "$B/jobs" --wrap true |
    awk '$1 == "jobs_per_s" { print "backlog_per_s", $2 } $1 == "failed" { print "backlog_failed", $2 }' | record
fi
echo "pending $($UB/squeue -h -t PD -o %i | wc -l)" | record
# sdiag's cycle statistics since the reset (microseconds in, ms out).
$UB/sdiag -r >/dev/null
sleep "$SCHED_WINDOW"
$UB/sdiag >"$B/sdiag.txt"
awk '
  /^Main schedule statistics/ { s = "main" } /^Backfilling stats/ { s = "bf" }
  /^Latency for|^Remote Procedure Call|^Pending RPC/ { s = "" }
  s != "" && /^[\t ]+(Last cycle|Max cycle|Mean cycle|Total cycles|Mean depth cycle|Depth Mean|Last queue length):/ {
    k = $0; sub(/^[\t ]+/, "", k); v = k; sub(/:.*/, "", k); sub(/^[^:]*:[\t ]*/, "", v); sub(/[ \t].*/, "", v)
    gsub(/ /, "_", k); k = tolower(k)
    if (k ~ /cycle$/ && k !~ /^total|depth/) printf "sched_%s_%s_ms %.1f\n", s, k, v / 1000
    else printf "sched_%s_%s %s\n", s, k, v
  }' "$B/sdiag.txt" | record
echo "sched_window_s $SCHED_WINDOW" | record
"$BS" time -n 5 -- $UB/squeue | sed 's/^/squeue_/' | record
echo "rss_mb $(rss_mb "$CTLD_PID")" | record
echo "sacct_unavailable needs_slurmdbd" | record
echo "# sacct: $($UB/sacct -a -X 2>&1 | head -1)" | record

# ---------------------------------------------------------------- 5. restart
echo "jobs_before $($UB/squeue -h -o %i | wc -l)" | record
kill -KILL "$CTLD_PID"
wait "$CTLD_PID" 2>/dev/null || true
t0=$(nowns)
start_ctld
while :; do
  if out=$(timeout 60 $UB/squeue -h -o %i 2>/dev/null); then
    echo "restart_serving_s $(since "$t0")" | record
    echo "restart_jobs $(printf '%s' "$out" | grep -c .)" | record
    break
  fi
  kill -0 "$CTLD_PID" 2>/dev/null || { echo "bench-scale-slurm: slurmctld died after the restart" >&2; tail "$B/log/slurmctld.log" >&2; exit 1; }
  [ $(($(nowns) - t0)) -lt 600000000000 ] || { echo "bench-scale-slurm: squeue did not answer within 10 minutes of the restart" >&2; exit 1; }
  sleep 0.2
done
echo "restart_rss_mb $(rss_mb "$CTLD_PID")" | record
echo "load_end $(loadavg)" | record

echo "bench-scale-slurm: results in $RESULTS" >&2
