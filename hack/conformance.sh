#!/usr/bin/env bash
# hack/conformance.sh — run the Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance,
# the release of config/gateway-api) against a lab with metalgate deployed. `make conformance`
# brings the lab up and deploys the operator first, then calls this (root, Linux):
#
#   1. builds the suite's echo backend (package echo-basic) from source in the e2e/conformance
#      module and packs it with hack/image under the reference the suite's manifests name, so
#      the nodes never pull it; imports it into the running lab (metalgate-lab load);
#   2. deploys the speakers and e2e/conformance/lab.yaml (GatewayClass, pools, L2Advertisement);
#   3. runs the e2e/conformance test binary inside the lab client's network namespace (where the
#      VIPs are reachable; the API server is reached on the control plane's segment address);
#   4. prints the summary and the features table (e2e/conformance/cmd/summary) and leaves the
#      report in CONFORMANCE_REPORT (docs/conformance/ for a full run, _out/ for a partial one).
#
# Variables: LAB_PREFIX, LAB_DIR, LAB_IMAGES (as for the lab), CONFORMANCE_RUN_TEST (one test),
# CONFORMANCE_SKIP_TESTS (comma-separated), CONFORMANCE_FEATURES (comma-separated features to claim
# instead of controllers/gateway/claim), CONFORMANCE_ARGS (more test flags).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/bin
: "${LAB_PREFIX:?set LAB_PREFIX (make conformance does)}"
: "${LAB_DIR:?set LAB_DIR (make conformance does)}"
: "${LAB_IMAGES:=$ROOT/_out/images}"
: "${LAB_KUBE_BIN:=$BIN/k8s-v1.35.4}"
export LAB_PREFIX LAB_DIR LAB_IMAGES LAB_KUBE_BIN
GATEWAY_API_VERSION=v1.5.1
ECHO_REF=gcr.io/k8s-staging-gateway-api/echo-basic:v20260204-monthly-2026.01-60-g28382302
CLASS=metalgate-conformance
USABLE=100.64.100.200      # in pool conformance-static (autoAssign false): free until asked for
UNUSABLE=100.64.200.1      # in the lab's VIP range, in no pool
OUT=$ROOT/_out/conformance
mkdir -p "$OUT"

if [ "$(id -u)" != 0 ] || [ "$(uname -s)" != Linux ]; then
	echo "conformance: needs root on Linux (it runs in the lab's network namespaces)" >&2
	exit 1
fi
if [ -n "${CONFORMANCE_RUN_TEST:-}${CONFORMANCE_SKIP_TESTS:-}${CONFORMANCE_FEATURES:-}" ]; then
	REPORT=${CONFORMANCE_REPORT:-$OUT/report.yaml}
else
	REPORT=${CONFORMANCE_REPORT:-$ROOT/docs/conformance/standard-$GATEWAY_API_VERSION-default-report.yaml}
fi
start=$(date +%s)
step() { printf '>> [%4ss] %s\n' "$(($(date +%s) - start))" "$*"; }
kubectl() { "$LAB_KUBE_BIN/kubectl" --kubeconfig "$LAB_DIR/kubeconfig" "$@"; }

step "building the suite's echo backend from source (sigs.k8s.io/gateway-api/conformance $GATEWAY_API_VERSION, echo-basic)"
mkdir -p "$LAB_IMAGES/bin"
(cd "$ROOT/e2e/conformance" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$LAB_IMAGES/bin/echo-basic" sigs.k8s.io/gateway-api/conformance/echo-basic)
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$BIN/image-builder" ./hack/image)
"$BIN/image-builder" -binary "$LAB_IMAGES/bin/echo-basic" -path /echo-basic -tag "$ECHO_REF" -o "$LAB_IMAGES/conformance-echo-basic.tar" >/dev/null
"$BIN/metalgate-lab" load

step "speakers, GatewayClass $CLASS, pools and L2Advertisement (e2e/conformance/lab.yaml)"
kubectl apply -k "$ROOT/config/speaker" >/dev/null
kubectl apply -f "$ROOT/e2e/conformance/lab.yaml" >/dev/null
kubectl -n metalgate-system rollout status daemonset/metalgate-speaker --timeout=300s >/dev/null
kubectl wait --for=condition=Accepted gatewayclass/$CLASS --timeout=120s >/dev/null
# The client reaches the pools' VIPs on its own segment (answered by ARP from the announcing
# node), not through the router, which knows no route to them in layer-2 mode.
ip -n "${LAB_PREFIX}client" route replace 100.64.100.0/24 dev eth0

# The client namespace reaches the API server on the control plane's segment address (in the
# server certificate), not on the root namespace's user link.
port=$(sed -n 's#.*server: https://\[[^]]*\]:\([0-9]*\)$#\1#p' "$LAB_DIR/kubeconfig")
sed "s#server: https://.*#server: https://198.51.100.2:$port#" "$LAB_DIR/kubeconfig" >"$OUT/kubeconfig-client"

step "building the conformance test binary (e2e/conformance)"
(cd "$ROOT/e2e/conformance" && go test -c -o "$BIN/conformance.test" .)

step "running the suite in ${LAB_PREFIX}client (report: ${REPORT#"$ROOT"/})"
version=$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)
args=(-test.v -test.count=1 -test.timeout=60m -test.run '^TestConformance$'
	-gateway-class="$CLASS" -report-output="$REPORT"
	-organization=metalgate -project=metalgate -url=https://github.com/metalgate/metalgate
	-version="$version" -contact=https://github.com/metalgate/metalgate/issues
	-usable-addresses="$USABLE" -unusable-addresses="$UNUSABLE"
	-cleanup-base-resources=true -allow-crds-mismatch=false)
[ -z "${CONFORMANCE_RUN_TEST:-}" ] || args+=(-run-test="$CONFORMANCE_RUN_TEST")
[ -z "${CONFORMANCE_SKIP_TESTS:-}" ] || args+=(-skip-tests="$CONFORMANCE_SKIP_TESTS")
[ -z "${CONFORMANCE_FEATURES:-}" ] || args+=(-supported-features="$CONFORMANCE_FEATURES")
# shellcheck disable=SC2206
args+=(${CONFORMANCE_ARGS:-})
rc=0
(cd "$ROOT/e2e/conformance" && ip netns exec "${LAB_PREFIX}client" env KUBECONFIG="$OUT/kubeconfig-client" \
	"$BIN/conformance.test" "${args[@]}") >"$OUT/test.log" 2>&1 || rc=$?
step "suite finished (exit $rc); log: ${OUT#"$ROOT"/}/test.log"
[ ! -f "$REPORT" ] || chmod 0644 "$REPORT" # the suite writes it 0600; it is meant to be read

features_md=$OUT/features.md
[ "$REPORT" != "$ROOT/docs/conformance/standard-$GATEWAY_API_VERSION-default-report.yaml" ] || features_md=$ROOT/docs/conformance/features.md
(cd "$ROOT/e2e/conformance" && go run ./cmd/summary -report "$REPORT" -log "$OUT/test.log" -features "$features_md") || rc=$((rc ? rc : 1))
step "done in $(($(date +%s) - start)) s"
exit $rc
