#!/bin/sh
# containerd-private.sh: run a containerd of our own, next to any system
# one, for CI and the local cluster's container jobs.
#
#   scripts/containerd-private.sh start DIR   # socket DIR/containerd.sock, pid DIR/containerd.pid
#   scripts/containerd-private.sh stop DIR    # remove Tide's tasks and containers, stop it by its pid
#
# Root, state, socket and plugin directories all live under DIR; the CRI
# plugin is off (no CNI, nothing to clash with Kubernetes). Needs root
# and the Debian packages containerd and runc. The snapshotter is
# overlayfs unless TIDE_SNAPSHOTTER says otherwise (native where overlay
# on overlay fails, as in some CI containers).
#
# DIR/containerd.pid names the daemon by pid and start time
# (scripts/lib/pidfile.sh): a pid that another process has taken since
# (after a crash or a reboot) is neither reported running nor stopped.
set -eu
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
# shellcheck source=lib/pidfile.sh
. "$(dirname "$0")/lib/pidfile.sh"
# Absolute: the directory is part of containerd's command line, by
# which it is recognised.
[ -d "$dir" ] && dir=$(cd "$dir" && pwd)
sock=$dir/containerd.sock
pidf=$dir/containerd.pid

case $cmd in
start)
	command -v containerd >/dev/null || { echo "containerd-private: containerd is not installed (apt-get install containerd runc)" >&2; exit 1; }
	[ "$(id -u)" = 0 ] || { echo "containerd-private: containerd needs root" >&2; exit 1; }
	if is_ours "$pidf" containerd --config "$dir/config.toml"; then
		echo "containerd-private: already running (pid $(pidfile_pid "$pidf")) on $sock"
		exit 0
	fi
	if [ -f "$pidf" ]; then
		echo "containerd-private: $why_not: stale pid file removed"
		forget_pid "$pidf"
	fi
	# One that runs on this directory without a pid file (lost in a
	# crash) is kept: a second one would fight it for the socket.
	pid=$(find_proc containerd --config "$dir/config.toml" | head -n 1)
	if [ -n "$pid" ] && record_pid "$pidf" "$pid"; then
		echo "containerd-private: already running (pid $pid, recorded now) on $sock"
		exit 0
	fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	sock=$dir/containerd.sock
	pidf=$dir/containerd.pid
	# Job users never talk to containerd; tided and the admin (root) do.
	chmod 711 "$dir"
	cat >"$dir/config.toml" <<TOML
version = 2
root = "$dir/root"
state = "$dir/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"
TOML
	containerd --config "$dir/config.toml" >"$dir/containerd.log" 2>&1 &
	record_pid "$pidf" $! || true
	start=$(head -n 1 "$pidf.start" 2>/dev/null || true)
	i=0
	until ctr --address "$sock" version >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 100 ] || [ "$(proc_start "$(pidfile_pid "$pidf")")" != "$start" ]; then
			echo "containerd-private: containerd did not come up; its log:" >&2
			tail -20 "$dir/containerd.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "containerd-private: containerd (pid $(pidfile_pid "$pidf")) on $sock"
	;;
stop)
	[ -f "$pidf" ] || exit 0
	pid=$(pidfile_pid "$pidf")
	if ! is_ours "$pidf" containerd --config "$dir/config.toml"; then
		echo "containerd-private: $why_not: stale pid file removed, nothing stopped"
	else
		start=$(head -n 1 "$pidf.start")
		# Shims outlive containerd: end the tasks first, then the daemon.
		for ns in $(ctr --address "$sock" namespaces ls -q 2>/dev/null); do
			for t in $(ctr --address "$sock" -n "$ns" tasks ls -q 2>/dev/null); do
				ctr --address "$sock" -n "$ns" tasks kill -a -s SIGKILL "$t" >/dev/null 2>&1 || true
				ctr --address "$sock" -n "$ns" tasks delete -f "$t" >/dev/null 2>&1 || true
			done
			for c in $(ctr --address "$sock" -n "$ns" containers ls -q 2>/dev/null); do
				ctr --address "$sock" -n "$ns" containers delete "$c" >/dev/null 2>&1 || true
			done
		done
		kill -TERM "$pid" 2>/dev/null || true
		i=0
		while proc_is "$pid" "$start" containerd --config "$dir/config.toml" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		proc_is "$pid" "$start" containerd --config "$dir/config.toml" && kill -KILL "$pid" 2>/dev/null || true
		echo "containerd-private: stopped containerd (pid $pid)"
	fi
	forget_pid "$pidf"
	# Mounts left by a killed shim would keep the directory busy.
	grep " $dir/" /proc/mounts | cut -d' ' -f2 | sort -r | while read -r m; do umount "$m" 2>/dev/null || true; done
	;;
*)
	echo "usage: $0 start|stop DIR" >&2
	exit 2
	;;
esac
