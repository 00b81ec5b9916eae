// Command caddy is Caddy built with its standard modules, for hack/bench-proxy.sh: a peer
// the proxy is measured against. It is a module of its own (hack/caddy/go.mod), so the
// project's go.mod does not depend on Caddy; `make caddy` builds it into ./bin.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() {
	caddycmd.Main()
}
