#!/usr/bin/env bash
# Layer-2 failover benchmark (needs root): three node network namespaces on a bridge, each
# running the real `metalgate speaker --static-config`, and a client namespace. Each run SIGKILLs
# the speaker owning the VIP and measures the time until the client namespace sees an ARP reply
# / neighbour advertisement carrying the new owner's MAC (the gratuitous burst, or the answer to
# the client's 20ms probes). RUNS runs per family (default 10); prints min/median/max and, as
# the LAST line:
#   RESULT l2_failover_median_ms_v4=<n> l2_failover_median_ms_v6=<n>
# Namespaces are named l2t-<id>-* and are deleted at the end, even on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS="${RUNS:-10}"
if [[ $(id -u) -ne 0 ]]; then
	echo "bench-failover: needs root and network namespaces (run as root)" >&2
	exit 1
fi
tmp=$(mktemp -d /tmp/l2t-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/metalgate" ./cmd/metalgate
out="$tmp/out"
METALGATE_BIN="$tmp/metalgate" go test -count=1 -timeout 20m -run '^TestBenchFailover$' -v ./speaker/netns \
	-args -bench-failover -bench-runs "$RUNS" >"$out" 2>&1 || { cat "$out" >&2; exit 1; }
grep -E '^failover ' "$out"
grep -E '^RESULT ' "$out" | tail -1
