#!/usr/bin/env bash
# bench-table.sh GO_BENCH_TXT TIDE_TSV [SLURM_TSV] — print the benchmark
# table; with a Slurm column, also the ratio Slurm/Tide for each row
# (above 1 means Tide is faster or smaller).
set -uo pipefail
GOB=$1 TIDE=$2 SLURM=${3:-}
label() {
  # A second pass's rows (bench-tide.sh) carry a suffix: the base row's
  # label, marked.
  case $1 in
    *_cgroups) echo "$(label "${1%_cgroups}") [job cgroups]"; return;;
  esac
  case $1 in
    submit_rate_1) echo "sbatch submissions, 1 client";;
    submit_rate_4) echo "sbatch submissions, 4 parallel clients";;
    submit_rate_16) echo "sbatch submissions, 16 parallel clients";;
    drain_1) echo "drain 1,000 --wrap true jobs (1 client)";;
    drain_4) echo "drain 1,000 --wrap true jobs (4 clients)";;
    drain_16) echo "drain 1,000 --wrap true jobs (16 clients)";;
    speed_ref) echo "machine speed: shell loop of /bin/true (per run)";;
    array_submit) echo "sbatch --array=0-999 (one submission)";;
    array_drain) echo "drain a 1,000-task array (vs drain_1)";;
    start_latency) echo "submit -> start, idle cluster";;
    burst_accept) echo "10,000 sbatch from 16 clients into a 50/s queue: all answered";;
    burst_accepted) echo "  ... distinct job ids returned";;
    burst_known) echo "  ... jobs the controller holds (none lost)";;
    burst_buffered) echo "  ... of them waited in the submission buffer";;
    burst_squeue) echo "  ... squeue during the storm";;
    first_line_process) echo "submit -> first output line, process job";;
    start_latency_container) echo "submit -> first output line, container job";;
    rss_idle) echo "controller memory, idle";;
    rss_pending) echo "controller memory, 10,000 pending";;
    squeue_pending) echo "squeue, 10,000 pending";;
    squeue_j_pending) echo "squeue -j ID, 10,000 pending";;
    sinfo_pending) echo "sinfo, 10,000 pending";;
    sbatch_pending) echo "sbatch --hold, 10,000 pending";;
    cancel_all_pending) echo "scancel 10,000 pending, until empty";;
    sim_rss_philly) echo "tide-sim Philly 96x8 3 policies peak RSS";;
    sim_wall_philly) echo "tide-sim Philly 96x8 3 policies wall time";;
    *) echo "$1";;
  esac
}
printf '%-58s %-7s %12s %12s' "measure" "unit" "tide p50" "tide p99"
[ -n "$SLURM" ] && printf ' %12s %12s %8s' "slurm p50" "slurm p99" "ratio"
printf '\n'
while IFS=$'\t' read -r key unit med p99 n; do
  printf '%-58s %-7s %12s %12s' "$(label "$key")" "$unit" "$med" "$p99"
  if [ -n "$SLURM" ]; then
    # Rows of the job-cgroups pass compare with the same Slurm row.
    s=$(awk -F'\t' -v k="${key%_cgroups}" '$1==k {print $3" "$4}' "$SLURM")
    smed=${s%% *}; sp99=${s##* }
    ratio=$(awk -v t="$med" -v s="$smed" -v u="$unit" 'BEGIN{
      if (t == "-" || s == "" || s == "-" || t+0 == 0 || s+0 == 0) { print "-"; exit }
      if (u == "jobs/s") printf "%.2f", t/s; else printf "%.2f", s/t }')
    printf ' %12s %12s %8s' "${smed:--}" "${sp99:--}" "$ratio"
  fi
  printf '\n'
done < "$TIDE"
if [ -s "$GOB" ]; then
  echo
  printf '%-60s %14s %12s %12s  %s\n' "Go benchmark" "ns/op" "B/op" "allocs/op" "reported metrics"
  # Fields come in value/unit pairs after the iteration count; units
  # other than the standard three are the benchmark's own metrics
  # (b.ReportMetric: decisions/s, p99-ns, ...).
  awk '/^Benchmark/ {b=""; a=""; x="";
       for (i=3;i<NF;i+=2) { u=$(i+1); if (u=="B/op") b=$(i); else if (u=="allocs/op") a=$(i); else if (u!="ns/op") x=x " " $(i) " " u }
       printf "%-60s %14s %12s %12s %s\n", $1, $3, b, a, x}' "$GOB"
fi
