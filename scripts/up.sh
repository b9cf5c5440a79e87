#!/usr/bin/env bash
# up.sh — start a local development cluster: one tidectld and four tided
# (gpu[01-04], each declaring 8 fake 80 GB GPUs, 64 CPUs and 512 GB) on
# 127.0.0.1 under ./run, wait until every node responds, and write
# run/env.sh. Stop it with scripts/down.sh (make down).
#
# Run again, it restarts only what has died (the controller, a tided,
# the private containerd) and keeps what still runs, jobs included. A
# daemon counts as running only when its pid file names the very
# process that was started (scripts/lib/pidfile.sh: start time and
# command line), not merely a live pid. When the daemons that still run
# were started with other settings (a different TIDE_NODES, TIDE_PORT,
# ...), it changes nothing and says so: run down.sh first.
#
# Environment: TIDE_PORT (default 6817), TIDE_RUN (default ./run),
# TIDE_NODES (default 4), TIDE_CTLD_EXTRA (YAML appended to the
# controller's config: queues, qos, scheduler settings), TIDE_CONTAINERD
# (auto; "off" skips the private containerd), TIDE_BIN (default ./bin),
# TIDE_TIDED_EXTRA (YAML appended to every tided's config),
# TIDE_NODE_CPUS (the host CPUs the nodes and their jobs run on:
# scripts/node-cpus.sh; "all" for every CPU), TIDE_HOSTS (netns: every
# host in a network namespace of its own, scripts/netns-up.sh), TIDE_TLS
# (on: the default, the cluster CA under run/ctld/tls and every node
# joined with a one-time token before it starts; off: plain TCP with the
# cluster key, as before issue 21).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# shellcheck source=lib/pidfile.sh
. "$ROOT/scripts/lib/pidfile.sh"
RUN=${TIDE_RUN:-$ROOT/run}
PORT=${TIDE_PORT:-6817}
NNODES=${TIDE_NODES:-4}
BIN=${TIDE_BIN:-$ROOT/bin}

# TIDE_HOSTS=netns: each host in a network namespace of its own
# (scripts/netns-up.sh).
case ${TIDE_HOSTS:-} in
'' | local) ;;
netns) exec "$ROOT/scripts/netns-up.sh" ;;
*) echo "up: TIDE_HOSTS=$TIDE_HOSTS is not a mode (empty: one host; netns: hosts in network namespaces)" >&2; exit 1 ;;
esac
if [ -f "$RUN/hosts/netns.env" ]; then
  echo "up: a netns cluster (TIDE_HOSTS=netns) is under $RUN: make down first, or TIDE_HOSTS=netns make up" >&2
  exit 1
fi

case $NNODES in
'' | *[!0-9]* | 0 | 0*) echo "up: TIDE_NODES=$NNODES is not a node count (1 to 99)" >&2; exit 1 ;;
esac
[ "$NNODES" -le 99 ] || { echo "up: TIDE_NODES=$NNODES is not a node count (1 to 99)" >&2; exit 1; }
for b in tide tidectld tided; do
  [ -x "$BIN/$b" ] || { echo "up: $BIN/$b missing; run make build" >&2; exit 1; }
done
# Absolute paths: they are part of the daemons' command lines, by which
# a later up.sh or down.sh recognises them.
BIN=$(cd "$BIN" && pwd)

# The nodes keep to some of the host's CPUs (scripts/node-cpus.sh):
# decided before anything starts, so that a bad TIDE_NODE_CPUS starts
# nothing.
NODE_CPUS=$("$ROOT/scripts/node-cpus.sh")
PIN=()
[ -n "$NODE_CPUS" ] && PIN=(taskset -c "$NODE_CPUS")

mkdir -p "$RUN/nodes"
RUN=$(cd "$RUN" && pwd)
# Other local users use this cluster too: they need to reach the socket
# and env.sh (the key and the state stay private).
chmod 755 "$RUN" "$RUN/nodes"
[ -f "$RUN/cluster.key" ] || "$BIN/tidectld" keygen "$RUN/cluster.key"

# TLS (issue 21): the controller serves node_addr over TLS with the
# cluster CA, nodes hold certificates naming them (tls_dir), and the
# commands reach it over the socket as ever. TIDE_TLS=off keeps the
# cluster key in clear, for comparisons.
TLS=${TIDE_TLS:-on}
case $TLS in
on)
  CTLD_AUTH="tls: {mode: on}"
  ;;
off)
  CTLD_AUTH="tls: {mode: off}
key_file: $RUN/cluster.key"
  ;;
*) echo "up: TIDE_TLS=$TLS is not on or off" >&2; exit 1 ;;
esac

NODES=()
for i in $(seq 1 "$NNODES"); do NODES+=("$(printf 'gpu%02d' "$i")"); done

# Job directories go on tmpfs when there is one, as on a real node
# (state_dir /run/tided): see etc/tided.yaml. down.sh removes them. A
# restart keeps the directory it recorded: the jobs of a node that
# crashed are there, and their supervisors may still run them.
NODESTATE=
NEWSTATE=
if [ -f "$RUN/nodes/state-dir" ] && [ -d "$(cat "$RUN/nodes/state-dir")" ]; then
  NODESTATE=$(cat "$RUN/nodes/state-dir")
elif [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
  NODESTATE=$(mktemp -d "/dev/shm/tide-$(id -u)-$PORT.XXXXXX")
  NEWSTATE=$NODESTATE
  chmod 755 "$NODESTATE"
else
  NODESTATE=$RUN/nodes
fi

# Container jobs: a private containerd under run/containerd when we are
# root and containerd is installed (stopped by down.sh), with the busybox
# test image imported as docker.io/tide-test/bb:latest.
CTRD_DIR=$RUN/containerd
WANT_CTRD=
CTRD_YAML=
if [ "${TIDE_CONTAINERD:-auto}" = off ]; then
  echo "up: TIDE_CONTAINERD=off: nodes run without container support"
elif [ "$(id -u)" != 0 ]; then
  echo "up: not root: nodes run without container support (containerd needs root)"
elif ! command -v containerd >/dev/null || ! command -v runc >/dev/null; then
  echo "up: containerd or runc not installed (apt-get install containerd runc): nodes run without container support"
else
  WANT_CTRD=1
  CTRD_YAML="containerd: {socket: $CTRD_DIR/containerd.sock, namespace: tide}"
fi

# Job cgroups (where tided can make them) under a parent of this
# cluster's own: several local clusters reuse job ids.
CGPARENT=tide-dev-$PORT

if [ "$(id -u)" = 0 ]; then ROOTJOBS=true; else ROOTJOBS=false; fi

# The configurations this run wants, compared with the files of the
# daemons that still run before anything is written.
last=$(printf %02d "$NNODES")
half=$(( (NNODES + 1) / 2 ))
CTLD_CFG=$(cat <<YAML
version: 1
cluster_name: dev
state_dir: $RUN/ctld
socket: $RUN/tidectld.sock
node_addr: 127.0.0.1:$PORT
$CTLD_AUTH
allow_root_jobs: $ROOTJOBS
timeouts:
  node: 30s
  kill_wait: 5s
  min_job_age: 5m
partitions:
  - name: gpu
    nodes: gpu[01-$last]
    default: true
    default_time: "1:00:00"
    max_time: UNLIMITED
nodes:
  - names: gpu[01-$last]
    cpus: 64
    memory: 512G
    gpus: 8
topology:
  switches:
    - name: s1
      nodes: gpu[01-$(printf %02d "$half")]
$( [ "$NNODES" -gt "$half" ] && printf '    - name: s2\n      nodes: gpu[%02d-%02d]\n    - name: top\n      switches: s[1-2]\n' $((half + 1)) "$NNODES")
YAML
)
[ -n "${TIDE_CTLD_EXTRA:-}" ] && CTLD_CFG+=$'\n'$TIDE_CTLD_EXTRA

declare -A NODE_CFG
for n in "${NODES[@]}"; do
  NODE_CFG[$n]=$(cat <<YAML
version: 1
name: $n
controller: 127.0.0.1:$PORT
$([ "$TLS" = on ] && echo "tls_dir: $RUN/nodes/$n.tls" || echo "key_file: $RUN/cluster.key")
state_dir: $NODESTATE/$n
cpus: 64
memory: 512G
gpus:
  source: fake
  fake: {count: 8, model: a100, memory_mb: 81920}
heartbeat: 10s
kill_wait: 5s
allow_root_jobs: $ROOTJOBS
# srun steps: any free loopback port (four tided share this host)
step_addr: 127.0.0.1:0
cgroup_parent: $CGPARENT
${TIDE_TIDED_EXTRA:-}
$CTRD_YAML
YAML
)
done

# running PIDFILE LABEL NAME ARG... succeeds when the daemon runs: the
# process its pid file records, or else the one process that runs
# exactly its command line (recorded then: a lost pid file must not
# cause a second copy). A stale pid file is removed, with the reason.
# Two processes on one config are a mess an earlier up.sh may have
# made; it says which and stops.
running() {
  local pf=$1 label=$2 why pids
  shift 2
  mapfile -t pids < <(find_proc "$@")
  if [ "${#pids[@]}" -gt 1 ]; then
    echo "up: ${#pids[@]} processes run $label (pids ${pids[*]}, each '$*'; $pf names $(pidfile_pid "$pf")); stop all but one (kill PID), or all of them, then run up.sh again" >&2
    exit 1
  fi
  if is_ours "$pf" "$@"; then
    return 0
  fi
  why=$why_not
  if [ "${#pids[@]}" = 1 ]; then
    record_pid "$pf" "${pids[0]}" || return 1
    echo "up: $label runs as pid ${pids[0]}; its pid file did not say so ($why): recorded it"
    return 0
  fi
  if [ -e "$pf" ]; then
    echo "up: $label: $why: stale pid file removed"
    forget_pid "$pf"
  fi
  return 1
}

# join WORD...: the words, comma-separated.
join() {
  local out=$1
  shift
  for w in "$@"; do out+=", $w"; done
  printf '%s\n' "$out"
}

CTLD_CMD=(tidectld --config "$RUN/tide.yaml")
CTRD_CMD=(containerd --config "$CTRD_DIR/config.toml")
tided_cmd() { TIDED_CMD=(tided --config "$RUN/nodes/$1.yaml"); }

ALIVE=()  # what runs, as "label pid"
CTLD_UP=
if running "$RUN/tidectld.pid" tidectld "${CTLD_CMD[@]}"; then
  CTLD_UP=1
  ALIVE+=("tidectld (pid $(pidfile_pid "$RUN/tidectld.pid"))")
fi
declare -A NODE_UP
for n in "${NODES[@]}"; do
  tided_cmd "$n"
  if running "$RUN/nodes/$n.pid" "tided $n" "${TIDED_CMD[@]}"; then
    NODE_UP[$n]=1
    ALIVE+=("tided $n (pid $(pidfile_pid "$RUN/nodes/$n.pid"))")
  fi
done
# Nodes of an earlier, larger cluster that still run.
EXTRA=()
for f in "$RUN"/nodes/*.yaml; do
  [ -e "$f" ] || continue
  n=$(basename "$f" .yaml)
  [ -n "${NODE_CFG[$n]+set}" ] && continue
  tided_cmd "$n"
  if running "$RUN/nodes/$n.pid" "tided $n" "${TIDED_CMD[@]}"; then
    EXTRA+=("tided $n (pid $(pidfile_pid "$RUN/nodes/$n.pid"))")
  fi
done
CTRD_UP=
if [ -f "$CTRD_DIR/containerd.pid" ] && running "$CTRD_DIR/containerd.pid" "the private containerd" "${CTRD_CMD[@]}"; then
  CTRD_UP=1
  [ -n "$WANT_CTRD" ] || echo "up: the private containerd of an earlier run still runs (pid $(pidfile_pid "$CTRD_DIR/containerd.pid")); down.sh stops it"
fi

# What still runs must be what this run would start: never a mix of two
# configurations.
if [ "${#ALIVE[@]}" -gt 0 ] || [ "${#EXTRA[@]}" -gt 0 ]; then
  changed=()
  [ "$(cat "$RUN/tide.yaml" 2>/dev/null)" = "$CTLD_CFG" ] || changed+=(tide.yaml)
  for n in "${NODES[@]}"; do
    [ "$(cat "$RUN/nodes/$n.yaml" 2>/dev/null)" = "${NODE_CFG[$n]}" ] || changed+=("nodes/$n.yaml")
  done
  if [ "${#changed[@]}" -gt 0 ] || [ "${#EXTRA[@]}" -gt 0 ]; then
    {
      echo "up: part of the cluster under $RUN still runs: $(join "${ALIVE[@]}" "${EXTRA[@]}")"
      [ "${#EXTRA[@]}" -gt 0 ] && echo "up: not among the $NNODES nodes asked for (TIDE_NODES=$NNODES): $(join "${EXTRA[@]}")"
      if [ "${#changed[@]}" -gt 0 ]; then
        echo "up: it was started with other settings; this run would change $(join "${changed[@]}"):"
        for f in "${changed[@]}"; do
          if [ ! -f "$RUN/$f" ]; then
            echo "up:   $f: new"
            continue
          fi
          if [ "$f" = tide.yaml ]; then want=$CTLD_CFG; else want=${NODE_CFG[$(basename "$f" .yaml)]}; fi
          diff -U1 --label "$f (running)" --label "$f (this run)" "$RUN/$f" <(printf '%s\n' "$want") 2>/dev/null | head -12 | sed 's/^/up:   /' || true
        done
      fi
      echo "up: nothing started, no config written. Either run up.sh with the settings the cluster was started with"
      echo "up: (TIDE_PORT, TIDE_NODES, TIDE_CTLD_EXTRA, TIDE_TIDED_EXTRA, TIDE_CONTAINERD), or stop it first:"
      echo "up: make down (scripts/down.sh, same TIDE_RUN), then up.sh with the new settings"
    } >&2
    [ -n "$NEWSTATE" ] && rmdir "$NEWSTATE/" 2>/dev/null
    exit 1
  fi
fi

# Write what differs (identical when daemons still run on them).
write_cfg() { # file content
  [ "$(cat "$1" 2>/dev/null)" = "$2" ] && [ -f "$1" ] && return 0
  printf '%s\n' "$2" >"$1"
}
write_cfg "$RUN/tide.yaml" "$CTLD_CFG"
echo "$NODESTATE" > "$RUN/nodes/state-dir"
echo "$CGPARENT" > "$RUN/nodes/cgroup-parent"

# start_daemon PIDFILE LOG ARGV...: start it in the background, its
# output in LOG (the previous log kept as LOG.1: a crashed daemon's last
# words), and record it.
start_daemon() {
  local pf=$1 log=$2
  shift 2
  [ -s "$log" ] && mv -f "$log" "$log.1"
  "$@" >"$log" 2>&1 &
  # A daemon that exits at once is reported by the wait below, log and
  # all.
  record_pid "$pf" $! 2>/dev/null || true
}

# Five daemons share this one machine (on a real cluster each has its
# own): one Go P each keeps their schedulers from spinning against each
# other for the few cores there are. Export GOMAXPROCS to override.
export GOMAXPROCS=${GOMAXPROCS:-1}
STARTED=()
# The cluster CA (once: it is kept across make down and up), before a
# controller with tls.mode on may start.
if [ "$TLS" = on ] && [ ! -f "$RUN/ctld/tls/ca.crt" ]; then
  "$BIN/tidectld" --config "$RUN/tide.yaml" ca init | sed -n "s|^CA sha256: *|up: cluster CA made in $RUN/ctld/tls, sha256 |p"
fi
if [ -n "$CTLD_UP" ]; then
  echo "up: tidectld runs (pid $(pidfile_pid "$RUN/tidectld.pid")): kept"
else
  start_daemon "$RUN/tidectld.pid" "$RUN/tidectld.log" "$BIN/tidectld" --config "$RUN/tide.yaml"
  STARTED+=(tidectld)
fi

if [ -n "$WANT_CTRD" ]; then
  if [ -n "$CTRD_UP" ]; then
    echo "up: the private containerd runs (pid $(pidfile_pid "$CTRD_DIR/containerd.pid")): kept"
  else
    # Its containers are the nodes' jobs too: same CPUs.
    "${PIN[@]}" scripts/containerd-private.sh start "$CTRD_DIR"
    STARTED+=(containerd)
    if scripts/build-test-image.sh "$CTRD_DIR/tide-test-bb.tar" >/dev/null 2>&1; then
      "$BIN/tide" image --containerd-socket "$CTRD_DIR/containerd.sock" import "$CTRD_DIR/tide-test-bb.tar" | sed 's/^/up: /'
    else
      echo "up: busybox-static not installed: no test image (apt-get install busybox-static; scripts/build-test-image.sh)"
    fi
  fi
fi

# join_node NAME: a one-time join token for the node from the running
# controller (over its socket; retried while it starts), handed to
# tided join on standard input (a command line is visible to all). Every
# tided up.sh starts gets a fresh certificate: a stale one (expired
# after a month of make down) never stops a node.
join_node() {
  local n=$1 tok=
  for _ in $(seq 1 50); do
    tok=$("$BIN/tidectld" --config "$RUN/tide.yaml" node-token create --ttl 5m --node "$n" 2>"$RUN/node-token.err") && break
    tok=
    sleep 0.2
  done
  if [ -z "$tok" ]; then
    echo "up: no join token for $n from the controller: $(tail -1 "$RUN/node-token.err"); its log:" >&2
    tail -20 "$RUN/tidectld.log" >&2
    exit 1
  fi
  if ! printf '%s\n' "$tok" | "$BIN/tided" --config "$RUN/nodes/$n.yaml" join --token - >"$RUN/nodes/$n.join" 2>&1; then
    echo "up: tided join of $n failed:" >&2
    cat "$RUN/nodes/$n.join" >&2
    exit 1
  fi
}

NEWNODES=()
for n in "${NODES[@]}"; do
  mkdir -p "$NODESTATE/$n"
  write_cfg "$RUN/nodes/$n.yaml" "${NODE_CFG[$n]}"
  if [ -n "${NODE_UP[$n]:-}" ]; then
    continue
  fi
  [ "$TLS" = on ] && join_node "$n"
  # taskset execs tided: $! is tided's own pid.
  start_daemon "$RUN/nodes/$n.pid" "$RUN/nodes/$n.log" "${PIN[@]}" "$BIN/tided" --config "$RUN/nodes/$n.yaml"
  NEWNODES+=("$n")
  STARTED+=("tided $n")
done
if [ "${#NEWNODES[@]}" -lt "$NNODES" ]; then
  kept=()
  for n in "${NODES[@]}"; do [ -n "${NODE_UP[$n]:-}" ] && kept+=("$n"); done
  echo "up: tided ${kept[*]} run: kept"
fi
# A kept daemon whose binary has been rebuilt since (make up builds
# first) still runs the old code.
old=()
for pf in "$RUN/tidectld.pid" "$RUN"/nodes/gpu*.pid; do
  [ -f "$pf" ] || continue
  pid=$(pidfile_pid "$pf")
  label=$(basename "$pf" .pid)
  [ "$label" = tidectld ] || label="tided $label"
  case $(readlink "/proc/$pid/exe" 2>/dev/null) in *" (deleted)") old+=("$label") ;; esac
done
if [ "${#old[@]}" -gt 0 ]; then
  echo "up: $(join "${old[@]}"): binary rebuilt since started, still running the old one (make down, then make up, runs the new)"
fi
if [ -n "$NODE_CPUS" ]; then
  echo "up: the nodes and their jobs run on host CPUs $NODE_CPUS (TIDE_NODE_CPUS=all: on every CPU)"
fi

cat > "$RUN/env.sh" <<ENV
# Source this file to use the local Tide cluster: . $RUN/env.sh
export PATH="$BIN:\$PATH"
export TIDE_SOCKET="$RUN/tidectld.sock"
$([ "$TLS" = on ] && echo "# The cluster CA: what the commands verify the controller with over TCP
# (TIDE_CONTROLLER, when api_addr is set).
export TIDE_CA=\"$RUN/ctld/tls/ca.crt\"")
ENV
chmod 644 "$RUN/env.sh"

# started PIDFILE: the process recorded there still runs (its start time
# matches). The command line is not checked: a tided just started under
# taskset may not have exec'd yet.
started() {
  local pid
  pid=$(pidfile_pid "$1")
  [ -n "$pid" ] && [ "$(proc_start "$pid")" = "$(head -n 1 "$1.start" 2>/dev/null)" ]
}

# Wait until every node responds: registered with the controller and not
# DOWN or NOT_RESPONDING (idle, mix, alloc, drain, drng; a node running
# jobs is not idle, and need not be). A tided started now must have
# registered itself, not merely left the controller's record of its
# predecessor in place.
export TIDE_SOCKET="$RUN/tidectld.sock"
states=
for _ in $(seq 1 150); do
  if ! started "$RUN/tidectld.pid"; then
    echo "up: tidectld exited; its log:" >&2; tail -20 "$RUN/tidectld.log" >&2; exit 1
  fi
  ok=1
  for n in "${NODES[@]}"; do
    if ! started "$RUN/nodes/$n.pid"; then
      echo "up: tided $n exited; its log:" >&2; tail -20 "$RUN/nodes/$n.log" >&2; exit 1
    fi
  done
  for n in "${NEWNODES[@]}"; do
    grep -q "registered with controller" "$RUN/nodes/$n.log" 2>/dev/null || ok=
  done
  states=$("$BIN/sinfo" -h -N -o '%N %t' 2>/dev/null | sort -u || true)
  for n in "${NODES[@]}"; do
    st=$(awk -v n="$n" '$1 == n { print $2; exit }' <<<"$states")
    case $st in idle | mix | alloc | drain | drng) ;; *) ok= ;; esac
  done
  if [ -n "$ok" ]; then
    summary=$(awk '{ print $1 " " $2 }' <<<"$states" | paste -sd, - | sed 's/,/, /g')
    if [ "${#STARTED[@]}" -eq 0 ]; then
      echo "up: everything was running: nothing started"
    elif [ "${#ALIVE[@]}" -gt 0 ]; then
      echo "up: restarted $(join "${STARTED[@]}")"
    fi
    echo "up: tidectld (pid $(pidfile_pid "$RUN/tidectld.pid")) and $NNODES tided are up; nodes: $summary"
    echo "up: run '. $RUN/env.sh' to use sbatch, squeue, sinfo, scancel, scontrol, sacct"
    exit 0
  fi
  sleep 0.2
done
echo "up: the nodes did not all respond in 30 s (states: $(tr '\n' ' ' <<<"${states:-none}")); see $RUN/*.log and $RUN/nodes/*.log" >&2
exit 1
