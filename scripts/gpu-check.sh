#!/usr/bin/env bash
# gpu-check.sh — on a machine with a real NVIDIA GPU: start a one-node
# Tide cluster whose tided discovers the GPUs through NVML, run a job that
# asks for one GPU and prints what it sees, and check it against the
# driver (nvidia-smi). Exits non-zero on any mismatch. Everything runs
# under a temporary directory on 127.0.0.1 and is stopped by PID.
#
# Usage: scripts/gpu-check.sh   (after make build; needs nvidia-smi)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN=$ROOT/bin
command -v nvidia-smi >/dev/null || { echo "gpu-check: nvidia-smi not found" >&2; exit 2; }
for b in tide tidectld tided tide-stepd; do [ -x "$BIN/$b" ] || { echo "gpu-check: $BIN/$b missing (make build)" >&2; exit 2; }; done

D=$(mktemp -d /tmp/tide-gpu-check.XXXXXX)
chmod 755 "$D"
PORT=${TIDE_PORT:-6899}
NGPU=$(nvidia-smi -L | grep -c '^GPU ')
[ "$NGPU" -gt 0 ] || { echo "gpu-check: nvidia-smi lists no GPU" >&2; exit 1; }
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  [ "${KEEP:-0}" = 1 ] || rm -rf "$D"
}
trap cleanup EXIT
fail() { echo "gpu-check: FAIL: $*" >&2; echo "--- logs in $D" >&2; KEEP=1; exit 1; }

"$BIN/tidectld" keygen "$D/key"
cat > "$D/tide.yaml" <<YAML
version: 1
cluster_name: gpucheck
state_dir: $D/ctld
socket: $D/ctld.sock
node_addr: 127.0.0.1:$PORT
key_file: $D/key
allow_root_jobs: true
partitions: [{name: gpu, nodes: node1, default: true}]
nodes: [{names: node1, gpus: $NGPU}]
YAML
cat > "$D/tided.yaml" <<YAML
version: 1
name: node1
controller: 127.0.0.1:$PORT
key_file: $D/key
state_dir: $D/node
gpus: {source: nvml}
allow_root_jobs: true
heartbeat: 2s
YAML
"$BIN/tidectld" --config "$D/tide.yaml" >"$D/tidectld.log" 2>&1 & pids+=($!)
sleep 0.5
"$BIN/tided" --config "$D/tided.yaml" >"$D/tided.log" 2>&1 & pids+=($!)
export TIDE_SOCKET=$D/ctld.sock
for _ in $(seq 100); do
  [ "$("$BIN/sinfo" -h -N -o %t 2>/dev/null)" = idle ] && break
  kill -0 "${pids[1]}" 2>/dev/null || fail "tided exited: $(tail -5 "$D/tided.log")"
  sleep 0.2
done
[ "$("$BIN/sinfo" -h -N -o %t)" = idle ] || fail "node did not become idle"

# The inventory the node reported must be the driver's.
"$BIN/scontrol" show node node1 > "$D/node.txt"
grep -q "Gres=gpu:.*:$NGPU" "$D/node.txt" || fail "node reports $(grep -o 'Gres=[^ ]*' "$D/node.txt"), driver lists $NGPU GPUs"

mkdir -p "$D/work"; chmod 777 "$D/work"; cd "$D/work"
id=$("$BIN/sbatch" --parsable --gpus=1 -o check-%j.out --wrap \
  'echo "CVD=$CUDA_VISIBLE_DEVICES NVD=$NVIDIA_VISIBLE_DEVICES"; nvidia-smi --query-gpu=index,uuid --format=csv,noheader -i "$CUDA_VISIBLE_DEVICES"; nvidia-smi -L')
for _ in $(seq 150); do
  st=$("$BIN/sacct" -X -j "$id" -P -n --format=State)
  case $st in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break;; esac
  sleep 0.2
done
[ "$st" = COMPLETED ] || fail "job $id ended $st: $(cat "check-$id.out" 2>/dev/null)"
out=$(cat "check-$id.out")
echo "$out"
cvd=$(sed -n 's/^CVD=\([^ ]*\) .*/\1/p' <<<"$out")
nvd=$(sed -n 's/.* NVD=\(.*\)$/\1/p' <<<"$out")
[ -n "$cvd" ] && [ "${cvd//[0-9]/}" = "" ] || fail "CUDA_VISIBLE_DEVICES is '$cvd', want one index"
smi_uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i "$cvd" | tr -d ' ')
[ "$nvd" = "$smi_uuid" ] || fail "NVIDIA_VISIBLE_DEVICES=$nvd but GPU $cvd is $smi_uuid"
echo "gpu-check: OK: $NGPU GPU(s) discovered through NVML; job $id got GPU $cvd ($smi_uuid)"
