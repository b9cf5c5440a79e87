#!/usr/bin/env bash
# demo.sh — submit the scripts in examples/ to the local cluster (make up)
# and show squeue, sinfo and sacct while they run and after they finish.
#
# On a netns cluster (TIDE_HOSTS=netns make up) every command runs on the
# login node as TIDE_DEMO_USER (default: the user sudo ran this for, else
# nobody) through scripts/login.sh: over TCP, with MUNGE credentials.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
RUN=${TIDE_RUN:-$ROOT/run}
# shellcheck disable=SC1091
. "$RUN/env.sh"
ME=$(id -u)
USE="'. $RUN/env.sh' to use it"
if [ -f "$RUN/hosts/netns.env" ]; then
  DEMO_USER=${TIDE_DEMO_USER:-${SUDO_USER:-nobody}}
  [ "$DEMO_USER" = root ] && [ -z "${TIDE_DEMO_USER:-}" ] && DEMO_USER=nobody
  ME=$(id -u "$DEMO_USER") || { echo "demo: no user $DEMO_USER (TIDE_DEMO_USER)" >&2; exit 1; }
  USE="'scripts/login.sh USER' to use it"
  echo "netns cluster: every command below runs as $DEMO_USER on the login node (scripts/login.sh $DEMO_USER ...)"
  echo
  # The Slurm commands, as the demo user on the login node.
  for c in sbatch squeue sinfo sacct scontrol tide; do
    eval "$c() { \"\$ROOT/scripts/login.sh\" \"\$DEMO_USER\" $c \"\$@\"; }"
  done
fi
# A fresh directory each time: the outputs of an earlier demo (job ids
# start again at 1 on a new cluster) may belong to another user, whose
# files this run's jobs could not open. When they cannot be removed
# (someone else's, and we are not root), the run takes a new directory.
DEMO=$RUN/demo
rm -rf "$DEMO" 2>/dev/null || true
[ -e "$DEMO" ] && DEMO=$(mktemp -d "$RUN/demo.XXXXXX")
mkdir -p "$DEMO"
chmod 1777 "$DEMO"   # jobs write their output here as their own user
cd "$DEMO"

ids=()
for s in "$ROOT"/examples/*.sh; do
  out=$(sbatch "$s")
  echo "$ out=\$(sbatch examples/$(basename "$s"))  -> $out"
  ids+=("${out##* }")
done
echo
echo "$ squeue"; squeue
echo
echo "$ sinfo"; sinfo
echo
echo "$ sinfo -N -o '%N %t %C %G'"; sinfo -N -o '%N %t %C %G'
echo
echo "waiting for the jobs to finish..."
for _ in $(seq 1 120); do
  [ -z "$(squeue -h -o %i)" ] && break
  sleep 0.5
done
echo "$ squeue"; squeue
echo
list=$(IFS=,; echo "${ids[*]}")
echo "$ sacct -j $list"; sacct -j "$list"
echo
echo "$ sacct -X -j $list -P -n --format=JobID,JobName,State,ExitCode,Elapsed"
sacct -X -j "$list" -P -n --format=JobID,JobName,State,ExitCode,Elapsed
echo
for f in "$DEMO"/out-*.txt "$DEMO"/train-*.out; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done
echo
echo "$ tide events ${ids[0]}"; tide events "${ids[0]}"
echo

# --- one container job (sbatch --container-image), when the nodes run
# containers: up.sh starts a private containerd when one is installed
# and we are root; tided then adds the node feature containerd.
container_job() {
  if ! command -v containerd >/dev/null; then
    echo "containerd is not installed: skipping the container job (apt-get install containerd runc, then make down demo)"
    return 0
  fi
  if ! sinfo -h -N -o '%f' | tr ',' '\n' | grep -qx containerd; then
    echo "no node has the feature containerd (tided runs containers only as root, with containerd and runc installed; see $RUN/nodes/*.log): skipping the container job"
    return 0
  fi
  local img=tide-test/bb tar=$DEMO/tide-test-bb.tar
  echo "$ scripts/build-test-image.sh $tar"
  if ! "$ROOT/scripts/build-test-image.sh" "$tar"; then
    echo "could not build the test image (apt-get install busybox-static): skipping the container job"
    return 0
  fi
  # Every node imports it into the containerd of its configuration (on
  # this one machine they share up.sh's private containerd).
  # (As the nodes' administrator, root: the node configurations of a
  # single-host cluster and of a netns one.)
  local cfg node
  for cfg in "$RUN"/nodes/gpu*.yaml "$RUN"/hosts/gpu*/tided.yaml; do
    [ -f "$cfg" ] || continue
    grep -q '^containerd:' "$cfg" || continue
    node=$(basename "$cfg" .yaml)
    [ "$node" = tided ] && node=$(basename "$(dirname "$cfg")")
    if tided image --config "$cfg" ls 2>/dev/null | grep -q "$img"; then
      echo "$node: $img already imported"
    else
      echo "$ tided image --config ${cfg#"$ROOT"/} import ${tar#"$ROOT"/}"
      tided image --config "$cfg" import "$tar" || { echo "import failed: skipping the container job"; return 0; }
    fi
  done
  echo
  local out cid f
  # shellcheck disable=SC2016
  out=$(sbatch --container-image="$img" -J container -o "$DEMO/container-%j.txt" \
    --wrap 'echo "in the image: $(busybox | head -1)"; echo "root dir: $(ls / | tr "\n" " ")"; echo "/etc/passwd users: $(cut -d: -f1 /etc/passwd | tr "\n" " ")"; echo "uid: $(id -u)"')
  echo "$ sbatch --container-image=$img --wrap '...busybox, ls /, /etc/passwd, id -u...'  -> $out"
  cid=${out##* }
  for _ in $(seq 1 120); do
    [ -z "$(squeue -h -j "$cid" -t PENDING,RUNNING,COMPLETING -o %i 2>/dev/null)" ] && break
    sleep 0.5
  done
  echo "$ sacct -X -j $cid -P -n --format=JobID,JobName,State,ExitCode,NodeList,Constraints"
  sacct -X -j "$cid" -P -n --format=JobID,JobName,State,ExitCode,NodeList,Constraints
  f=$DEMO/container-$cid.txt
  echo "--- $f (submitter's uid $ME)"; cat "$f" 2>/dev/null || echo "(no output)"
}
container_job
echo
echo "The cluster is still up: $USE, 'make down' to stop it."
