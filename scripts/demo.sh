#!/usr/bin/env bash
# demo.sh — submit the scripts in examples/ to the local cluster (make up)
# and show squeue, sinfo and sacct while they run and after they finish.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
RUN=${TIDE_RUN:-$ROOT/run}
# shellcheck disable=SC1091
. "$RUN/env.sh"
DEMO=$RUN/demo
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
for f in "$DEMO"/out-*.txt; do echo "--- $f"; cat "$f"; done
echo
echo "$ tide events ${ids[0]}"; tide events "${ids[0]}"
echo
echo "The cluster is still up: '. $RUN/env.sh' to use it, 'make down' to stop it."
