#!/usr/bin/env bash
# conformance.sh — run Slurm's own test suite (SchedMD's testsuite/python,
# local-config mode) against a fresh local Tide cluster, with Tide's
# Slurm-named commands first on PATH, and print a pass table.
#
#   SLURM_SRC=<dir holding testsuite/python> scripts/conformance.sh [pytest args...]
#   make conformance SLURM_SRC=<dir>
#
# Slurm's files are never changed. What the suite needs to find a cluster
# is made here at run time, under the private run directory:
#   - testsuite.conf (SLURM_TESTSUITE_CONF) naming an install prefix whose
#     bin/ links to Tide's commands;
#   - slurm.conf and gres.conf describing the running Tide cluster
#     (scripts/conformance/genconf.py, from scontrol show config and
#     scontrol --json show nodes|partitions): the suite reads node and
#     partition lines and Require*-style settings from them in
#     local-config mode;
#   - a pytest plugin of ours (scripts/conformance/conformance_plugin.py) that leaves
#     out the tests listed in scripts/conformance/excluded.txt (they need
#     a feature newer than Slurm 22.05 or Slurm's own daemons) and records
#     every result; scripts/conformance/table.py prints the table.
#
# The test files run are the user-facing ones (scripts/conformance/select.txt):
# sacct, salloc, sbatch, scancel, scontrol, sinfo, sprio, squeue, srun
# (steps and the task environment among them) and job arrays.
#
# Environment: SLURM_SRC (required), CONFORMANCE_RUN (the cluster's run
# directory, default ./run/conformance: a TIDE_RUN of its own, so it never
# touches `make up`'s cluster), CONFORMANCE_PORT (the controller's port,
# default: a free one from 16817), CONFORMANCE_NODES (the cluster's node
# count, default 9), CONFORMANCE_TIMEOUT_S (the whole run,
# default 5400 s: files not started by then are not run),
# CONFORMANCE_FILE_TIMEOUT (one test file, default 900 s),
# CONFORMANCE_ONLY (an extended regular expression: only the test files
# whose path matches), CONFORMANCE_TEST_TIMEOUT (one test, default 300 s, when
# python3-pytest-timeout is installed), CONFORMANCE_KEEP=1 (leave the
# cluster running afterwards), TIDE_BIN (default ./bin). Arguments are
# passed to every pytest (e.g. -k 'test_114 or test_108').
# Results: run/conformance/results/<file>.json and pytest.log; the table
# again: python3 scripts/conformance/table.py run/conformance/results [--failures].
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
HERE=$ROOT/scripts/conformance
PY=/usr/bin/python3

die() { echo "conformance: $*" >&2; exit 2; }

[ -n "${SLURM_SRC:-}" ] || die "SLURM_SRC is not set: give the directory that holds Slurm's testsuite/python
  (e.g. git -C <slurm mirror> archive <tag> testsuite | tar -x -C DIR; then SLURM_SRC=DIR)"
[ -d "$SLURM_SRC" ] || die "SLURM_SRC=$SLURM_SRC is not a directory"
SLURM_SRC=$(cd "$SLURM_SRC" && pwd)
SUITE=$SLURM_SRC/testsuite/python
[ -f "$SUITE/lib/atf.py" ] && [ -f "$SUITE/conftest.py" ] ||
  die "SLURM_SRC=$SLURM_SRC holds no Slurm python test suite (no testsuite/python/lib/atf.py and conftest.py)"
[ -x "$PY" ] || die "$PY is missing (apt-get install -y python3)"
missing=()
for m in pytest yaml requests pexpect jsonpatch jsondiff; do
  "$PY" -c "import $m" 2>/dev/null || missing+=("$m")
done
if [ "${#missing[@]}" -gt 0 ]; then
  die "$PY lacks ${missing[*]}: apt-get install -y python3-pytest python3-yaml python3-requests python3-pexpect python3-jsonpatch python3-jsondiff"
fi

BIN=${TIDE_BIN:-$ROOT/bin}
for b in tide tidectld tided sbatch squeue scontrol; do
  [ -x "$BIN/$b" ] || die "$BIN/$b missing: run make build"
done
BIN=$(cd "$BIN" && pwd)

RUN=${CONFORMANCE_RUN:-$ROOT/run/conformance}
mkdir -p "$RUN"
RUN=$(cd "$RUN" && pwd)

# A port of its own: another cluster (make up) may hold the default one.
PORT=${CONFORMANCE_PORT:-$("$PY" - <<'EOF'
import socket
for p in range(16817, 16917):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
EOF
)}
[ -n "$PORT" ] || die "no free port in 16817-16916 (set CONFORMANCE_PORT)"

# A copy of the binaries: a make build during the run (others share
# bin/) must not change the commands under test half-way.
mkdir -p "$RUN/bin"
for b in tide tidectld tided tide-stepd; do
  [ -x "$BIN/$b" ] && install -m 0755 "$BIN/$b" "$RUN/bin/$b"
done
for c in sbatch squeue scancel sinfo scontrol sacct srun salloc sprio sstat; do
  ln -sfn tide "$RUN/bin/$c"
done
BIN=$RUN/bin

export TIDE_RUN=$RUN TIDE_PORT=$PORT TIDE_BIN=$BIN
# Nine nodes: the suite's multi-node tests ask for up to 9 (a few for 18
# or 128, which stay skipped).
export TIDE_NODES=${CONFORMANCE_NODES:-9}
# Container jobs play no part in the suite: no private containerd.
export TIDE_CONTAINERD=off
stop() {
  if [ "${CONFORMANCE_KEEP:-}" = 1 ]; then
    echo "conformance: the cluster keeps running (TIDE_RUN=$RUN scripts/down.sh stops it)"
  else
    scripts/down.sh >/dev/null 2>&1 || true
  fi
}
# A fresh cluster: an earlier run's daemons and state are gone first.
scripts/down.sh >/dev/null 2>&1 || true
rm -rf "$RUN/ctld" "$RUN/nodes" "$RUN/prefix"
# The suite wants its temporary directories under /tmp.
TMPBASE=$(mktemp -d /tmp/tide-conformance.XXXXXX)
chmod 755 "$TMPBASE"
trap 'stop; rm -rf "$TMPBASE"' EXIT
scripts/up.sh | sed 's/^/conformance: /'

# The install prefix the suite is told about: its bin/ holds Tide's
# commands under Slurm's names (and nothing of Slurm's).
PREFIX=$RUN/prefix
mkdir -p "$PREFIX/bin" "$PREFIX/etc"
for c in tide sbatch squeue scancel sinfo scontrol sacct srun salloc sprio sstat; do
  [ -e "$BIN/$c" ] && ln -sfn "$BIN/$c" "$PREFIX/bin/$c"
done
# Tide has no slurmctld, slurmd or slurmdbd; the suite asks their
# version only (sbin/slurm-daemon answers with the controller's).
mkdir -p "$PREFIX/sbin"
for d in slurmctld slurmd slurmdbd; do
  ln -sfn "$HERE/sbin/slurm-daemon" "$PREFIX/sbin/$d"
done
export PATH=$PREFIX/bin:$PATH
export TIDE_SOCKET=$RUN/tidectld.sock
"$PY" "$HERE/genconf.py" --prefix "$PREFIX" --slurm-src "$SLURM_SRC" --out "$RUN"
export SLURM_TESTSUITE_CONF=$RUN/testsuite.conf
export SLURM_CONF=$PREFIX/etc/slurm.conf

# The test files of the layout this suite has: tests/test_1NN_*.py
# (Slurm 23.02 and later), or tests/commands/<command>/ (22.05).
mapfile -t FILES < <("$PY" "$HERE/select.py" "$SUITE" "$HERE/select.txt")
if [ -n "${CONFORMANCE_ONLY:-}" ]; then
  # Only the files whose path matches this extended regular expression.
  mapfile -t FILES < <(printf '%s\n' "${FILES[@]}" | grep -E -- "$CONFORMANCE_ONLY" || true)
fi
[ "${#FILES[@]}" -gt 0 ] || die "no user-facing test files found under $SUITE/tests (see $HERE/select.txt)"
echo "conformance: ${#FILES[@]} test files, Tide's commands from $PREFIX/bin, controller 127.0.0.1:$PORT"

# One pytest per test file: a test that hangs (a regular expression of
# the suite backtracking forever on unexpected output holds the
# interpreter, where no per-test timeout can stop it) costs its file,
# not the run. Each file writes its results to results/<file>.json.
ARGS=(-p conformance_plugin -p no:cacheprovider --continue-on-collection-errors -o cache_dir="$RUN/pytest-cache" -rfE -v)
if "$PY" -c "import pytest_timeout" 2>/dev/null; then
  ARGS+=(--timeout="${CONFORMANCE_TEST_TIMEOUT:-300}" --timeout-method=thread)
fi
export PYTHONPATH=$HERE${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1
export CONFORMANCE_EXCLUDED=$HERE/excluded.txt CONFORMANCE_LOGS_DIR=$RUN
RESULTS=$RUN/results
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
: >"$RUN/pytest.log"
deadline=$(( $(date +%s) + ${CONFORMANCE_TIMEOUT_S:-5400} ))
n=0
for f in "${FILES[@]}"; do
  n=$((n + 1))
  # tests/commands/srun/test_--help.py: commands_srun_test_--help (22.05's
  # tree repeats file names across commands).
  name=${f#tests/}
  name=${name%.py}
  name=${name//\//_}
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -le 0 ]; then
    echo "conformance: CONFORMANCE_TIMEOUT_S reached: $f and later files not run" >&2
    break
  fi
  out=$RESULTS/$name.json
  rc=0
  # The suite's conftest lives in testsuite/python: pytest runs from there.
  (cd "$SUITE" && CONFORMANCE_RESULTS=$out timeout -k 10 "$(( left < ${CONFORMANCE_FILE_TIMEOUT:-900} ? left : ${CONFORMANCE_FILE_TIMEOUT:-900} ))" \
    "$PY" -m pytest "${ARGS[@]}" --basetemp="$TMPBASE/$name" "$@" "$f") >>"$RUN/pytest.log" 2>&1 || rc=$?
  if [ ! -s "$out" ]; then
    # Killed before pytest could write: the file counts as one error.
    "$PY" -c 'import json,sys; json.dump({"results":[{"nodeid":sys.argv[1],"outcome":"error","message":"pytest ended without results (exit %s: timed out or killed)" % sys.argv[2],"duration":0}],"excluded":[]}, open(sys.argv[3],"w"))' "$f" "$rc" "$out"
  fi
  printf 'conformance: [%d/%d] %s (exit %d)\n' "$n" "${#FILES[@]}" "$f" "$rc"
done
echo "conformance: log $RUN/pytest.log, results $RESULTS/"
"$PY" "$HERE/table.py" "$RESULTS"
