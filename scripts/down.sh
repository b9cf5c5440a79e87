#!/usr/bin/env bash
# down.sh — stop the local cluster that up.sh started: cancel its jobs,
# then stop exactly the daemons up.sh recorded. A pid file counts only
# while it names the very process up.sh started (its start time and
# command line, scripts/lib/pidfile.sh): after a crash or a reboot its
# pid may belong to an unrelated process, which is left alone; the stale
# file is removed, with a message.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/pidfile.sh
. scripts/lib/pidfile.sh
RUN=${TIDE_RUN:-$(pwd)/run}
BIN=${TIDE_BIN:-$(pwd)/bin}
[ -d "$RUN" ] || { echo "down: no cluster under $RUN"; exit 0; }
# As up.sh wrote it into the daemons' command lines.
RUN=$(cd "$RUN" && pwd)
# A cluster of netns-up.sh (TIDE_HOSTS=netns) has its own teardown.
[ -f "$RUN/hosts/netns.env" ] && exec scripts/netns-down.sh
export TIDE_SOCKET="$RUN/tidectld.sock"

CTLD_CMD=(tidectld --config "$RUN/tide.yaml")

if is_ours "$RUN/tidectld.pid" "${CTLD_CMD[@]}" && [ -x "$BIN/squeue" ]; then
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

# stop PIDFILE LABEL NAME ARG...: stop the process the pid file records
# if it is still that process running NAME ARG...; else remove the file.
stop() {
  local pf=$1 label=$2 pid start
  shift 2
  [ -e "$pf" ] || return 0
  pid=$(pidfile_pid "$pf")
  if ! is_ours "$pf" "$@"; then
    echo "down: $label: $why_not: stale pid file removed, nothing stopped"
    if [ -n "$pid" ] && proc_argv_is "$pid" "$@"; then
      echo "down: pid $pid does run '$*', but not as the process up.sh recorded: if it is this cluster's, stop it by hand (kill $pid)"
    fi
    forget_pid "$pf"
    return 0
  fi
  start=$(head -n 1 "$pf.start")
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 50); do proc_is "$pid" "$start" "$@" || break; sleep 0.1; done
  if proc_is "$pid" "$start" "$@"; then kill -KILL "$pid" 2>/dev/null; fi
  forget_pid "$pf"
  echo "down: stopped $label (pid $pid)"
}
for pf in "$RUN"/nodes/*.pid; do
  [ -e "$pf" ] || continue
  n=$(basename "$pf" .pid)
  stop "$pf" "tided $n" tided --config "$RUN/nodes/$n.yaml"
done
stop "$RUN/tidectld.pid" tidectld "${CTLD_CMD[@]}"
# The cluster's cgroup parent (empty once its jobs are gone).
if [ -f "$RUN/nodes/cgroup-parent" ]; then
  cg=$(cat "$RUN/nodes/cgroup-parent")
  for d in /sys/fs/cgroup/*/"$cg" /sys/fs/cgroup/"$cg"; do
    [ -d "$d" ] && rmdir "$d" 2>/dev/null
  done
  rm -f "$RUN/nodes/cgroup-parent"
fi
# The private containerd that up.sh started for container jobs, if any
# (its tasks first: shims outlive containerd). containerd-private.sh
# checks its pid file the same way.
if [ -f "$RUN/containerd/containerd.pid" ]; then
  scripts/containerd-private.sh stop "$RUN/containerd"
fi
# The nodes' shared job supervisors (tide-stepd stepd-serve) outlive
# tided by design; with the jobs cancelled above, stop them too, each by
# the identity it recorded ({"pid":N,"start_time":T}) and only while
# that process still serves this node's socket.
if [ -f "$RUN/nodes/state-dir" ]; then
  for pf in "$(cat "$RUN/nodes/state-dir")"/*/stepd-serve.pid "$RUN"/nodes/*/stepd-serve.pid; do
    [ -f "$pf" ] || continue
    pid=$(sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' "$pf")
    start=$(sed -n 's/.*"start_time": *\([0-9][0-9]*\).*/\1/p' "$pf")
    [ -n "$pid" ] && [ -n "$start" ] || continue
    if ! proc_is -p "$pid" "$start" '*' stepd-serve --socket "$(dirname "$pf")/stepd.sock"; then
      echo "down: $pf: stale (pid $pid is not that supervisor now); nothing stopped"
      continue
    fi
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
