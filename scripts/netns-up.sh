#!/usr/bin/env bash
# netns-up.sh — `TIDE_HOSTS=netns make up` (scripts/up.sh hands over to
# it): a local cluster whose hosts are network namespaces on a private
# bridge (scripts/lib/netns.sh): the controller (ctl), one login node
# (login) and TIDE_NODES compute nodes (gpu01, ...), each with its own
# address and its own munged (one key, generated for the cluster and
# copied to every host). They share the file system, the users and the
# cgroups, nothing else: clients on the login node reach the controller
# over TCP (api_addr) with MUNGE credentials from the login node's
# munged, as on a real cluster. scripts/login.sh opens a shell there.
#
# Per host, under RUN/hosts/<host>/: its munged (munge.key, munge.socket,
# munged.pid, munged.log, munged.seed) and its daemon (ctl: tide.yaml,
# tidectld.pid, tidectld.log, the state directory and, in private/ (mode
# 0700), the controller's unix socket for root on the controller host;
# gpuNN: tided.yaml, tided.pid, tided.log). Every process is started by
# PID and recorded (scripts/lib/pidfile.sh); scripts/down.sh stops them
# by PID and removes the namespaces, veths and bridge.
#
# Run again, it restarts only what has died, and changes nothing when the
# daemons that still run were started with other settings (as up.sh).
#
# Environment: as up.sh (TIDE_PORT, TIDE_RUN, TIDE_NODES, TIDE_BIN,
# TIDE_CTLD_EXTRA, TIDE_TIDED_EXTRA, TIDE_CONTAINERD, TIDE_NODE_CPUS),
# and TIDE_NETNS_NET (the hosts' /24, default 10.77.<TIDE_PORT % 256>).
# Needs root, iproute2 (ip), util-linux (nsenter) and munge (munged).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# shellcheck source=lib/pidfile.sh
. "$ROOT/scripts/lib/pidfile.sh"
# shellcheck source=lib/netns.sh
. "$ROOT/scripts/lib/netns.sh"
RUN=${TIDE_RUN:-$ROOT/run}
PORT=${TIDE_PORT:-6817}
NNODES=${TIDE_NODES:-4}
BIN=${TIDE_BIN:-$ROOT/bin}

die() { echo "up: $*" >&2; exit 1; }

case $NNODES in
'' | *[!0-9]* | 0 | 0*) die "TIDE_NODES=$NNODES is not a node count (1 to 99)" ;;
esac
[ "$NNODES" -le 99 ] || die "TIDE_NODES=$NNODES is not a node count (1 to 99)"
[ "$(id -u)" = 0 ] || die "TIDE_HOSTS=netns needs root: it makes network namespaces, veth pairs and a bridge"
command -v ip >/dev/null || die "TIDE_HOSTS=netns needs ip (apt-get install iproute2)"
command -v nsenter >/dev/null || die "TIDE_HOSTS=netns needs nsenter (apt-get install util-linux)"
MUNGED=$(command -v munged || true)
for p in /usr/sbin/munged /usr/local/sbin/munged /sbin/munged; do
  [ -z "$MUNGED" ] && [ -x "$p" ] && MUNGED=$p
done
[ -n "$MUNGED" ] || die "TIDE_HOSTS=netns needs munged, one per host (apt-get install munge)"
ip netns list >/dev/null 2>&1 || die "ip netns does not work here: $(ip netns list 2>&1 | head -1)"
for b in tide tidectld tided; do
  [ -x "$BIN/$b" ] || die "$BIN/$b missing; run make build"
done
BIN=$(cd "$BIN" && pwd)
NETNS_BIN=$BIN

NODE_CPUS=$("$ROOT/scripts/node-cpus.sh")
PIN=()
[ -n "$NODE_CPUS" ] && PIN=(taskset -c "$NODE_CPUS")

mkdir -p "$RUN"
RUN=$(cd "$RUN" && pwd)
netns_init "$RUN" "$PORT" "$NNODES" || exit 1
# A single-host cluster under the same RUN (scripts/up.sh without
# TIDE_HOSTS) would share pid files and state with this one.
if is_ours "$RUN/tidectld.pid" tidectld --config "$RUN/tide.yaml"; then
  die "a single-host cluster runs under $RUN (tidectld pid $(pidfile_pid "$RUN/tidectld.pid")): make down first, or use another TIDE_RUN"
fi
if [ -f "$RUN/hosts/netns.env" ]; then
  old_port=$(sed -n 's/^NETNS_PORT=//p' "$RUN/hosts/netns.env")
  if [ "$old_port" != "$PORT" ]; then
    die "the netns cluster under $RUN was made for TIDE_PORT=$old_port, not $PORT: make down (same TIDE_RUN) first"
  fi
fi
netns_check_free || exit 1

H=$RUN/hosts

# Job directories on tmpfs when there is one (as up.sh), kept across
# restarts.
NODESTATE=
NEWSTATE=
if [ -f "$H/state-dir" ] && [ -d "$(cat "$H/state-dir")" ]; then
  NODESTATE=$(cat "$H/state-dir")
elif [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
  NODESTATE=$(mktemp -d "/dev/shm/tide-0-$PORT.XXXXXX")
  NEWSTATE=$NODESTATE
  chmod 755 "$NODESTATE"
else
  NODESTATE=$H/jobs
  mkdir -p "$NODESTATE"
fi

# Container jobs, as in up.sh: a private containerd in the root
# namespace. tided reaches it over its unix socket, which works across
# network namespaces; the containers get containerd's network (the root
# namespace's), not their node's (docs/operations.md).
CTRD_DIR=$RUN/containerd
WANT_CTRD=
CTRD_YAML=
if [ "${TIDE_CONTAINERD:-auto}" = off ]; then
  echo "up: TIDE_CONTAINERD=off: nodes run without container support"
elif ! command -v containerd >/dev/null || ! command -v runc >/dev/null; then
  echo "up: containerd or runc not installed (apt-get install containerd runc): nodes run without container support"
else
  WANT_CTRD=1
  CTRD_YAML="containerd: {socket: $CTRD_DIR/containerd.sock, namespace: tide}"
fi

# TLS (issue 21) where the binaries have it (tidectld ca, tided join): the
# cluster CA on ctl, each node joined with a one-time token from its own
# namespace, and the CA's certificate copied to the login node, where
# login.sh points TIDE_CA at it.
HAVE_TLS=
# (cobra answers --help of an unknown command with the root's help: look
# for the subcommands' own usage lines.)
if "$BIN/tidectld" ca --help 2>/dev/null | grep -q '^  tidectld ca \[command\]' &&
  "$BIN/tided" join --help 2>/dev/null | grep -q '^  tided join --token TOKEN'; then
  HAVE_TLS=1
fi

# Each node its own cgroup parent, as on hosts of their own (a job over
# two nodes has a job cgroup on each), all under the cluster's.
CGPARENT=tide-dev-$PORT

CTL=$NETNS_CTL_ADDR
last=$(printf %02d "$NNODES")
half=$(((NNODES + 1) / 2))
CTLD_CFG=$(
  cat <<YAML
version: 1
cluster_name: dev
state_dir: $H/ctl/state
# For root on the controller's host only (mode 0700 directory): the
# users are on the login node, and come in over TCP (api_addr).
socket: $H/ctl/private/tidectld.sock
node_addr: $CTL:$NETNS_NODE_PORT
api_addr: $CTL:$NETNS_API_PORT
munge: {socket: $H/ctl/munge.socket}
key_file: $H/ctl/cluster.key
allow_root_jobs: true
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
$([ "$NNODES" -gt "$half" ] && printf '    - name: s2\n      nodes: gpu[%02d-%02d]\n    - name: top\n      switches: s[1-2]\n' $((half + 1)) "$NNODES")
YAML
)
[ -n "${TIDE_CTLD_EXTRA:-}" ] && CTLD_CFG+=$'\n'$TIDE_CTLD_EXTRA

declare -A NODE_CFG
for n in "${NETNS_NODES[@]}"; do
  NODE_CFG[$n]=$(
    cat <<YAML
version: 1
name: $n
controller: $CTL:$NETNS_NODE_PORT
key_file: $H/$n/cluster.key
state_dir: $NODESTATE/$n
cpus: 64
memory: 512G
gpus:
  source: fake
  fake: {count: 8, model: a100, memory_mb: 81920}
heartbeat: 10s
kill_wait: 5s
allow_root_jobs: true
# srun's step connections, on this host's own address
step_addr: $(netns_addr "$n"):$NETNS_STEP_PORT
cgroup_parent: $CGPARENT/$n
$([ -n "$HAVE_TLS" ] && echo "tls_dir: $H/$n/tls")
${TIDE_TIDED_EXTRA:-}
$CTRD_YAML
YAML
  )
done

# The command lines by which the daemons are started and recognised.
munged_cmd() {
  local d=$H/$1
  MUNGED_CMD=(munged --foreground "--origin=$(netns_addr "$1")" "--socket=$d/munge.socket"
    "--key-file=$d/munge.key" "--pid-file=$d/munged.self.pid" "--seed-file=$d/munged.seed")
}
CTLD_CMD=(tidectld --config "$H/ctl/tide.yaml")
tided_cmd() { TIDED_CMD=(tided --config "$H/$1/tided.yaml"); }

# in_ns PID HOST: the process runs in HOST's namespace (not in one that
# was deleted and made again since it started).
in_ns() {
  local want have
  want=$(stat -L -c %i "/run/netns/$(netns_ns "$2")" 2>/dev/null) || return 1
  have=$(readlink "/proc/$1/ns/net" 2>/dev/null) || return 1
  [ "$have" = "net:[$want]" ]
}

# running PIDFILE LABEL HOST NAME ARG... succeeds when the daemon runs,
# as up.sh's running() (a lost pid file is recovered, a stale one
# removed), in HOST's namespace. One that runs outside it (its namespace
# was deleted under it) is an error: nobody can reach it.
running() {
  local pf=$1 label=$2 host=$3 why pids
  shift 3
  mapfile -t pids < <(find_proc "$@")
  if [ "${#pids[@]}" -gt 1 ]; then
    die "${#pids[@]} processes run $label (pids ${pids[*]}, each '$*'); stop all but one (kill PID), or all, then run up.sh again"
  fi
  if ! is_ours "$pf" "$@"; then
    why=$why_not
    if [ "${#pids[@]}" = 1 ]; then
      record_pid "$pf" "${pids[0]}" || return 1
      echo "up: $label runs as pid ${pids[0]}; its pid file did not say so ($why): recorded it"
    else
      if [ -e "$pf" ]; then
        echo "up: $label: $why: stale pid file removed"
        forget_pid "$pf"
      fi
      return 1
    fi
  fi
  local pid
  pid=$(pidfile_pid "$pf")
  if ! in_ns "$pid" "$host"; then
    die "$label (pid $pid) runs outside the namespace $(netns_ns "$host") (deleted and made again since?): stop it (kill $pid), then run up.sh again"
  fi
  return 0
}

ALIVE=()
declare -A UP
for h in "${NETNS_HOSTS[@]}"; do
  munged_cmd "$h"
  if running "$H/$h/munged.pid" "munged on $h" "$h" "${MUNGED_CMD[@]}"; then
    UP[munged-$h]=1
    ALIVE+=("munged on $h (pid $(pidfile_pid "$H/$h/munged.pid"))")
  fi
done
if running "$H/ctl/tidectld.pid" tidectld ctl "${CTLD_CMD[@]}"; then
  UP[tidectld]=1
  ALIVE+=("tidectld (pid $(pidfile_pid "$H/ctl/tidectld.pid"))")
fi
for n in "${NETNS_NODES[@]}"; do
  tided_cmd "$n"
  if running "$H/$n/tided.pid" "tided $n" "$n" "${TIDED_CMD[@]}"; then
    UP[tided-$n]=1
    ALIVE+=("tided $n (pid $(pidfile_pid "$H/$n/tided.pid"))")
  fi
done
# Nodes of an earlier, larger cluster that still run.
EXTRA=()
for f in "$H"/gpu*/tided.yaml; do
  [ -e "$f" ] || continue
  n=$(basename "$(dirname "$f")")
  [ -n "${NODE_CFG[$n]+set}" ] && continue
  tided_cmd "$n"
  if is_ours "$H/$n/tided.pid" "${TIDED_CMD[@]}"; then
    EXTRA+=("tided $n (pid $(pidfile_pid "$H/$n/tided.pid"))")
  fi
done
CTRD_UP=
if [ -f "$CTRD_DIR/containerd.pid" ] && is_ours "$CTRD_DIR/containerd.pid" containerd --config "$CTRD_DIR/config.toml"; then
  CTRD_UP=1
  [ -n "$WANT_CTRD" ] || echo "up: the private containerd of an earlier run still runs (pid $(pidfile_pid "$CTRD_DIR/containerd.pid")); down.sh stops it"
fi

join() {
  local out=$1
  shift
  for w in "$@"; do out+=", $w"; done
  printf '%s\n' "$out"
}

# What still runs must be what this run would start.
if [ "${#ALIVE[@]}" -gt 0 ] || [ "${#EXTRA[@]}" -gt 0 ]; then
  changed=()
  [ "$(cat "$H/ctl/tide.yaml" 2>/dev/null)" = "$CTLD_CFG" ] || changed+=(hosts/ctl/tide.yaml)
  for n in "${NETNS_NODES[@]}"; do
    [ "$(cat "$H/$n/tided.yaml" 2>/dev/null)" = "${NODE_CFG[$n]}" ] || changed+=("hosts/$n/tided.yaml")
  done
  if [ "${#changed[@]}" -gt 0 ] || [ "${#EXTRA[@]}" -gt 0 ]; then
    {
      echo "up: part of the netns cluster under $RUN still runs: $(join "${ALIVE[@]}" "${EXTRA[@]}")"
      [ "${#EXTRA[@]}" -gt 0 ] && echo "up: not among the $NNODES nodes asked for (TIDE_NODES=$NNODES): $(join "${EXTRA[@]}")"
      if [ "${#changed[@]}" -gt 0 ]; then
        echo "up: it was started with other settings; this run would change $(join "${changed[@]}"):"
        for f in "${changed[@]}"; do
          if [ ! -f "$RUN/$f" ]; then
            echo "up:   $f: new"
            continue
          fi
          if [ "$f" = hosts/ctl/tide.yaml ]; then want=$CTLD_CFG; else want=${NODE_CFG[$(basename "$(dirname "$f")")]}; fi
          diff -U1 --label "$f (running)" --label "$f (this run)" "$RUN/$f" <(printf '%s\n' "$want") 2>/dev/null | head -12 | sed 's/^/up:   /' || true
        done
      fi
      echo "up: nothing started, no config written. Either run up.sh with the settings the cluster was started with"
      echo "up: (TIDE_HOSTS, TIDE_PORT, TIDE_NODES, TIDE_CTLD_EXTRA, TIDE_TIDED_EXTRA, TIDE_CONTAINERD), or stop it first:"
      echo "up: make down (scripts/down.sh, same TIDE_RUN), then up.sh with the new settings"
    } >&2
    [ -n "$NEWSTATE" ] && rmdir "$NEWSTATE/" 2>/dev/null
    exit 1
  fi
fi

# Other local users use this cluster too (through login.sh): they reach
# the munged sockets and the binaries; keys and state stay private.
mkdir -p "$H" "$H/ctl/private" "$H/ctl/state"
for h in "${NETNS_HOSTS[@]}"; do mkdir -p "$H/$h"; done
# munged refuses a key, socket or pid file in a directory that group or
# others may write to.
chmod 755 "$RUN" "$H"
for h in "${NETNS_HOSTS[@]}"; do chmod 755 "$H/$h"; done
chmod 700 "$H/ctl/private" "$H/ctl/state"

# The cluster's secrets, generated once and copied to every host that
# needs them, as an administrator distributes them: the MUNGE key (all
# hosts) and the nodes' shared key (ctl and the compute nodes).
umask 077
[ -s "$H/munge.key" ] || head -c 128 /dev/urandom >"$H/munge.key"
[ -s "$H/cluster.key" ] || "$BIN/tidectld" keygen "$H/cluster.key"
for h in "${NETNS_HOSTS[@]}"; do
  cmp -s "$H/munge.key" "$H/$h/munge.key" || cp "$H/munge.key" "$H/$h/munge.key"
  [ "$h" = login ] && continue
  cmp -s "$H/cluster.key" "$H/$h/cluster.key" || cp "$H/cluster.key" "$H/$h/cluster.key"
done
umask 022

# From here on the cluster is ours to make: the marker first, so that
# down.sh finds (and removes) whatever the next steps make, even if one
# of them fails.
netns_save
echo "$NODESTATE" >"$H/state-dir"
echo "$CGPARENT" >"$H/cgroup-parent"
netns_net_up || die "could not make the network (see above); scripts/down.sh removes what was made"

write_cfg() { # file content
  [ -f "$1" ] && [ "$(cat "$1")" = "$2" ] && return 0
  printf '%s\n' "$2" >"$1"
}
write_cfg "$H/ctl/tide.yaml" "$CTLD_CFG"

# start_daemon HOST PIDFILE LOG ARGV...: start ARGV in HOST's namespace
# in the background (nsenter execs it: $! is its pid), its output in LOG
# (the previous one kept as LOG.1), and record it.
start_daemon() {
  local h=$1 pf=$2 log=$3
  shift 3
  [ -s "$log" ] && mv -f "$log" "$log.1"
  netns_enter "$h"
  "${NETNS_ENTER[@]}" "$@" >"$log" 2>&1 &
  record_pid "$pf" $! 2>/dev/null || true
}

# started PIDFILE: the recorded process still runs (same start time).
started() {
  local pid
  pid=$(pidfile_pid "$1")
  [ -n "$pid" ] && [ "$(proc_start "$pid")" = "$(head -n 1 "$1.start" 2>/dev/null)" ]
}

export GOMAXPROCS=${GOMAXPROCS:-1}
STARTED=()

# One munged per host. A munged is ready once it has written its own
# pid file (just after it listens) naming the process we started.
MUNGE_NEW=()
for h in "${NETNS_HOSTS[@]}"; do
  [ -n "${UP[munged-$h]:-}" ] && continue
  rm -f "$H/$h/munged.self.pid"
  munged_cmd "$h"
  start_daemon "$h" "$H/$h/munged.pid" "$H/$h/munged.log" "$MUNGED" "${MUNGED_CMD[@]:1}"
  MUNGE_NEW+=("$h")
  STARTED+=("munged on $h")
done
for h in "${MUNGE_NEW[@]}"; do
  for _ in $(seq 1 100); do
    started "$H/$h/munged.pid" || die "munged on $h exited; its log: $(tail -5 "$H/$h/munged.log")"
    [ -S "$H/$h/munge.socket" ] && [ "$(cat "$H/$h/munged.self.pid" 2>/dev/null)" = "$(pidfile_pid "$H/$h/munged.pid")" ] && continue 2
    sleep 0.1
  done
  die "munged on $h did not come up in 10 s; its log: $(tail -5 "$H/$h/munged.log")"
done

CA=$H/ctl/state/tls/ca.crt
if [ -n "$HAVE_TLS" ] && [ ! -f "$CA" ]; then
  "$BIN/tidectld" --config "$H/ctl/tide.yaml" ca init | grep -E '^(CA sha256|controller names)' | sed 's/^/up: cluster CA made: /'
fi
if [ -n "${UP[tidectld]:-}" ]; then
  echo "up: tidectld runs (pid $(pidfile_pid "$H/ctl/tidectld.pid")): kept"
else
  start_daemon ctl "$H/ctl/tidectld.pid" "$H/ctl/tidectld.log" "$BIN/tidectld" --config "$H/ctl/tide.yaml"
  STARTED+=(tidectld)
fi

if [ -n "$WANT_CTRD" ]; then
  if [ -n "$CTRD_UP" ]; then
    echo "up: the private containerd runs (pid $(pidfile_pid "$CTRD_DIR/containerd.pid")): kept"
  else
    "${PIN[@]}" scripts/containerd-private.sh start "$CTRD_DIR"
    STARTED+=(containerd)
    if scripts/build-test-image.sh "$CTRD_DIR/tide-test-bb.tar" >/dev/null 2>&1; then
      "$BIN/tide" image --containerd-socket "$CTRD_DIR/containerd.sock" import "$CTRD_DIR/tide-test-bb.tar" | sed 's/^/up: /'
    else
      echo "up: busybox-static not installed: no test image (apt-get install busybox-static; scripts/build-test-image.sh)"
    fi
  fi
fi

# join NODE: a join token from the controller (over its socket, as
# root on its host), handed to tided join in the node's namespace on
# standard input (never on a command line).
join_node() {
  local n=$1 tok
  tok=$("$BIN/tidectld" --config "$H/ctl/tide.yaml" node-token create --ttl 10m --node "$n" 2>"$H/ctl/node-token.err") ||
    die "no join token for $n from the controller: $(tail -1 "$H/ctl/node-token.err")"
  netns_enter "$n"
  printf '%s\n' "$tok" | "${NETNS_ENTER[@]}" "$BIN/tided" --config "$H/$n/tided.yaml" join --token - | sed -n "1s/^/up: $n: /p" ||
    die "tided join on $n failed"
}
if [ -n "$HAVE_TLS" ]; then
  umask 077
  cmp -s "$CA" "$H/login/ca.crt" || cp "$CA" "$H/login/ca.crt"
  umask 022
  chmod 644 "$H/login/ca.crt"
  for n in "${NETNS_NODES[@]}"; do
    [ -f "$H/$n/tls/node.pem" ] && continue
    # The controller must answer before it can hand out tokens.
    for _ in $(seq 1 100); do
      TIDE_SOCKET=$H/ctl/private/tidectld.sock "$BIN/sinfo" -h >/dev/null 2>&1 && break
      started "$H/ctl/tidectld.pid" || die "tidectld exited; its log: $(tail -5 "$H/ctl/tidectld.log")"
      sleep 0.1
    done
    write_cfg "$H/$n/tided.yaml" "${NODE_CFG[$n]}"
    join_node "$n"
  done
fi

NEWNODES=()
for n in "${NETNS_NODES[@]}"; do
  mkdir -p "$NODESTATE/$n"
  write_cfg "$H/$n/tided.yaml" "${NODE_CFG[$n]}"
  [ -n "${UP[tided-$n]:-}" ] && continue
  start_daemon "$n" "$H/$n/tided.pid" "$H/$n/tided.log" "${PIN[@]}" "$BIN/tided" --config "$H/$n/tided.yaml"
  NEWNODES+=("$n")
  STARTED+=("tided $n")
done
if [ -n "$NODE_CPUS" ]; then
  echo "up: the nodes and their jobs run on host CPUs $NODE_CPUS (TIDE_NODE_CPUS=all: on every CPU)"
fi

cat >"$RUN/env.sh" <<ENV
# Source this file to use the netns cluster as root on the controller's
# host (its unix socket): . $RUN/env.sh
# Users work on the login node: scripts/login.sh USER [COMMAND...]
export PATH="$BIN:\$PATH"
export TIDE_SOCKET="$H/ctl/private/tidectld.sock"
ENV
chmod 644 "$RUN/env.sh"

# Wait until every node responds (as up.sh), asking over the
# controller's unix socket.
export TIDE_SOCKET="$H/ctl/private/tidectld.sock"
states=
for _ in $(seq 1 150); do
  started "$H/ctl/tidectld.pid" || { echo "up: tidectld exited; its log:" >&2; tail -20 "$H/ctl/tidectld.log" >&2; exit 1; }
  ok=1
  for n in "${NETNS_NODES[@]}"; do
    started "$H/$n/tided.pid" || { echo "up: tided $n exited; its log:" >&2; tail -20 "$H/$n/tided.log" >&2; exit 1; }
  done
  for n in "${NEWNODES[@]}"; do
    grep -q "registered with controller" "$H/$n/tided.log" 2>/dev/null || ok=
  done
  states=$("$BIN/sinfo" -h -N -o '%N %t' 2>/dev/null | sort -u || true)
  for n in "${NETNS_NODES[@]}"; do
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
    echo "up: netns cluster on bridge $NETNS_BRIDGE ($NETNS_NET.0/24): ctl $CTL (tidectld pid $(pidfile_pid "$H/ctl/tidectld.pid")), login $(netns_addr login), $NNODES tided ($(netns_addr gpu01)...); nodes: $summary"
    echo "up: users: scripts/login.sh USER [COMMAND...] (on the login node, TIDE_CONTROLLER=$CTL:$NETNS_API_PORT, MUNGE); root on the controller: . $RUN/env.sh"
    exit 0
  fi
  sleep 0.2
done
hint=
if [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ]; then
  hint=" (br_netfilter passes bridged packets through iptables here: a FORWARD policy of DROP, as Docker sets, cuts the hosts off; sysctl net.bridge.bridge-nf-call-iptables=0 or an ACCEPT rule for $NETNS_BRIDGE)"
fi
echo "up: the nodes did not all respond in 30 s (states: $(tr '\n' ' ' <<<"${states:-none}")); see $H/*/*.log$hint" >&2
exit 1
