#!/usr/bin/env bash
# Scale benchmark: the real metalgate binary (controller, speaker, proxy) against a real
# kube-apiserver and etcd (envtest) loaded with SERVICES LoadBalancer Services, INGRESSES
# Ingresses and SERVICES × ENDPOINTS_PER_SERVICE endpoints (defaults 10,000 / 10,000 / 10 =
# 100,000). Measures the controller's allocation time and RSS, the speaker's RSS with every
# address announced at layer 2, the proxy's RSS and start → ready time with that table, and
# endpoint change → routed through the proxy (CHANGES times). The speaker and the proxy run in
# a network namespace of their own (PREFIX, default bs-), so this needs root.
# What each phase does: e2e/cmd/benchscale/main.go. Prints a table (figure, value, goal, met)
# and, as its last line:
#   RESULT controller_rss_mib=<n> speaker_rss_mib=<n> proxy_rss_mib=<n> proxy_ready_s=<s>
#     endpoint_update_p99_ms=<ms> alloc_10k_s=<s>
# (one line; alloc_10k_s is the time for SERVICES, whatever their number).
# Usage: sudo hack/bench-scale.sh   (quick run: SERVICES=1000 CHANGES=20 hack/bench-scale.sh).
# METALGATE_BIN: use this binary instead of building one; LOGS=<dir>: keep the processes' logs;
# BENCH_SCALE_ARGS: more flags for benchscale (e.g. --controller-args "--kube-api-qps=500").
# The full size takes about 5–10 minutes on 2 shared cores, most of it loading the API server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)

SERVICES=${SERVICES:-10000}
INGRESSES=${INGRESSES:-$SERVICES}
ENDPOINTS_PER_SERVICE=${ENDPOINTS_PER_SERVICE:-10}
CHANGES=${CHANGES:-100}
WORKERS=${WORKERS:-64}
PREFIX=${PREFIX:-bs-}
LOGS=${LOGS:-}
export KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS:-$ROOT/bin/k8s-v1.35.4}

if [ "$(id -u)" != 0 ]; then
	echo "bench-scale: needs root (the speaker and the proxy run in a network namespace)" >&2
	exit 1
fi
if [ ! -x "$KUBEBUILDER_ASSETS/kube-apiserver" ]; then
	echo "bench-scale: no kube-apiserver in $KUBEBUILDER_ASSETS (make kube-bin)" >&2
	exit 1
fi

tmp=$(mktemp -d /tmp/bench-scale.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${METALGATE_BIN:-}" ]; then
	cp "$METALGATE_BIN" "$tmp/metalgate"
else
	echo ">> building metalgate and benchscale"
	CGO_ENABLED=0 go build -trimpath -o "$tmp/metalgate" ./cmd/metalgate
fi
go build -o "$tmp/benchscale" ./e2e/cmd/benchscale

args=(-metalgate "$tmp/metalgate" -services "$SERVICES" -ingresses "$INGRESSES"
	-endpoints-per-service "$ENDPOINTS_PER_SERVICE" -changes "$CHANGES" -workers "$WORKERS" -prefix "$PREFIX")
[ -z "$LOGS" ] || args+=(-logs "$LOGS")
# shellcheck disable=SC2206 # BENCH_SCALE_ARGS is word-split on purpose
args+=(${BENCH_SCALE_ARGS:-})
"$tmp/benchscale" "${args[@]}"
