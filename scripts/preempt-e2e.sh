#!/usr/bin/env bash
# preempt-e2e.sh — sharing the cluster, end to end (issue 5), on a private
# two-node local cluster (2 × 8 fake GPUs) with three queues:
#
#   1. borrow and reclaim: queue qa runs two 8-GPU training jobs, the
#      second on GPUs it borrows from qb; qb submits; the borrower gets
#      SIGUSR1, writes a checkpoint file, acknowledges with
#      `tide checkpoint-done`, is requeued, and restarts once qb's job is
#      done with SLURM_RESTART_COUNT=1 and its checkpoint file there; its
#      output file keeps the first run's lines;
#   2. a debug job is evicted (PREEMPTED, not requeued) before a training
#      job when a higher-level job of the same queue needs their GPUs;
#   3. a low-level job that a stream of higher-level jobs keeps passing
#      becomes Starving, rises, and runs.
#
# It starts the cluster with scripts/up.sh (TIDE_RUN, TIDE_PORT, TIDE_BIN
# as there; default a temporary run directory and port 6830) and stops it
# with scripts/down.sh, also on failure. `make test` runs it through
# test/integration (TestPreemptScript). Exit status 0 when every check
# holds; the first failed check is printed with the cluster's view.
# PARTS=13 runs only parts 1 and 3.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export TIDE_RUN=${TIDE_RUN:-$(mktemp -d /tmp/tide-preempt.XXXXXX)}
export TIDE_PORT=${TIDE_PORT:-6830}
export TIDE_NODES=2 TIDE_CONTAINERD=off
export TIDE_CTLD_EXTRA='
queues:
  - {name: qa, guaranteed: 8, cap: 16}
  - {name: qb, guaranteed: 8, cap: 16}
  - {name: qc, guaranteed: 0, cap: 16}
qos:
  - {name: training, min_runtime: 0s, grace_time: 60s}
  - {name: batch, min_runtime: 0s}
scheduler:
  starvation_age: 6s
'
BIN=${TIDE_BIN:-$ROOT/bin}

log() { echo "[$(date +%T)] $*"; }
cleanup() { "$ROOT/scripts/down.sh" >/dev/null 2>&1 || true; }
trap cleanup EXIT
fail() {
  echo "preempt-e2e: FAIL: $*" >&2
  squeue -o '%.6i %.8a %.10q %.3t %.10M %R' >&2 2>/dev/null || true
  [ -n "${SHOW:-}" ] && tide events "$SHOW" >&2 2>/dev/null
  tail -20 "$TIDE_RUN/tidectld.log" >&2
  exit 1
}

"$ROOT/scripts/up.sh" || fail "the cluster did not start"
# shellcheck disable=SC1091
. "$TIDE_RUN/env.sh"
WORK=$TIDE_RUN/work
mkdir -p "$WORK" && chmod 777 "$WORK" && cd "$WORK" || exit 1

# state ID: the job's state word.
state() { squeue -h -j "$1" -o %T 2>/dev/null || true; }
# wait_for SECONDS DESCRIPTION COMMAND...: poll until COMMAND succeeds.
wait_for() {
  local t=$1 what=$2 i
  shift 2
  for ((i = 0; i < t * 5; i++)); do "$@" && return 0; sleep 0.2; done
  fail "timed out after ${t}s waiting for $what"
}
running() { [ "$(state "$1")" = RUNNING ]; }
ended() { case $(state "$1") in PENDING | RUNNING | COMPLETING | SUSPENDED) return 1 ;; esac; }
submit() { sbatch --parsable "$@" | cut -d';' -f1; }

# The training script: resumes from its checkpoint when there is one;
# otherwise works until SIGUSR1, then checkpoints, acknowledges and exits.
cat > train.sh <<EOF
#!/bin/bash
export PATH=$BIN:\$PATH
echo "start restart=\${SLURM_RESTART_COUNT:-0}"
ck=ckpt.\$SLURM_JOB_ID
if [ -f "\$ck" ]; then echo "resumed from \$(cat "\$ck")"; sleep 1; echo finished; exit 0; fi
trap 'echo step42 > "\$ck"; echo checkpointed; tide checkpoint-done; exit 0' USR1
while :; do sleep 0.2; done
EOF
chmod +x train.sh

PARTS=${PARTS:-123}
if [[ $PARTS == *1* ]]; then
log "1. borrow and reclaim"
a1=$(submit -A qa --qos training -N1 --gpus-per-node=8 -t 10:00 -o a-%j.out train.sh) || fail "submit a1"
wait_for 20 "a1 to run" running "$a1"
a2=$(submit -A qa --qos training -N1 --gpus-per-node=8 -t 10:00 -o a-%j.out train.sh) || fail "submit a2"
wait_for 20 "a2 to run on borrowed GPUs" running "$a2"
# RUNNING is the controller's word; the checkpoint this scenario checks
# needs the script itself running (a job reclaimed before its launch is
# requeued without one).
wait_for 20 "a2's script to start" grep -q "start restart=0" "a-$a2.out"
scontrol show job "$a2" | grep -q 'Borrowing=YES' || { SHOW=$a2; fail "job $a2 does not show Borrowing=YES"; }
log "qa runs $a1 and $a2 (borrowing from qb)"
b1=$(submit -A qb --qos training -N1 --gpus-per-node=8 -t 1:00 -o b-%j.out --wrap 'sleep 4') || fail "submit b1"
wait_for 30 "the borrower $a2 to be requeued" bash -c "[ \"\$(squeue -h -j $a2 -o %T)\" = PENDING ]"
wait_for 30 "qb's job $b1 to run" running "$b1"
log "qb's $b1 runs; $a2 was requeued"
wait_for 60 "$a2 to restart and finish" bash -c "[ \"\$(sacct -n -X -P -j $a2 -o State | head -1)\" = COMPLETED ]"
out=$(cat "a-$a2.out")
for want in "start restart=0" checkpointed "start restart=1" "resumed from step42" finished; do
  grep -q "$want" <<<"$out" || { SHOW=$a2; fail "output of $a2 lacks '$want': $out"; }
done
[ "$(sacct -n -X -P -j "$a2" -o Restarts)" = 1 ] || fail "sacct Restarts of $a2 is not 1"
tide events "$a2" | grep -qi preempt || { SHOW=$a2; fail "no preempt event in the trail of $a2"; }
running "$a1" || fail "the lender's reclaim hit $a1, which ran on qa's own share"
log "$a2 checkpointed, was requeued and resumed (SLURM_RESTART_COUNT=1); $a1 untouched"
scancel "$a1"
wait_for 20 "$a1 to end" ended "$a1"

fi

if [[ $PARTS == *2* ]]; then
log "2. a debug job is evicted before a training job"
t1=$(submit -A qc --qos training -N1 --gpus-per-node=8 -t 10:00 -o t-%j.out --wrap 'sleep 600') || fail "submit t1"
wait_for 20 "training $t1 to run" running "$t1"
d1=$(submit -A qc --qos debug -N1 --gpus-per-node=8 -t 10:00 -o d-%j.out --wrap 'sleep 600') || fail "submit d1"
wait_for 20 "debug $d1 to run" running "$d1"
h1=$(submit -A qc --qos training --priority 8 -N1 --gpus-per-node=8 -t 1:00 -o h-%j.out --wrap 'sleep 2') || fail "submit h1"
wait_for 40 "the level-8 job $h1 to run" running "$h1"
wait_for 20 "debug $d1 to end PREEMPTED" bash -c "[ \"\$(sacct -n -X -P -j $d1 -o State | head -1)\" = PREEMPTED ]"
running "$t1" || { SHOW=$t1; fail "training $t1 was hit although debug $d1 was enough"; }
log "debug $d1 ended PREEMPTED (not requeued); training $t1 still runs"
scancel "$t1" "$h1"
wait_for 20 "$t1 to end" ended "$t1"

fi

if [[ $PARTS == *3* ]]; then
log "3. a starving job runs"
# The stream fills both nodes before the two-node job comes, so that it
# waits from the start (on an idle cluster it would just run).
for k in 1 2; do
  s0=$(submit -A qc --qos batch -N1 --gpus-per-node=8 -t 1:00 -o /dev/null --wrap 'sleep 3') || fail "submit stream job"
  wait_for 20 "stream job $s0 to run" running "$s0"
done
low=$(submit -A qc --qos batch --priority 1 -N2 --gpus-per-node=8 -t 1:00 -o low-%j.out --wrap 'echo low ran') || fail "submit low"
# A stream of higher-level jobs that would pass it forever without aging.
starving_seen=
for i in $(seq 1 40); do
  submit -A qc --qos batch -N1 --gpus-per-node=8 -t 1:00 -o /dev/null --wrap 'sleep 3' >/dev/null || fail "submit stream job"
  s=$(sacct -n -X -P -j "$low" -o State | head -1)
  [ "$s" = COMPLETED ] && break
  scontrol show job "$low" 2>/dev/null | grep -q 'Starving=' && starving_seen=yes
  sleep 1.5
done
[ "$i" -lt 40 ] || fail "job $low ran only once the stream of higher-level jobs stopped"
wait_for 30 "the starving job $low to complete" bash -c "[ \"\$(sacct -n -X -P -j $low -o State | head -1)\" = COMPLETED ]"
SHOW=$low
[ -n "$starving_seen" ] || tide events "$low" | grep -qi starv || fail "job $low ran but was never marked Starving"
grep -q "low ran" "low-$low.out" || fail "job $low left no output"
log "job $low was Starving, rose, and ran (after $i stream jobs)"
fi
scancel -u "$(id -un)" 2>/dev/null
echo "preempt-e2e: PASS"
