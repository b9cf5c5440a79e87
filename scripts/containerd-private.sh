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
set -eu
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
sock=$dir/containerd.sock

case $cmd in
start)
	command -v containerd >/dev/null || { echo "containerd-private: containerd is not installed (apt-get install containerd runc)" >&2; exit 1; }
	[ "$(id -u)" = 0 ] || { echo "containerd-private: containerd needs root" >&2; exit 1; }
	if [ -f "$dir/containerd.pid" ] && kill -0 "$(cat "$dir/containerd.pid")" 2>/dev/null; then
		echo "containerd-private: already running (pid $(cat "$dir/containerd.pid")) on $sock"
		exit 0
	fi
	mkdir -p "$dir"
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
	echo $! >"$dir/containerd.pid"
	i=0
	until ctr --address "$sock" version >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$(cat "$dir/containerd.pid")" 2>/dev/null; then
			echo "containerd-private: containerd did not come up; its log:" >&2
			tail -20 "$dir/containerd.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "containerd-private: containerd (pid $(cat "$dir/containerd.pid")) on $sock"
	;;
stop)
	[ -f "$dir/containerd.pid" ] || exit 0
	pid=$(cat "$dir/containerd.pid")
	if kill -0 "$pid" 2>/dev/null; then
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
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
		echo "containerd-private: stopped containerd (pid $pid)"
	fi
	rm -f "$dir/containerd.pid"
	# Mounts left by a killed shim would keep the directory busy.
	grep " $dir/" /proc/mounts | cut -d' ' -f2 | sort -r | while read -r m; do umount "$m" 2>/dev/null || true; done
	;;
*)
	echo "usage: $0 start|stop DIR" >&2
	exit 2
	;;
esac
