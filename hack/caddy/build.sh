#!/usr/bin/env bash
# Builds Caddy into ./bin/caddy-<version> from this module (hack/caddy: caddycmd.Main with the
# standard modules, the version pinned in go.mod, go.sum committed) unless it is there already,
# and prints the binary's path as its last line. A module of its own, so the project's go.mod
# does not gain Caddy. The first build downloads ~170 modules from the Go module proxy and takes
# 5-10 minutes on 2 busy cores; `go build -v` lists the packages as they compile.
# Used by `make caddy` and by hack/bench-proxy.sh (PROXIES with caddy, no CADDY_BIN).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${1:-$here/../../bin}
version=$(awk '{ for (i = 1; i < NF; i++) if ($i == "github.com/caddyserver/caddy/v2") { print $(i + 1); exit } }' "$here/go.mod")
[ -n "$version" ] || { echo "hack/caddy/go.mod does not require github.com/caddyserver/caddy/v2" >&2; exit 1; }
mkdir -p "$bin"
out=$(cd "$bin" && pwd)/caddy-$version
if [ ! -x "$out" ]; then
	echo ">> building caddy $version into $out (hack/caddy, from the Go module proxy; minutes the first time)" >&2
	tmpdir=$(mktemp -d "$(dirname "$out")/.tmp-caddy.XXXXXX")
	trap 'rm -rf "$tmpdir"' EXIT
	(cd "$here" && CGO_ENABLED=0 go build -v -trimpath -o "$tmpdir/caddy" .) 2>&1 |
		awk '{ n++; printf "   [%d] %s\n", n, $0 }' >&2
	"$tmpdir/caddy" version >&2
	mv "$tmpdir/caddy" "$out"
fi
echo "$out"
