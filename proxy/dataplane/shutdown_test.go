package dataplane

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/metalgate/metalgate/internal/testenv"
)

// TestShutdownDrains: after ctx ends the proxy drains for ShutdownDelay before it stops
// listening (issue #25: a rollout refused 2–5 connections). Hostile case first: a client
// that holds a keep-alive connection across the start of shutdown must be told to go
// (Connection: close, and the connection then closed; on HTTP/2 a GOAWAY) rather than be
// reset when the listener closes under it. Then: a new connection in the delay is still
// accepted, a request in flight when shutdown begins completes with 200 after the listener
// has closed, and no request fails.
func TestShutdownDrains(t *testing.T) {
	forEachPath(t, func(t *testing.T, opts Options) {
		arrived, release := make(chan struct{}, 1), make(chan struct{})
		backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				arrived <- struct{}{}
				<-release
			}
			echoHandler("b").ServeHTTP(w, r)
		}))
		defer backend.Close()
		delayOver := make(chan time.Time)
		opts.H2C = true
		opts.ShutdownDelay = time.Hour // ended by the test (delayOver)
		opts.delayOver = func(d time.Duration) <-chan time.Time {
			if d != time.Hour {
				t.Errorf("delay = %v, want ShutdownDelay", d)
			}
			return delayOver
		}
		s, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Swap(buildTable(t, route{host: "a.example", path: "/", endpoints: []string{hostport(backend)}}))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		served := make(chan error, 1)
		go func() { served <- s.Serve(ctx, ln, nil) }()

		h1 := &http.Transport{}
		defer h1.CloseIdleConnections()
		var p2 http.Protocols
		p2.SetUnencryptedHTTP2(true)
		h2 := &http.Transport{Protocols: &p2}
		defer h2.CloseIdleConnections()
		// do sends GET path; it reports the response's Connection: close, whether the
		// connection was a reused one, and the protocol. Any error (a reset) fails the test.
		type reply struct {
			closes, reused bool
			proto          string
		}
		do := func(rt http.RoundTripper, path string) reply {
			t.Helper()
			var reused bool
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
			req.Host = "a.example"
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("GET %s: %v (a request during shutdown failed)", path, err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"backend":"b"`) {
				t.Fatalf("GET %s → %d %q (%v), want 200 from the backend", path, resp.StatusCode, b, err)
			}
			return reply{closes: resp.Close || resp.Header.Get("Connection") == "close", reused: reused, proto: resp.Proto}
		}

		if r := do(h1, "/before"); r.closes {
			t.Fatalf("before shutdown: HTTP/1 response says Connection: close")
		}
		if r := do(h2, "/before"); r.proto != "HTTP/2.0" {
			t.Fatalf("h2c client got %s", r.proto)
		}
		slow := make(chan error, 1)
		go func() {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/slow", nil)
			req.Host = "a.example"
			resp, err := c.Do(req)
			if err == nil {
				var b []byte
				b, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && (resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"path":"/slow"`)) {
					err = errors.New("slow request → " + resp.Status + " " + string(b))
				}
			}
			slow <- err
		}()
		testenv.Receive(t, 10*time.Second, "the slow request reaches the backend", arrived)

		cancel() // SIGTERM
		testenv.Eventually(t, 10*time.Second, "the server reports draining (readiness off)", testenv.True(s.Draining))

		// The held keep-alive connection serves its next request and is told to go.
		if r := do(h1, "/held"); !r.reused || !r.closes {
			t.Errorf("held HTTP/1 connection while draining: reused %v, Connection: close %v; want both", r.reused, r.closes)
		}
		// The server closed it after that response; a new connection is still accepted.
		if r := do(h1, "/new"); r.reused || !r.closes {
			t.Errorf("next HTTP/1 request while draining: reused %v, Connection: close %v; want a new connection told to close", r.reused, r.closes)
		}
		// HTTP/2: the GOAWAY moves the client to a new connection, without a failed request.
		testenv.Eventually(t, 10*time.Second, "an HTTP/2 client moves to a new connection", func() error {
			if r := do(h2, "/h2"); r.reused {
				return errors.New("the HTTP/2 connection is still reused")
			}
			return nil
		})
		select {
		case err := <-served:
			t.Fatalf("Serve returned before the delay ended: %v", err)
		default:
		}

		delayOver <- time.Now()
		testenv.Eventually(t, 10*time.Second, "the listener closes after the delay", func() error {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
				return errors.New("still accepting")
			}
			return nil
		})
		close(release)
		if err := testenv.Receive(t, 10*time.Second, "the slow request completes", slow); err != nil {
			t.Errorf("request in flight at shutdown: %v", err)
		}
		if err := testenv.Receive(t, 10*time.Second, "Serve returns", served); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// TestShutdownDelayDefault: with no delay Serve stops listening at once; with one it keeps
// accepting for that long (a real timer).
func TestShutdownDelayDefault(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{{"delay", 300 * time.Millisecond}, {"none", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			s, err := New(Options{ShutdownDelay: tc.delay})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			start := time.Now()
			go func() { served <- s.Serve(ctx, ln, nil) }()
			cancel()
			if err := testenv.Receive(t, 10*time.Second, "Serve returns", served); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took < tc.delay {
				t.Errorf("Serve returned %v after ctx ended, before the delay %v", took, tc.delay)
			}
			if !s.Draining() {
				t.Error("Draining false after shutdown")
			}
		})
	}
}
