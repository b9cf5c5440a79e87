#!/usr/bin/env bash
# up.sh — start a local development cluster: one tidectld and four tided
# (gpu[01-04], each declaring 8 fake 80 GB GPUs, 64 CPUs and 512 GB) on
# 127.0.0.1 under ./run, wait until every node is idle, and write
# run/env.sh. Stop it with scripts/down.sh (make down).
#
# Environment: TIDE_PORT (default 6817), TIDE_RUN (default ./run),
# TIDE_NODES (default 4), TIDE_CTLD_EXTRA (YAML appended to the
# controller's config: queues, qos, scheduler settings), TIDE_CONTAINERD
# (auto; "off" skips the private containerd), TIDE_BIN (default ./bin),
# TIDE_TIDED_EXTRA (YAML appended to every tided's config),
# TIDE_NODE_CPUS (the host CPUs the nodes and their jobs run on:
# scripts/node-cpus.sh; "all" for every CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
RUN=${TIDE_RUN:-$ROOT/run}
PORT=${TIDE_PORT:-6817}
NNODES=${TIDE_NODES:-4}
BIN=${TIDE_BIN:-$ROOT/bin}

if [ -f "$RUN/tidectld.pid" ] && kill -0 "$(cat "$RUN/tidectld.pid")" 2>/dev/null; then
  echo "up: a local cluster is already running (pid $(cat "$RUN/tidectld.pid")); run make down first" >&2
  exit 1
fi
for b in tide tidectld tided; do
  [ -x "$BIN/$b" ] || { echo "up: $BIN/$b missing; run make build" >&2; exit 1; }
done

# The nodes keep to some of the host's CPUs (scripts/node-cpus.sh):
# decided before anything starts, so that a bad TIDE_NODE_CPUS starts
# nothing.
NODE_CPUS=$("$ROOT/scripts/node-cpus.sh")
PIN=()
[ -n "$NODE_CPUS" ] && PIN=(taskset -c "$NODE_CPUS")

mkdir -p "$RUN/nodes"
# Other local users use this cluster too: they need to reach the socket
# and env.sh (the key and the state stay private).
chmod 755 "$RUN" "$RUN/nodes"
[ -f "$RUN/cluster.key" ] || "$BIN/tidectld" keygen "$RUN/cluster.key"

if [ "$(id -u)" = 0 ]; then ROOTJOBS=true; else ROOTJOBS=false; fi
last=$(printf 'gpu%02d' "$NNODES")
half=$(( (NNODES + 1) / 2 ))
cat > "$RUN/tide.yaml" <<YAML
version: 1
cluster_name: dev
state_dir: $RUN/ctld
socket: $RUN/tidectld.sock
node_addr: 127.0.0.1:$PORT
key_file: $RUN/cluster.key
allow_root_jobs: $ROOTJOBS
timeouts:
  node: 30s
  kill_wait: 5s
  min_job_age: 5m
partitions:
  - name: gpu
    nodes: gpu[01-$(printf %02d "$NNODES")]
    default: true
    default_time: "1:00:00"
    max_time: UNLIMITED
nodes:
  - names: gpu[01-$(printf %02d "$NNODES")]
    cpus: 64
    memory: 512G
    gpus: 8
topology:
  switches:
    - name: s1
      nodes: gpu[01-$(printf %02d "$half")]
$( [ "$NNODES" -gt "$half" ] && printf '    - name: s2\n      nodes: gpu[%02d-%02d]\n    - name: top\n      switches: s[1-2]\n' $((half + 1)) "$NNODES")
YAML
[ -n "${TIDE_CTLD_EXTRA:-}" ] && printf '%s\n' "$TIDE_CTLD_EXTRA" >> "$RUN/tide.yaml"

# Five daemons share this one machine (on a real cluster each has its
# own): one Go P each keeps their schedulers from spinning against each
# other for the few cores there are. Export GOMAXPROCS to override.
export GOMAXPROCS=${GOMAXPROCS:-1}
"$BIN/tidectld" --config "$RUN/tide.yaml" >"$RUN/tidectld.log" 2>&1 &
echo $! > "$RUN/tidectld.pid"

# Job directories go on tmpfs when there is one, as on a real node
# (state_dir /run/tided): see etc/tided.yaml. down.sh removes them.
NODESTATE=$RUN/nodes
if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
  NODESTATE=$(mktemp -d "/dev/shm/tide-$(id -u)-$PORT.XXXXXX")
  chmod 755 "$NODESTATE"
fi
echo "$NODESTATE" > "$RUN/nodes/state-dir"

# Container jobs: a private containerd under run/containerd when we are
# root and containerd is installed (stopped by down.sh), with the busybox
# test image imported as docker.io/tide-test/bb:latest.
CTRD_YAML=
if [ "${TIDE_CONTAINERD:-auto}" = off ]; then
  echo "up: TIDE_CONTAINERD=off: nodes run without container support"
elif [ "$(id -u)" != 0 ]; then
  echo "up: not root: nodes run without container support (containerd needs root)"
elif ! command -v containerd >/dev/null || ! command -v runc >/dev/null; then
  echo "up: containerd or runc not installed (apt-get install containerd runc): nodes run without container support"
else
  # Its containers are the nodes' jobs too: same CPUs.
  "${PIN[@]}" scripts/containerd-private.sh start "$RUN/containerd"
  CTRD_SOCK=$RUN/containerd/containerd.sock
  CTRD_YAML="containerd: {socket: $CTRD_SOCK, namespace: tide}"
  if scripts/build-test-image.sh "$RUN/containerd/tide-test-bb.tar" >/dev/null 2>&1; then
    "$BIN/tide" image --containerd-socket "$CTRD_SOCK" import "$RUN/containerd/tide-test-bb.tar" | sed 's/^/up: /'
  else
    echo "up: busybox-static not installed: no test image (apt-get install busybox-static; scripts/build-test-image.sh)"
  fi
fi

# Job cgroups (where tided can make them) under a parent of this
# cluster's own: several local clusters reuse job ids.
CGPARENT=tide-dev-$PORT
echo "$CGPARENT" > "$RUN/nodes/cgroup-parent"
for i in $(seq 1 "$NNODES"); do
  n=$(printf 'gpu%02d' "$i")
  mkdir -p "$NODESTATE/$n"
  cat > "$RUN/nodes/$n.yaml" <<YAML
version: 1
name: $n
controller: 127.0.0.1:$PORT
key_file: $RUN/cluster.key
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
  # taskset execs tided: $! is tided's own pid.
  "${PIN[@]}" "$BIN/tided" --config "$RUN/nodes/$n.yaml" >"$RUN/nodes/$n.log" 2>&1 &
  echo $! > "$RUN/nodes/$n.pid"
done
if [ -n "$NODE_CPUS" ]; then
  echo "up: the nodes and their jobs run on host CPUs $NODE_CPUS (TIDE_NODE_CPUS=all: on every CPU)"
fi

cat > "$RUN/env.sh" <<ENV
# Source this file to use the local Tide cluster: . $RUN/env.sh
export PATH="$BIN:\$PATH"
export TIDE_SOCKET="$RUN/tidectld.sock"
ENV
chmod 644 "$RUN/env.sh"

export TIDE_SOCKET="$RUN/tidectld.sock"
for _ in $(seq 1 150); do
  states=$("$BIN/sinfo" -h -N -o '%t' 2>/dev/null | sort -u | tr '\n' ' ' || true)
  if [ "$states" = "idle " ]; then
    echo "up: tidectld (pid $(cat "$RUN/tidectld.pid")) and $NNODES tided are up; all nodes idle"
    echo "up: run '. $RUN/env.sh' to use sbatch, squeue, sinfo, scancel, scontrol, sacct"
    exit 0
  fi
  if ! kill -0 "$(cat "$RUN/tidectld.pid")" 2>/dev/null; then
    echo "up: tidectld exited; its log:" >&2; tail -20 "$RUN/tidectld.log" >&2; exit 1
  fi
  sleep 0.2
done
echo "up: nodes did not become idle in 30 s (states: ${states:-none}); see $RUN/*.log" >&2
exit 1
