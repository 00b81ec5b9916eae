package table

import "strings"

// TLS passthrough on a Gateway: a TLS listener in mode Passthrough takes TLSRoutes, chosen by
// the server name of the ClientHello (the connection is never decrypted). Its routes live in
// the same listener index as HTTPRoutes (gwListener.hosts, by effective hostname), so a
// patched table (PatchEndpoints) remaps their backends like every other route's.

// AddPassthroughListener adds a TLS listener in mode Passthrough on port, with its hostname
// ("" for any), and returns its index for AddListenerRoute, as AddListener does.
func (b *Builder) AddPassthroughListener(port int32, name, hostname string) int {
	i := b.AddListener(port, name, hostname, false)
	b.listeners[i].passthrough = true
	return i
}

// GatewayPassthrough returns the route a TLS connection with server name sni, accepted on
// local port port, is passed through to: of the passthrough listeners of that port, the one
// with the most specific hostname covering sni answers alone, with the route of the exact
// name, else of the most specific wildcard, else of any name (the oldest route first). nil
// when none takes it, or sni is empty: the connection is then closed, never given to another
// route. passthrough says whether port has passthrough listeners at all (an Ingress table,
// or a port of HTTP and HTTPS listeners, has none).
func (t *Table) GatewayPassthrough(port int32, sni string) (r *Route, passthrough bool) {
	if t.gateway == nil {
		return nil, false
	}
	// A server name is a DNS name, never with a port: nothing is cut off it (unlike a Host).
	host := strings.ToLower(strings.TrimSuffix(sni, "."))
	answered := host == ""
	for _, l := range t.gateway.ports[port] {
		if !l.passthrough {
			continue
		}
		passthrough = true
		if answered || !HostnameMatches(l.hostname, host) {
			continue
		}
		// The most specific listener answers alone: no falling through to a wider one.
		answered = true
		if es := l.entries(host); len(es) > 0 {
			r = es[0].r
		}
	}
	return r, passthrough
}
