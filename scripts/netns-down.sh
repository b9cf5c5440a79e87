#!/usr/bin/env bash
# netns-down.sh — stop the netns cluster that netns-up.sh started under
# TIDE_RUN (scripts/down.sh hands over to it when RUN/hosts/netns.env is
# there): cancel its jobs, stop its daemons and every host's munged by
# PID (only while each pid file names the very process that was started,
# scripts/lib/pidfile.sh), the shared job supervisors and the private
# containerd, then remove its veth pairs, namespaces and bridge (by
# name; the bridge only while it carries this cluster's alias) and its
# job directories on tmpfs.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# shellcheck source=lib/pidfile.sh
. "$ROOT/scripts/lib/pidfile.sh"
# shellcheck source=lib/netns.sh
. "$ROOT/scripts/lib/netns.sh"
RUN=${TIDE_RUN:-$ROOT/run}
BIN=${TIDE_BIN:-$ROOT/bin}
[ -d "$RUN" ] || { echo "down: no cluster under $RUN"; exit 0; }
RUN=$(cd "$RUN" && pwd)
H=$RUN/hosts
netns_load "$RUN" || { echo "down: no netns cluster under $RUN ($H/netns.env)"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "down: the netns cluster needs root to stop (namespaces, links)" >&2; exit 1; }
export TIDE_SOCKET=$H/ctl/private/tidectld.sock
CTLD_CMD=(tidectld --config "$H/ctl/tide.yaml")

# Cancel the jobs first (over the controller's unix socket, as root on
# its host), so that the supervisors end them cleanly.
if is_ours "$H/ctl/tidectld.pid" "${CTLD_CMD[@]}" && [ -x "$BIN/squeue" ]; then
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

# stop PIDFILE LABEL NAME ARG... (as down.sh's): stop the process the
# pid file records while it is still that process; else remove the file.
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

# Nodes of any size this run ever had (a smaller TIDE_NODES since).
for f in "$H"/gpu*/tided.pid; do
  [ -e "$f" ] || continue
  n=$(basename "$(dirname "$f")")
  stop "$f" "tided $n" tided --config "$H/$n/tided.yaml"
done
stop "$H/ctl/tidectld.pid" tidectld "${CTLD_CMD[@]}"

# The shared job supervisors (tide-stepd stepd-serve) outlive tided by
# design; stop each by the identity it recorded, while it still serves
# this node's socket (as down.sh).
if [ -f "$H/state-dir" ]; then
  for pf in "$(cat "$H/state-dir")"/*/stepd-serve.pid; do
    [ -f "$pf" ] || continue
    pid=$(sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' "$pf")
    start=$(sed -n 's/.*"start_time": *\([0-9][0-9]*\).*/\1/p' "$pf")
    [ -n "$pid" ] && [ -n "$start" ] || continue
    if ! proc_is -p "$pid" "$start" '*' stepd-serve --socket "$(dirname "$pf")/stepd.sock"; then
      echo "down: $pf: stale (pid $pid is not that supervisor now); nothing stopped"
      continue
    fi
    kill -TERM "$pid" 2>/dev/null && echo "down: stopped shared supervisor (pid $pid)"
    for _ in $(seq 1 50); do proc_is -p "$pid" "$start" '*' stepd-serve --socket "$(dirname "$pf")/stepd.sock" || break; sleep 0.1; done
  done
fi

# Every host's munged, once nothing needs a credential any more.
for d in "$H"/*/; do
  h=$(basename "$d")
  [ -e "$d/munged.pid" ] || continue
  stop "$d/munged.pid" "munged on $h" munged --foreground "--origin=$(netns_addr "$h" 2>/dev/null)" "--socket=${d%/}/munge.socket" \
    "--key-file=${d%/}/munge.key" "--pid-file=${d%/}/munged.self.pid" "--seed-file=${d%/}/munged.seed"
done

if [ -f "$RUN/containerd/containerd.pid" ]; then
  scripts/containerd-private.sh stop "$RUN/containerd"
fi

# The cgroups: each node's parent, then the cluster's (empty once the
# jobs are gone).
if [ -f "$H/cgroup-parent" ]; then
  cg=$(cat "$H/cgroup-parent")
  for d in /sys/fs/cgroup/*/"$cg" /sys/fs/cgroup/"$cg"; do
    [ -d "$d" ] || continue
    for sub in "$d"/gpu[0-9][0-9]; do
      [ -d "$sub" ] && rmdir "$sub" 2>/dev/null
    done
    rmdir "$d" 2>/dev/null
  done
  rm -f "$H/cgroup-parent"
fi

# What is still in a namespace now was not started by up.sh (a shell of
# login.sh, a job's orphan): it is named, and keeps that namespace alive
# until it ends, but is not killed.
for h in "${NETNS_HOSTS[@]}"; do
  ns=$(netns_ns "$h")
  [ -e "/run/netns/$ns" ] || continue
  pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  [ -n "${pids// /}" ] && echo "down: still in $ns: pids $pids(not started by up.sh; not stopped)"
done
netns_net_down

if [ -f "$H/state-dir" ]; then
  d=$(cat "$H/state-dir")
  case $d in /dev/shm/tide-*) rm -rf "$d" ;; esac
  rm -f "$H/state-dir"
fi
rm -f "$H/netns.env"
exit 0
