package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/gatewayapi"
	"github.com/metalgate/metalgate/proxy/ingress"
)

// TestGRPC: a real gRPC client (h2c to the proxy) and server (h2c from the proxy, by the
// backend-protocol annotation); the status travels in HTTP/2 trailers end to end.
func TestGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("metalgate.test", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	tab := buildTable(t, route{host: "grpc.test", path: "/", endpoints: []string{ln.Addr().String()},
		annotations: map[string]string{ingress.AnnotationBackendProtocol: "grpc"}})
	_, addr, _ := startProxy(t, Options{H2C: true}, tab)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.test"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := healthpb.NewHealthClient(conn)
	resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "metalgate.test"})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check = %v, %v; want SERVING", resp, err)
	}
	// An error status from the server comes back as that status, not as a transport error.
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{Service: "unknown"})
	if err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("Check(unknown) = %v, want NotFound", err)
	}
}

// healthBackend is a real gRPC server (h2c) whose health service knows only service name
// serving.
func healthBackend(t *testing.T, serving string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(serving, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// TestGatewayGRPCRoute: a GRPCRoute on a Gateway's plain HTTP listener, served to a real gRPC
// client (HTTP/2 with prior knowledge) from real gRPC servers over h2c, on both forwarding
// paths: the method and the call's metadata pick the backend; a call no rule takes, or one
// for a host the route does not serve, is Unimplemented; each call gets its own backend's
// answer under concurrency.
func TestGatewayGRPCRoute(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		a, b := healthBackend(t, "a"), healthBackend(t, "b")
		opts.H2C = true
		s, httpAddr, _ := startProxy(t, opts, buildTable(t))
		gw := listenerGateway(t, httpAddr)
		ref := func(svc string) []gatewayv1.GRPCBackendRef {
			return []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(svc), Port: ptr(gatewayv1.PortNumber(80))}}}}
		}
		check := &gatewayv1.GRPCMethodMatch{Service: ptr("grpc.health.v1.Health"), Method: ptr("Check")}
		in := gatewayapi.Input{Gateway: gw, AllowUnmanagedSlices: true, AllowLoopbackEndpoints: true, GRPCRoutes: []*gatewayv1.GRPCRoute{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "health"},
			Spec: gatewayv1.GRPCRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Namespace: ptr(gatewayv1.Namespace("infra")), Name: "gw"}}},
				Hostnames:       []gatewayv1.Hostname{"grpc.example.com"},
				Rules: []gatewayv1.GRPCRouteRule{
					{Matches: []gatewayv1.GRPCRouteMatch{{Method: check, Headers: []gatewayv1.GRPCHeaderMatch{{Name: "x-backend", Value: "b"}}}}, BackendRefs: ref("b")},
					{Matches: []gatewayv1.GRPCRouteMatch{{Method: &gatewayv1.GRPCMethodMatch{Service: ptr("grpc.health.v1.Health")}}}, BackendRefs: ref("a")},
				}}}}}
		addBackends(t, &in, map[string]string{"a": a, "b": b}, "app")
		res := gatewayapi.Translate(in)
		tab, problems := res.Table, res.Problems
		if len(problems) > 0 {
			t.Fatalf("build: %v", problems)
		}
		s.Swap(tab)

		dial := func(authority string) healthpb.HealthClient {
			conn, err := grpc.NewClient(httpAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(authority))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			return healthpb.NewHealthClient(conn)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c := dial("grpc.example.com")
		withB := metadata.AppendToOutgoingContext(ctx, "x-backend", "b")
		for _, tc := range []struct {
			name    string
			c       healthpb.HealthClient
			ctx     context.Context
			service string
			want    codes.Code
		}{
			// Hostile first.
			{"a host the route does not serve", dial("other.example.com"), ctx, "a", codes.Unimplemented},
			{"metadata sends the call to b, which does not know a", c, withB, "a", codes.NotFound},
			{"no metadata: a", c, ctx, "a", codes.OK},
			{"metadata: b", c, withB, "b", codes.OK},
		} {
			_, err := tc.c.Check(tc.ctx, &healthpb.HealthCheckRequest{Service: tc.service})
			if got := status.Code(err); got != tc.want {
				t.Errorf("%s: Check(%s) = %v, want %v", tc.name, tc.service, err, tc.want)
			}
		}
		// A method of another service takes no rule.
		conn, err := grpc.NewClient(httpAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.example.com"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		err = conn.Invoke(ctx, "/other.Service/Check", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
		if got := status.Code(err); got != codes.Unimplemented {
			t.Errorf("/other.Service/Check = %v, want Unimplemented", err)
		}
		// Concurrent calls on one connection, to both backends: each its own answer.
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				callCtx, svc, want := ctx, "a", codes.OK
				if i%2 == 1 {
					callCtx = withB
				}
				if i%4 == 1 {
					svc = "b"
				}
				if i%4 == 3 {
					want = codes.NotFound // b does not know a
				}
				_, err := c.Check(callCtx, &healthpb.HealthCheckRequest{Service: svc})
				if status.Code(err) != want {
					errs <- fmt.Errorf("call %d: Check(%s) = %v, want %v", i, svc, err, want)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// TestGatewayGRPCRouteTLS: gRPC over TLS (ALPN h2) to a Gateway's HTTPS listener, terminated
// with the listener's certificate and sent on to an h2c backend; a GRPCRoute for a.example
// serves nothing to b.example (another listener of the same port, whose certificate the
// client gets and trusts).
func TestGatewayGRPCRouteTLS(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		backend := healthBackend(t, "a")
		ca := newTestCA(t, "gateway gRPC CA")
		s, _, httpsAddr := startProxy(t, opts, buildTable(t))
		_, p, _ := net.SplitHostPort(httpsAddr)
		port, _ := strconv.Atoi(p)
		in := gatewayTLSInput(t, ca, int32(port), backend)
		in.HTTPRoutes = nil
		in.GRPCRoutes = []*gatewayv1.GRPCRoute{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "health"},
			Spec: gatewayv1.GRPCRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
				Hostnames:       []gatewayv1.Hostname{"a.example"},
				Rules: []gatewayv1.GRPCRouteRule{{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: "api", Port: ptr(gatewayv1.PortNumber(80))}}}}}}}}}
		res := gatewayapi.Translate(in)
		tab, problems := res.Table, res.Problems
		if len(problems) > 0 {
			t.Fatalf("build: %v", problems)
		}
		s.Swap(tab)
		roots := x509.NewCertPool()
		roots.AddCert(ca.cert)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, tc := range []struct {
			host string
			want codes.Code
		}{{"b.example", codes.Unimplemented}, {"a.example", codes.OK}} {
			creds := credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: tc.host})
			conn, err := grpc.NewClient(httpsAddr, grpc.WithTransportCredentials(creds), grpc.WithAuthority(tc.host))
			if err != nil {
				t.Fatal(err)
			}
			_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "a"})
			conn.Close()
			if got := status.Code(err); got != tc.want {
				t.Errorf("%s: Check = %v, want %v", tc.host, err, tc.want)
			}
		}
	})
}
