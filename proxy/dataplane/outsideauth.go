package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// errOutsideAddress is a dial to an outside authentication service refused for the address
// its name resolved to.
var errOutsideAddress = errors.New("external auth host resolved to a refused address")

// outsideAuth asks authentication services outside the cluster (auth-url hosts that
// --external-auth-hosts lists). It is an h1Transport of its own — the same framing, header
// cap (MaxResponseHeaderBytes) and response timeout as every exchange with an endpoint — with
// a dialer that checks each address a name resolves to at the moment it connects (the
// dialer's Control hook, after resolution and before connect): a name that resolves, or is
// made to resolve later (DNS rebinding), to loopback, link-local, unspecified or multicast
// addresses is never connected to. Connections are pooled per namespace, scheme and name.
type outsideAuth struct {
	h1 *h1Transport
	// roots verify https services; nil: the system's.
	roots *x509.CertPool
}

// publicAddress is the address policy of outside authentication services: an address must
// be global unicast (private ranges are: an identity provider on the company network is
// common) and not 0.0.0.0/8. Refused: loopback (the proxy itself, its admin port),
// link-local (169.254.169.254 is the cloud metadata service), unspecified (0.0.0.0 reaches
// the local host), multicast and broadcast.
func publicAddress(a netip.Addr) error {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return fmt.Errorf("%w: %s is loopback", errOutsideAddress, a)
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return fmt.Errorf("%w: %s is link-local", errOutsideAddress, a)
	case a.IsUnspecified() || a.Is4() && a.As4()[0] == 0:
		return fmt.Errorf("%w: %s is unspecified", errOutsideAddress, a)
	case a.IsMulticast():
		return fmt.Errorf("%w: %s is multicast", errOutsideAddress, a)
	case !a.IsGlobalUnicast():
		return fmt.Errorf("%w: %s is not a unicast address", errOutsideAddress, a)
	}
	return nil
}

// newOutsideAuth is the outside authentication transport of opts: its dialer refuses what
// opts.externalAuthAddrs refuses (publicAddress unless a test replaced it).
func newOutsideAuth(opts Options, discarded func(string)) *outsideAuth {
	policy := opts.externalAuthAddrs
	if opts.externalAuthLookup != nil {
		// Tests only: whatever the policy under test allows, nothing but loopback is ever
		// connected to; an address that got past the policy is reported, so that a broken
		// policy fails its test instead of sending packets off the machine.
		tested := policy
		policy = func(a netip.Addr) error {
			if err := tested(a); err != nil {
				return err
			}
			if !a.Unmap().IsLoopback() {
				if opts.externalAuthEscaped != nil {
					opts.externalAuthEscaped(a)
				}
				return fmt.Errorf("test guard: %s is not loopback, not connected", a)
			}
			return nil
		}
	}
	d := &net.Dialer{KeepAlive: 30 * time.Second, Control: func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %q is not an address", errOutsideAddress, address)
		}
		return policy(ap.Addr())
	}}
	dial := d.DialContext
	if lookup := opts.externalAuthLookup; lookup != nil {
		// Tests only: names resolve through lookup; each address still goes through Control.
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			addrs, ok := lookup(host)
			if !ok {
				if a, err := netip.ParseAddr(host); err == nil {
					addrs = []netip.Addr{a} // an address: still through Control
				} else {
					return nil, fmt.Errorf("test lookup: %s is not in the test's names (no DNS query from tests)", host)
				}
			}
			err = fmt.Errorf("lookup %s: no address", host)
			for _, a := range addrs {
				var c net.Conn
				if c, err = d.DialContext(ctx, network, net.JoinHostPort(a.String(), port)); err == nil {
					return c, nil
				}
			}
			return nil, err
		}
	}
	return &outsideAuth{roots: opts.externalAuthRoots, h1: &h1Transport{dial: dial, connectTimeout: opts.ConnectTimeout, maxIdle: opts.MaxIdlePerEndpoint,
		idleTimeout: opts.UpstreamIdleTimeout, responseTimeout: opts.ResponseHeaderTimeout, readTimeout: opts.UpstreamReadTimeout,
		maxHeaderBytes: opts.MaxResponseHeaderBytes, max1xx: opts.Max1xxResponses, discarded: discarded, idle: map[string][]*h1Conn{}}}
}

// dest is how o is reached: its pool key (namespace, scheme and name) and, for https, a TLS
// client verified against the name (system roots, TLS 1.2 at least, no session cache shared
// between namespaces).
func (oa *outsideAuth) dest(o *table.OutsideAuth) *tlsDest {
	td := &tlsDest{key: outsideKey(o)}
	if o.Scheme == "https" {
		td.conf = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.Name, RootCAs: oa.roots, NextProtos: []string{"http/1.1"}}
	}
	return td
}

// outsideKey is the pool key of an outside authentication service's connections.
func outsideKey(o *table.OutsideAuth) string {
	return "outside-auth\x00" + o.Namespace + "\x00" + o.Scheme + "\x00" + o.Name
}

// retain closes the idle connections to outside services t no longer asks.
func (oa *outsideAuth) retain(t *table.Table) {
	oa.h1.mu.Lock()
	pooled := len(oa.h1.idle)
	oa.h1.mu.Unlock()
	if pooled == 0 {
		return // nothing to sweep: no walk over every route of a large table
	}
	keep := map[string]bool{}
	if t != nil {
		for _, r := range t.Routes() {
			if ea := r.Options.Policy.ExternalAuth; ea != nil && ea.Outside != nil {
				keep[outsideKey(ea.Outside)] = true
			}
		}
	}
	oa.h1.retain(func(tlsKey, _ string) bool { return keep[tlsKey] })
}
