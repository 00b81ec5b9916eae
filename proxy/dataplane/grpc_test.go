package dataplane

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/metalgate/metalgate/proxy/table"
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
		annotations: map[string]string{table.AnnotationBackendProtocol: "grpc"}})
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
