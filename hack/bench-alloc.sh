#!/usr/bin/env bash
# Allocator benchmarks: the cost of the first and the last 1,000 allocations of an IPv4 /16
# (65,536 keys) and of 100,000 allocations from an IPv6 /64. Prints the raw `go test -bench`
# output, a table (per window the best of all runs, to filter out noise from other processes
# on the machine), the last1k/first1k ratios, and as its last line:
#   RESULT alloc_last1k_over_first1k=<v4 ratio> alloc_v6_last1k_over_first1k=<v6 ratio>
# Usage: hack/bench-alloc.sh   (ROUNDS, COUNT and BENCHTIME may be overridden from the
# environment). Takes about 30 s on 2 idle cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# `go test -count` repeats a sub-benchmark back to back, so a burst of load would hit one
# window only; ROUNDS separate runs of the whole set interleave the windows instead.
ROUNDS=${ROUNDS:-3}
COUNT=${COUNT:-2}
# Each benchmark iteration is one allocation; every 1,000 iterations the allocator is rebuilt
# and pre-filled (untimed), so 4000x = 4 windows of 1,000 allocations per run.
BENCHTIME=${BENCHTIME:-4000x}

out=$(mktemp)
trap 'rm -f "$out"' EXIT

go test -c -o /dev/null ./allocator/ # fail early on build errors, outside the rounds
for round in $(seq "$ROUNDS"); do
	echo ">> round $round/$ROUNDS"
	go test -run '^$' -bench . -benchmem -benchtime "$BENCHTIME" -count "$COUNT" ./allocator/ | tee -a "$out"
done
echo

# Per benchmark/window: the run with the lowest ns/alloc, and its allocs/alloc.
awk -v count="$((ROUNDS * COUNT))" '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	n = split(name, parts, "/")
	if (n != 2) next
	ns = ""; al = ""
	for (i = 2; i < NF; i++) {
		if ($(i + 1) == "ns/alloc") ns = $i
		if ($(i + 1) == "allocs/alloc") al = $i
	}
	if (ns == "" || al == "") next
	key = parts[1] SUBSEP parts[2]
	if (!(key in best) || ns + 0 < best[key] + 0) { best[key] = ns; allocs[key] = al }
}
END {
	split("BenchmarkFillV4Slash16 BenchmarkFillV6Slash64", benches, " ")
	split("first1k last1k", windows, " ")
	printf "%-24s | %-16s | %12s | %12s\n", "benchmark", "window", "ns/alloc", "allocs/alloc"
	printf "%-24s-+-%-16s-+-%12s-+-%12s\n", "------------------------", "----------------", "------------", "------------"
	for (b = 1; b <= 2; b++) {
		for (w = 1; w <= 2; w++) {
			key = benches[b] SUBSEP windows[w]
			if (!(key in best)) { printf "missing result for %s/%s\n", benches[b], windows[w] > "/dev/stderr"; exit 1 }
			printf "%-24s | %-16s | %12.1f | %12.2f\n", benches[b], windows[w], best[key], allocs[key]
		}
		f = best[benches[b] SUBSEP "first1k"] + 0; l = best[benches[b] SUBSEP "last1k"] + 0
		if (f <= 0) { printf "bad first1k time for %s\n", benches[b] > "/dev/stderr"; exit 1 }
		ratio[b] = l / f
		printf "%-24s | %-16s | %12.2f | %12s\n", benches[b], "last1k/first1k", ratio[b], ""
	}
	printf "(best of %d runs per window)\n", count
	printf "RESULT alloc_last1k_over_first1k=%.2f alloc_v6_last1k_over_first1k=%.2f\n", ratio[1], ratio[2]
}' "$out"
