#!/usr/bin/env bash
# bench-tide.sh — the local-cluster half of `make bench` and `make
# bench-vs-slurm`: scripts/bench-cluster.sh against a private Tide
# cluster (TIDE_RUN, TIDE_PORT), TSV rows on stdout.
#
# The main pass runs the nodes without job cgroups (cgroups: off), as
# the reference Slurm runs (ProctrackType=proctrack/pgid,
# TaskPlugin=task/none): both sides then track a job by its process
# group, and the columns compare like with like. A second, shorter pass
# on a fresh cluster with job cgroups (cgroups: auto, the default) adds
# the rows drain_*_cgroups, array_drain_cgroups and
# start_latency_cgroups, so that their cost is on the table too
# (CGROUP_PASS=0 skips it).
#
# With TIDE_HOSTS=netns the cluster's hosts are network namespaces
# (scripts/netns-up.sh) and bench-cluster.sh runs on the login node
# (scripts/login.sh) as TIDE_BENCH_USER (default: the user running this,
# as the single-host pass does): every command goes over TCP to the
# controller's api_addr with a MUNGE credential that the login node's
# munged makes and the controller's munged decodes.
#
# TIDE_BENCH_PARTS replaces the main pass's measures (bench-cluster.sh's
# PARTS, e.g. "start pending").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
: "${TIDE_RUN:?}" "${TIDE_PORT:?}"
export TIDE_RUN TIDE_PORT
trap '"$ROOT/scripts/down.sh" >/dev/null 2>&1 || true' EXIT

# pass TIDED_EXTRA PARTS SUFFIX
pass() {
  "$ROOT/scripts/down.sh" >/dev/null 2>&1 || true
  rm -rf "$TIDE_RUN"
  TIDE_TIDED_EXTRA=$1 "$ROOT/scripts/up.sh" >&2
  if [ "${TIDE_HOSTS:-}" = netns ]; then
    local work=$TIDE_RUN/work v vars=()
    mkdir -p "$work"
    chmod 1777 "$work"
    # login.sh starts from a clean environment: bench-cluster.sh's
    # settings go on its command line.
    for v in NJOBS DRAIN_N PENDING START_N LAT_N CONTAINER_IMAGE; do
      [ -n "${!v:-}" ] && vars+=("$v=${!v}")
    done
    (cd "$work" && "$ROOT/scripts/login.sh" "${TIDE_BENCH_USER:-$(id -un)}" env TARGET=tide PARTS="$2" SUFFIX="$3" \
      CTLD_PID="$(cat "$TIDE_RUN/hosts/ctl/tidectld.pid")" WORK="$work" "${vars[@]}" bash "$ROOT/scripts/bench-cluster.sh")
  else
    (
      # shellcheck disable=SC1091
      . "$TIDE_RUN/env.sh"
      export TARGET=tide PARTS=$2 SUFFIX=$3
      CTLD_PID=$(cat "$TIDE_RUN/tidectld.pid") WORK=$TIDE_RUN/work "$ROOT/scripts/bench-cluster.sh"
    )
  fi
  "$ROOT/scripts/down.sh" >/dev/null 2>&1 || true
}

if [ "${TIDE_HOSTS:-}" = netns ]; then
  echo "== Tide in the netns mode: clients on the login node, over TCP with MUNGE credentials" >&2
fi
echo "== Tide, job cgroups off (like the reference Slurm: proctrack/pgid, task/none)" >&2
pass 'cgroups: "off"' "${TIDE_BENCH_PARTS:-drain array start container pending}" ""
if [ "${CGROUP_PASS:-1}" != 0 ]; then
  echo "== Tide, job cgroups on (cgroups: auto): drains and start latency again" >&2
  pass "" "drain array start" "_cgroups"
fi
