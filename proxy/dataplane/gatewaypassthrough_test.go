package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/table"
)

// passthroughGateway is Gateway infra/gw with three TLS Passthrough listeners on port:
// "exact" (a.example.com, no route), "wild" (*.example.com: TLSRoute infra/exact for
// abc.example.com to backend a, TLSRoute infra/wide for *.example.com to backend b, both
// naming that listener by sectionName) and "all" (any name, routes of infra only: TLSRoute
// tenant/theirs for tenant.test to backend c, of another namespace, is not admitted).
func passthroughGateway(t *testing.T, port int32, a, b, c string) *table.Table {
	t.Helper()
	pass := gatewayv1.TLSModePassthrough
	listener := func(name, host string) gatewayv1.Listener {
		l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.TLSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{Mode: &pass}}
		if host != "" {
			l.Hostname = ptr(gatewayv1.Hostname(host))
		}
		return l
	}
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "metalgate", Listeners: []gatewayv1.Listener{
			listener("exact", "a.example.com"), listener("wild", "*.example.com"), listener("all", "")}}}
	in := gatewayapi.Input{Gateway: gw, AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true,
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "infra"}}, {ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}}}
	tlsRoute := func(ns, name, section, host, svc string) *gatewayv1.TLSRoute {
		return &gatewayv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: gatewayv1.TLSRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw",
					Namespace: ptr(gatewayv1.Namespace("infra")), SectionName: ptr(gatewayv1.SectionName(section))}}},
				Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(host)},
				Rules: []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(svc), Port: ptr(gatewayv1.PortNumber(443))}}}}}}}
	}
	in.TLSRoutes = []*gatewayv1.TLSRoute{tlsRoute("infra", "exact", "wild", "abc.example.com", "a"),
		tlsRoute("infra", "wide", "wild", "*.example.com", "b"), tlsRoute("tenant", "theirs", "all", "tenant.test", "c")}
	for _, s := range []struct{ ns, name, addr string }{{"infra", "a", a}, {"infra", "b", b}, {"tenant", "c", c}} {
		h, p, err := net.SplitHostPort(s.addr)
		if err != nil {
			t.Fatal(err)
		}
		pn, _ := strconv.Atoi(p)
		in.Services = append(in.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tls", Port: 443}}}})
		in.Slices = append(in.Slices, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: s.ns, Name: s.name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: s.name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("tls"), Port: ptr(int32(pn))}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{h}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		})
	}
	res := gatewayapi.Translate(in)
	if len(res.Problems) > 0 {
		t.Fatalf("translate: %v", res.Problems)
	}
	return res.Table
}

// rejected reports whether err is what a closed connection gives a TLS client: EOF or a reset
// (the conformance suite's test of a rejected connection), not a TLS alert.
func rejected(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		err != nil && strings.Contains(err.Error(), "connection reset by peer")
}

// splitConn writes every byte in a TCP segment of its own (no Nagle): a ClientHello in as
// many segments as it has bytes.
type splitConn struct{ net.Conn }

func (c splitConn) Write(p []byte) (int, error) {
	for i := range p {
		if _, err := c.Conn.Write(p[i : i+1]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}

// TestGatewayTLSPassthrough: a Gateway's TLS Passthrough listener passes each connection,
// undecrypted, to the backend of the TLSRoute its server name selects (the client verifies the
// backend's own certificate; the backend sees the server name). Passthrough is one forwarding
// path (a TCP splice); it runs under both options of forEachPath, which change nothing here.
// Hostile cases first, each closed (EOF or reset, no TLS alert, no backend reached, counted
// as no_route): the name of another namespace's TLSRoute the listener does not admit; a name
// of a listener without routes that only a wider listener's wildcard route covers; no server
// name; a ClientHello that stops (slowloris: closed after ReadHeaderTimeout); a ClientHello
// larger than the 64 KiB read for the decision; bytes that are not TLS. Then a ClientHello
// sent one byte per segment still reaches its route, exact before wildcard.
func TestGatewayTLSPassthrough(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		ca := newTestCA(t, "passthrough backends CA")
		roots := x509.NewCertPool()
		roots.AddCert(ca.cert)
		backend := func(names ...string) *tlsBackend {
			_, _, c := ca.issue(t, names...)
			return newTLSBackend(t, c, false, nil)
		}
		a, b, c := backend("abc.example.com"), backend("other.example.com", "a.example.com"), backend("tenant.test")
		m := NewMetrics(prometheus.NewRegistry())
		opts.Metrics = m
		opts.SSLPassthrough = true // as metalgate proxy --gateway sets it
		opts.ReadHeaderTimeout = time.Second
		s, _, addr := startProxy(t, opts, buildTable(t))
		ap, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		s.Swap(passthroughGateway(t, int32(ap.Port), a.addr(), b.addr(), c.addr()))
		noRoute := func() float64 { return counterValue(t, m.TLSHandshakes.WithLabelValues(handshakeNoRoute)) }

		dialTLS := func(sni string) error {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
				&tls.Config{ServerName: sni, RootCAs: roots, InsecureSkipVerify: sni == ""})
			if err == nil {
				conn.Close()
			}
			return err
		}
		for _, tc := range []struct{ name, sni string }{
			{"another namespace's TLSRoute, not admitted", "tenant.test"},
			{"a listener without routes, covered by another listener's wildcard route", "a.example.com"},
			{"no server name", ""},
			{"a name no listener routes", "nothing.test"},
		} {
			before := noRoute()
			if err := dialTLS(tc.sni); !rejected(err) {
				t.Errorf("%s (SNI %q): %v; want the connection closed (EOF or reset)", tc.name, tc.sni, err)
			}
			if n := noRoute(); n != before+1 {
				t.Errorf("%s: no_route counted %v times, want once", tc.name, n-before)
			}
		}

		raw := func() net.Conn {
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			return conn
		}
		closed := func(what string, conn net.Conn) {
			t.Helper()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := io.Copy(io.Discard, conn)
			if err != nil && !rejected(err) || n > 0 {
				t.Errorf("%s: read %d bytes, %v; want the connection closed with nothing sent", what, n, err)
			}
		}
		// Slowloris: the start of a handshake record, then nothing: closed by the proxy after
		// ReadHeaderTimeout (the read deadline above is ten times that).
		slow := raw()
		_, _ = slow.Write([]byte{22, 3, 1, 0, 200, 1, 0, 0})
		closed("a ClientHello that stops", slow)

		// Larger than the 64 KiB the decision reads: records announcing a 192 KiB ClientHello.
		big := raw()
		go func() {
			rec := make([]byte, 5+16384)
			rec[0], rec[1], rec[2] = 22, 3, 1
			binary.BigEndian.PutUint16(rec[3:], 16384)
			rec[5], rec[6], rec[7], rec[8] = 1, 3, 0, 0 // client_hello of 0x030000 bytes
			for i := 0; i < 12; i++ {
				if _, err := big.Write(rec); err != nil {
					return
				}
				rec[5], rec[6], rec[7], rec[8] = 0, 0, 0, 0
			}
		}()
		closed("an oversized ClientHello", big)

		notTLS := raw()
		_, _ = io.WriteString(notTLS, "GET / HTTP/1.1\r\nHost: abc.example.com\r\n\r\n")
		closed("plain HTTP on a passthrough port", notTLS)

		for _, be := range []*tlsBackend{a, b, c} {
			if sni := load(&be.sni); sni != "" {
				t.Fatalf("a backend saw a handshake for %q before any routed connection", sni)
			}
		}

		// Routed: a ClientHello one byte per segment, to the exact route's backend.
		for _, tc := range []struct {
			sni  string
			want *tlsBackend
		}{{"abc.example.com", a}, {"other.example.com", b}, {"deep.other.example.com", b}} {
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{ServerName: tc.sni, RootCAs: roots, InsecureSkipVerify: tc.sni == "deep.other.example.com"},
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return splitConn{conn}, nil
				}}}
			resp, err := client.Get("https://" + tc.sni + "/")
			if err != nil {
				t.Fatalf("SNI %s: %v", tc.sni, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			client.CloseIdleConnections()
			if string(body) != "tls ok" || load(&tc.want.sni) != tc.sni {
				t.Errorf("SNI %s: body %q, the expected backend saw SNI %q", tc.sni, body, load(&tc.want.sni))
			}
		}
		if sni := load(&c.sni); sni != "" {
			t.Errorf("tenant's backend saw a handshake for %q: a route the listener does not admit was served", sni)
		}
	})
}

// TestGatewayHTTPSWithPassthroughListener: with the TLS listener deciding per port (as a
// Gateway proxy runs), an HTTPS listener's port is served as before: its certificate, its
// routes, and no handshake for a name it does not cover.
func TestGatewayHTTPSWithPassthroughListener(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		api := echoBackend(t, "api")
		ca := newTestCA(t, "gateway test CA")
		opts.SSLPassthrough = true
		s, _, httpsAddr := startProxy(t, opts, buildTable(t))
		ap, err := net.ResolveTCPAddr("tcp", httpsAddr)
		if err != nil {
			t.Fatal(err)
		}
		s.Swap(gatewayTLSTable(t, ca, int32(ap.Port), hostport(api)))
		roots := x509.NewCertPool()
		roots.AddCert(ca.cert)
		if conn, err := tls.Dial("tcp", httpsAddr, &tls.Config{ServerName: "c.example", InsecureSkipVerify: true}); err == nil {
			conn.Close()
			t.Errorf("server name c.example: handshake succeeded; want it refused")
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{ServerName: "a.example", RootCAs: roots}}}
		defer c.CloseIdleConnections()
		resp, e := get(t, c, "https://"+httpsAddr+"/x", map[string]string{"Host": "a.example"})
		if resp.StatusCode != http.StatusOK || e.Backend != "api" {
			t.Errorf("HTTPS listener: %d from %q, want 200 from api", resp.StatusCode, e.Backend)
		}
	})
}
