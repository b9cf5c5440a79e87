#!/usr/bin/env bash
# down.sh — stop the local cluster that up.sh started: cancel its jobs,
# then stop exactly the daemons whose PIDs up.sh recorded.
set -uo pipefail
cd "$(dirname "$0")/.."
RUN=${TIDE_RUN:-$(pwd)/run}
BIN=${TIDE_BIN:-$(pwd)/bin}
export TIDE_SOCKET="$RUN/tidectld.sock"

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if alive "$RUN/tidectld.pid" && [ -x "$BIN/squeue" ]; then
  ids=$("$BIN/squeue" -h -o %i 2>/dev/null | tr '\n' ' ')
  if [ -n "${ids// /}" ]; then
    # shellcheck disable=SC2086
    "$BIN/scancel" $ids 2>/dev/null || true
    for _ in $(seq 1 50); do
      [ -z "$("$BIN/squeue" -h -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
fi

stop() { # pidfile name
  local pf=$1 name=$2 pid
  alive "$pf" || { rm -f "$pf"; return 0; }
  pid=$(cat "$pf")
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; fi
  rm -f "$pf"
  echo "down: stopped $name (pid $pid)"
}
for pf in "$RUN"/nodes/*.pid; do
  [ -e "$pf" ] || continue
  stop "$pf" "tided $(basename "$pf" .pid)"
done
stop "$RUN/tidectld.pid" tidectld
# The cluster's cgroup parent (empty once its jobs are gone).
if [ -f "$RUN/nodes/cgroup-parent" ]; then
  cg=$(cat "$RUN/nodes/cgroup-parent")
  for d in /sys/fs/cgroup/*/"$cg" /sys/fs/cgroup/"$cg"; do
    [ -d "$d" ] && rmdir "$d" 2>/dev/null
  done
  rm -f "$RUN/nodes/cgroup-parent"
fi
# The private containerd that up.sh started for container jobs, if any
# (its tasks first: shims outlive containerd).
if [ -f "$RUN/containerd/containerd.pid" ]; then
  scripts/containerd-private.sh stop "$RUN/containerd"
fi
# The nodes' shared job supervisors (tide-stepd stepd-serve) outlive
# tided by design; with the jobs cancelled above, stop them too, each by
# the pid it recorded and only if that pid still runs stepd-serve.
if [ -f "$RUN/nodes/state-dir" ]; then
  for pf in "$(cat "$RUN/nodes/state-dir")"/*/stepd-serve.pid "$RUN"/nodes/*/stepd-serve.pid; do
    [ -f "$pf" ] || continue
    pid=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' "$pf")
    [ -n "$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "stepd-serve --socket $(dirname "$pf")/" || continue
    kill -TERM "$pid" 2>/dev/null && echo "down: stopped shared supervisor (pid $pid)"
  done
fi
# Job directories that up.sh put on tmpfs (only its own, by the name it
# recorded; jobs of stopped nodes left their status there).
if [ -f "$RUN/nodes/state-dir" ]; then
  d=$(cat "$RUN/nodes/state-dir")
  case $d in /dev/shm/tide-*) rm -rf "$d" ;; esac
  rm -f "$RUN/nodes/state-dir"
fi
exit 0
