#!/usr/bin/env bash
# bench-cluster.sh — measure a running batch system through its Slurm
# commands (sbatch, squeue, sinfo, scancel on PATH) and print one TSV row
# per measure: "key<TAB>unit<TAB>median<TAB>p99<TAB>n". The same script
# measures Tide (TARGET=tide, after up.sh) and the reference Slurm
# (TARGET=slurm, after ../shared/slurm-reference/setup.sh), so both columns
# of bench-vs-slurm come from identical loops.
#
# Environment: CTLD_PID (controller pid, for memory), NJOBS (1000),
# DRAIN_N (3: runs of each drain),
# PENDING (10000), START_N (20), LAT_N (20), WORK (scratch dir), TARGET
# (tide or slurm; default: tide when the sbatch on PATH is a link to tide),
# CONTAINER_IMAGE (tide-test/bb, imported by up.sh), PARTS (which
# measures to take, default "drain array start container pending"),
# SUFFIX (appended to every row's key, e.g. _cgroups for a second pass
# of some measures on another configuration).
#
# start_latency_container (submit -> first output line of a
# --container-image job) is measured only on Tide, when a node has the
# feature containerd and a probe job runs the image: Slurm's
# --container-image is another mechanism (OCI bundles), not compared.
set -uo pipefail
NJOBS=${NJOBS:-1000}
DRAIN_N=${DRAIN_N:-3}
PARTS=" ${PARTS:-drain array start container pending} "
SUFFIX=${SUFFIX:-}
part() { [[ $PARTS == *" $1 "* ]]; }
PENDING=${PENDING:-10000}
START_N=${START_N:-20}
LAT_N=${LAT_N:-20}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
cd "$WORK" || exit 1

log() { echo "[$(date +%T)] $*" >&2; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", (a-b)*1000}'; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a-b}'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b == 0) print 0; else printf "%.2f", a/b}'; }
# row key unit values... -> key unit median p99 n
row() {
  local key=$1$SUFFIX unit=$2; shift 2
  printf '%s\n' "$@" | sort -g | awk -v k="$key" -v u="$unit" '{v[NR]=$1} END{
    if (NR == 0) { printf "%s\t%s\t-\t-\t0\n", k, u; exit }
    m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2
    i = int(NR * 0.99 + 0.999); if (i < 1) i = 1; if (i > NR) i = NR
    printf "%s\t%s\t%.4g\t%.4g\t%d\n", k, u, m, v[i], NR }'
}
qlen() { squeue -h -o %i 2>/dev/null | wc -l; }
wait_empty() { # at most 600 s
  local i
  for ((i = 0; i < 6000; i++)); do [ "$(qlen)" = 0 ] && return 0; sleep 0.1; done
  log "queue did not drain"; return 1
}
submit_loop() { local i ok=0; for ((i = 0; i < $1; i++)); do sbatch "${@:2}" >/dev/null 2>>"$WORK/sbatch.err" && ok=$((ok + 1)); done; echo "$ok"; }
submit_par() { # total par args... (the first total%par clients submit one more)
  local total=$1 par=$2 k; shift 2
  for ((k = 0; k < par; k++)); do submit_loop $((total / par + (k < total % par))) "$@" > "$WORK/ok.$k" & done
  wait
  cat "$WORK"/ok.* | awk '{s+=$1} END{print s}'; rm -f "$WORK"/ok.*
}
# speed_ref: ms per iteration of a shell loop running /bin/true, taken
# before each drain. The drains of a CPU-bound system follow the
# machine's speed, which on a shared VM drifts within minutes; this row
# shows how fast the machine was while each column was measured.
speed_ref() {
  local i t0=$EPOCHREALTIME
  for ((i = 0; i < 300; i++)); do /bin/true; done
  awk -v a="$EPOCHREALTIME" -v b="$t0" 'BEGIN{printf "%.3f", (a-b)*1000/300}'
}
rss_mib() { [ -n "${CTLD_PID:-}" ] && awk '$1=="VmRSS:" {printf "%.1f", $2/1024}' "/proc/$CTLD_PID/status"; }

wait_empty
if part drain; then
# --- submission rate and drain: NJOBS runnable jobs from 1, 4, 16 clients
# (DRAIN_N runs each: the median is the figure; a 2-core VM's speed
# drifts by a fifth within minutes)
SPEED=()
for par in 1 4 16; do
  R=() D=()
  for ((rep = 0; rep < DRAIN_N; rep++)); do
    wait_empty; sleep 1
    SPEED+=("$(speed_ref)")
    t0=$EPOCHREALTIME
    if [ "$par" = 1 ]; then ok=$(submit_loop "$NJOBS" --wrap true -o /dev/null)
    else ok=$(submit_par "$NJOBS" "$par" --wrap true -o /dev/null); fi
    t1=$EPOCHREALTIME
    wait_empty
    t2=$EPOCHREALTIME
    log "$par client(s): $ok/$NJOBS submitted in $(sub "$t1" "$t0") s, drained at $(sub "$t2" "$t0") s"
    R+=("$(div "$ok" "$(sub "$t1" "$t0")")") D+=("$(sub "$t2" "$t0")")
  done
  row "submit_rate_$par" jobs/s "${R[@]}"
  row "drain_$par" s "${D[@]}"
done
row speed_ref ms "${SPEED[@]}"
fi

if part array; then
# --- one NJOBS-task array against NJOBS separate jobs (drain_1 above):
# time to submit, and until every task has run
wait_empty; sleep 1
t0=$EPOCHREALTIME
sbatch --array=0-$((NJOBS - 1)) --wrap true -o /dev/null >/dev/null 2>>"$WORK/sbatch.err"
t1=$EPOCHREALTIME
wait_empty
t2=$EPOCHREALTIME
log "array of $NJOBS: submitted in $(ms "$t1" "$t0") ms, drained at $(sub "$t2" "$t0") s"
row array_submit ms "$(ms "$t1" "$t0")"
row array_drain s "$(sub "$t2" "$t0")"
fi

if part start; then
# --- submit -> start of one job on an idle cluster
LAT=()
for ((i = 1; i <= START_N; i++)); do
  wait_empty
  sleep 0.$((RANDOM % 9 + 1))
  f=$WORK/start.$i; rm -f "$f"
  t0=$EPOCHREALTIME
  sbatch -o /dev/null --wrap "date +%s.%N > $f.tmp && mv $f.tmp $f" >/dev/null
  for _ in $(seq 3000); do [ -s "$f" ] && break; sleep 0.002; done
  [ -s "$f" ] && LAT+=("$(ms "$(cat "$f")" "$t0")")
done
log "submit->start: ${LAT[*]}"
row start_latency ms "${LAT[@]}"
fi

if part container; then
# --- submit -> first output line of a process job and a container job
# (Tide only; see the header)
if [ -z "${TARGET:-}" ]; then
  # sbatch --version says "slurm 22.05.8" on both; Tide's sbatch is a link to tide.
  if [ "$(basename "$(readlink -f "$(command -v sbatch)")")" = tide ]; then TARGET=tide; else TARGET=slurm; fi
fi
CONTAINER_IMAGE=${CONTAINER_IMAGE:-tide-test/bb}
# first_line ARGS... -> ms from submit until the job's output file has a line
first_line() {
  local f=$WORK/first.$RANDOM.$i t0 _
  rm -f "$f"
  t0=$EPOCHREALTIME
  sbatch -o "$f" "$@" --wrap 'echo started' >/dev/null || return 1
  for _ in $(seq 5000); do [ -s "$f" ] && break; sleep 0.002; done
  [ -s "$f" ] || return 1
  ms "$EPOCHREALTIME" "$t0"
  rm -f "$f"
}
container_ready() {
  [ "$TARGET" = tide ] || return 1
  sinfo -h -N -o '%f' | tr ',' '\n' | grep -x containerd >/dev/null || { log "no node has the feature containerd: no container row"; return 1; }
  wait_empty
  local probe=$WORK/probe.out id _
  rm -f "$probe"
  id=$(sbatch --parsable -o "$probe" --container-image="$CONTAINER_IMAGE" --wrap 'echo ok') || { log "container probe refused: no container row"; return 1; }
  for _ in $(seq 600); do [ -z "$(squeue -h -j "$id" -t PENDING,RUNNING,COMPLETING -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  grep -x ok "$probe" >/dev/null 2>&1 || { log "container probe job $id printed no ok (image $CONTAINER_IMAGE imported?): no container row"; return 1; }
}
if container_ready; then
  PROC=() CONT=()
  for ((i = 1; i <= START_N; i++)); do
    wait_empty; sleep 0.$((RANDOM % 9 + 1))
    v=$(first_line) && PROC+=("$v")
    wait_empty; sleep 0.$((RANDOM % 9 + 1))
    v=$(first_line --container-image="$CONTAINER_IMAGE") && CONT+=("$v")
  done
  log "submit->first line, process: ${PROC[*]}"
  log "submit->first line, container: ${CONT[*]}"
  row first_line_process ms "${PROC[@]}"
  row start_latency_container ms "${CONT[@]}"
fi
fi

if part pending; then
# --- CLI latency and controller memory with PENDING held jobs
wait_empty; sleep 1
row rss_idle MiB "$(rss_mib)"
log "filling $PENDING held jobs"
t0=$EPOCHREALTIME
ok=$(submit_par "$PENDING" 16 --hold --wrap true -o /dev/null)
log "filled $ok held jobs in $(sub $EPOCHREALTIME "$t0") s"
sleep 3
row rss_pending MiB "$(rss_mib)"
A=(); for ((i = 0; i < LAT_N; i++)); do t0=$EPOCHREALTIME; squeue >/dev/null; A+=("$(ms $EPOCHREALTIME "$t0")"); done
row squeue_pending ms "${A[@]}"
id=$(squeue -h -o %i | head -1)
A=(); for ((i = 0; i < LAT_N; i++)); do t0=$EPOCHREALTIME; squeue -j "$id" >/dev/null; A+=("$(ms $EPOCHREALTIME "$t0")"); done
row squeue_j_pending ms "${A[@]}"
A=(); for ((i = 0; i < LAT_N; i++)); do t0=$EPOCHREALTIME; sinfo >/dev/null; A+=("$(ms $EPOCHREALTIME "$t0")"); done
row sinfo_pending ms "${A[@]}"
A=(); for ((i = 0; i < LAT_N; i++)); do t0=$EPOCHREALTIME; sbatch --hold --wrap true -o /dev/null >/dev/null; A+=("$(ms $EPOCHREALTIME "$t0")"); done
row sbatch_pending ms "${A[@]}"
t0=$EPOCHREALTIME
scancel --state=PENDING --user="$(id -un)"
wait_empty
row cancel_all_pending s "$(sub $EPOCHREALTIME "$t0")"
fi
