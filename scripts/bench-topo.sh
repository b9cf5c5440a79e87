#!/usr/bin/env bash
# bench-topo.sh — issue 4's placement benchmark as a table: decisions per
# second and p99 latency of one placement decision for 1-, 8-, 64- and
# 128-GPU requests on 512 nodes x 8 GPUs in a 3-level tree at 0/50/90 %
# fill, then the mean leaf switches spanned by multi-node jobs, Tide vs a
# topology-blind first fit on the same 3000-job stream.
#
#   scripts/bench-topo.sh            # table on stdout, raw output in $BENCH_OUT
#   PLACE_N=500x scripts/bench-topo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${BENCH_OUT:-bench-results}
mkdir -p "$OUT"
RAW=$OUT/topo-bench.txt
go test -run '^$' -bench 'BenchmarkTopoPlace' -benchtime="${PLACE_N:-300x}" ./ctld/sched/ >"$RAW" 2>&1
go test -run '^$' -bench 'BenchmarkTopoLeafSpan' -benchtime="${SPAN_N:-2x}" ./ctld/sched/ >>"$RAW" 2>&1

# Benchmark lines carry "value unit" pairs after the iteration count.
awk '
function metric(unit,   i) { for (i = 3; i < NF; i++) if ($(i+1) == unit) return $i; return "" }
/^BenchmarkTopoPlace\// {
	split($1, p, "/"); fill = p[2]; sub("fill=", "", fill); gpus = p[3]; sub("gpus=", "", gpus); sub("-[0-9]+$", "", gpus)
	if (!hdr++) {
		printf "%-8s %-6s %14s %12s %9s\n", "request", "fill", "decisions/s", "p99", "placed"
	}
	printf "%-8s %-6s %14.0f %10.2fms %8.1f%%\n", gpus " GPU", fill, metric("decisions/s"), metric("p99-ns") / 1e6, metric("placed-%")
}
/^BenchmarkTopoLeafSpan/ {
	printf "\nmulti-node jobs, mean leaf switches spanned (same stream):\n"
	printf "  tide       %.3f  (placed on arrival %.2f%%)\n", metric("leaves/job-tide"), metric("placed-%-tide")
	printf "  first fit  %.3f  (placed on arrival %.2f%%)\n", metric("leaves/job-firstfit"), metric("placed-%-firstfit")
}
/^(FAIL|panic)/ { bad = 1 }
END { if (bad) { print "benchmark failed: see raw output" > "/dev/stderr"; exit 1 } }
' "$RAW"
