#!/bin/bash
# Measures, against a real FRR in network namespaces (frrt-*), how long the
# router keeps a node's route after the node fails: frozen speaker
# (SIGSTOP), cut link, and SIGKILL for reference, with BFD (100ms x 3) and
# with the hold timer alone (3s, keepalive 1s), min/median/max over RUNS
# runs; and how long FRR takes to learn VIPS VIPs. Needs root and Debian's
# frr package. The last line is
#   RESULT bgp_withdraw_median_ms_bfd=<n> bgp_withdraw_median_ms_holdtimer=<n>
# (medians of the silent failures, SIGSTOP and link cut pooled).
# Usage: RUNS=5 VIPS=10000 speaker/bgp/bench/bench-bgp.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! go test -v -count=1 -timeout 30m -run '^TestFRRWithdrawBench$' ./speaker/bgp/ -args \
  -bgp.bench -bgp.bench.runs="${RUNS:-5}" -bgp.bench.vips="${VIPS:-10000}" >"$out" 2>&1; then
  cat "$out"
  exit 1
fi
grep -v -E '^(RESULT |ok |PASS$|=== |--- )' "$out" || true
grep '^RESULT ' "$out" | tail -1
