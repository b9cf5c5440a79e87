#!/usr/bin/env bash
# node-cpus.sh — print the host CPUs (a list for `taskset -c`) that the
# emulated nodes of a local cluster run on, or nothing for "every CPU".
#
# On a real cluster the compute nodes are other machines than the login
# node where sbatch and squeue run and the controller's host. A local
# cluster puts all of them on one machine; by default its nodes (tided,
# their supervisors and jobs) keep to the upper half of the CPUs this
# shell may use, so that a busy node cannot starve the shell, the CLI or
# the controller, which may run anywhere. The reference Slurm's nodes get
# the same CPUs in `make bench-vs-slurm`.
#
# TIDE_NODE_CPUS overrides: a CPU list ("2-3", "1,3") or "all" (no
# confinement). With fewer than two CPUs, without taskset, or where
# affinities cannot be set, nodes run everywhere.
set -euo pipefail
case "${TIDE_NODE_CPUS:-}" in
  all) exit 0 ;;
  "") ;;
  *)
    if ! taskset -c "$TIDE_NODE_CPUS" true 2>/dev/null; then
      echo "node-cpus: TIDE_NODE_CPUS=$TIDE_NODE_CPUS is not a list of CPUs this host lets us use (example: 1 or 2-3; all for no confinement)" >&2
      exit 1
    fi
    echo "$TIDE_NODE_CPUS"
    exit 0
    ;;
esac
command -v taskset >/dev/null || exit 0
allowed=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)
cpus=()
IFS=, read -ra parts <<< "$allowed"
for p in "${parts[@]}"; do
  if [[ $p == *-* ]]; then
    for ((c = ${p%-*}; c <= ${p#*-}; c++)); do cpus+=("$c"); done
  elif [ -n "$p" ]; then
    cpus+=("$p")
  fi
done
n=${#cpus[@]}
((n >= 2)) || exit 0
# The login side keeps the larger half: with 2 CPUs the nodes get the
# second, with 3 the third, with 4 the last two. Where setting an
# affinity is not allowed (some containers), nodes run everywhere.
list=$(IFS=,; echo "${cpus[*]:$(((n + 1) / 2))}")
taskset -c "$list" true 2>/dev/null || exit 0
echo "$list"
