package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/metalgate/metalgate/proxy/table"
)

// tlsDest is how to reach the endpoints of one https or grpcs backend: the TLS client
// configuration made from its table.BackendTLS, and for grpcs an HTTP/2 transport over it.
// Dests live across tables (a table swap for an endpoint change keeps the connections) and go
// when no backend uses their settings any more.
type tlsDest struct {
	// key is what pooled connections made with these settings are filed under.
	key  string
	conf *tls.Config
	h2   *http.Transport // grpcs only
	// refuse, when set, fails every request to the backend before any connection is made.
	refuse error
}

var (
	errBackendTLSRefused = errors.New("backend TLS settings unusable")
	errBackendTLS        = errors.New("backend TLS")
)

// clientTLSConfig is the TLS client side for bt. Verification is explicit (VerifyConnection),
// so that the name checked does not depend on whether it is also sent as SNI; it also runs on
// resumed sessions.
func clientTLSConfig(bt *table.BackendTLS, protos ...string) *tls.Config {
	conf := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		NextProtos:         protos,
		InsecureSkipVerify: true, // replaced by VerifyConnection when bt.Verify
		ClientSessionCache: tls.NewLRUClientSessionCache(64),
	}
	if bt.SNI {
		conf.ServerName = bt.ServerName
	}
	if c := bt.Certificate; c != nil {
		conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return c, nil }
	}
	if bt.Verify {
		name, roots, sans := bt.ServerName, bt.RootCAs, bt.SubjectAltNames
		if !sans.Empty() {
			name = "" // the chain is checked here, the names by matchSANs
		}
		conf.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("%w: the backend sent no certificate", errBackendTLS)
			}
			opts := x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				return fmt.Errorf("%w: certificate: %w", errBackendTLS, err)
			}
			if !sans.Empty() {
				return matchSANs(cs.PeerCertificates[0], sans)
			}
			return nil
		}
	}
	return conf
}

// matchSANs checks that leaf holds one of sans: a DNS name as crypto/x509 matches host
// names, a URI exactly.
func matchSANs(leaf *x509.Certificate, sans table.SubjectAltNames) error {
	for _, n := range sans.DNSNames {
		if leaf.VerifyHostname(n) == nil {
			return nil
		}
	}
	for _, u := range sans.URIs {
		for _, have := range leaf.URIs {
			if have.String() == u {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: certificate holds none of the subject alternative names %s", errBackendTLS, sans.String())
}

// tlsDests keeps the dests of the tables in use, by settings.
type tlsDests struct {
	mu    sync.Mutex
	dests map[string]*tlsDest
	// newH2 makes the HTTP/2-over-TLS transport of a grpcs dest.
	newH2 func(conf *tls.Config) *http.Transport
}

// update gives each https and grpcs pool of r its dest, re-using those of the previous
// tables, and drops (closing their idle connections) the ones no pool uses any more.
func (d *tlsDests) update(r *router) {
	d.mu.Lock()
	defer d.mu.Unlock()
	next := map[string]*tlsDest{}
	for be, p := range r.pools {
		if be.TLS == nil {
			continue
		}
		// The ID holds every setting that makes a connection differ, the Service's
		// namespace included (table.BackendTLS.ID): backends share a dest only when a
		// connection made for one is right for the other.
		key := string(be.Protocol) + "|" + be.TLS.ID
		td := next[key]
		if td == nil {
			td = d.dests[key]
		}
		if td == nil {
			td = &tlsDest{key: key}
			switch {
			case be.TLS.Refuse != "":
				td.refuse = fmt.Errorf("%w: %s", errBackendTLSRefused, be.TLS.Refuse)
			case be.Protocol == table.ProtocolGRPCS:
				td.conf = clientTLSConfig(be.TLS, "h2")
				td.h2 = d.newH2(td.conf)
			default:
				td.conf = clientTLSConfig(be.TLS, "http/1.1")
			}
		}
		next[key] = td
		// A pool kept from the previous router (Swap of a patched table) is serving
		// already and has this td (same backend, same key, and a key in use keeps its
		// td): only a new pool, not yet published, is written.
		if p.tls != td {
			p.tls = td
		}
	}
	for key, td := range d.dests {
		if next[key] == nil && td.h2 != nil {
			td.h2.CloseIdleConnections()
		}
	}
	d.dests = next
}

// has reports whether a backend of the table in use has the TLS settings filed under key.
func (d *tlsDests) has(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dests[key] != nil
}

func (d *tlsDests) closeIdle() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, td := range d.dests {
		if td.h2 != nil {
			td.h2.CloseIdleConnections()
		}
	}
}

// handshake runs the TLS client handshake on nc within ctx. A failure is a 502 (504 when it
// timed out), not a failure to connect: a certificate that does not verify is a setting to
// fix, not an endpoint to eject.
func handshake(ctx context.Context, nc net.Conn, td *tlsDest, addr string) (*tls.Conn, error) {
	tc := tls.Client(nc, td.conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		if errors.Is(err, errBackendTLS) {
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		return nil, fmt.Errorf("%s: %w: handshake: %w", addr, errBackendTLS, err)
	}
	return tc, nil
}

// tlsLeftover looks for bytes a TLS connection holds past the response just read: records
// already read from the socket and decrypted, or waiting in the TLS layer's buffer, which the
// socket check (idleCheck) cannot see. It reads with a deadline in the past: whatever is
// buffered comes back at once, and an empty buffer gives a timeout without a system call (a
// read timeout leaves a TLS connection usable). ok is false when the connection cannot carry
// another request (bytes left over, or the backend closed it).
func tlsLeftover(tc *tls.Conn) (leftover, ok bool) {
	_ = tc.SetReadDeadline(time.Unix(1, 0))
	var b [1]byte
	n, err := tc.Read(b[:])
	_ = tc.SetReadDeadline(time.Time{})
	if n > 0 {
		return true, false
	}
	var ne net.Error
	return false, errors.As(err, &ne) && ne.Timeout()
}
