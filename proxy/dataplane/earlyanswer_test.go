package dataplane

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// TestBodyReadAfterTheAnswer: a backend that answers before it reads the request body (a
// gRPC server refusing a call, an upload rejected by its headers) leaves the proxy's
// transport reading the client's body from its own goroutine after the handler has
// returned. The proxy must not touch the client's connection for that body any more: over
// HTTP/2 the stream's writer is recycled for other streams by then (under -race the old
// code was reported, without it a nil dereference could stop the process). HTTP/2 clients
// (h2c) send the rest of their bodies only after their answer, from an h2c backend; every
// request gets its own answer and the proxy keeps serving. (Over HTTP/1.1 at either end the
// server reads what is left of a body before it answers, so the answer cannot come first.)
func TestBodyReadAfterTheAnswer(t *testing.T) {
	early := func(name string) http.Handler { // name is what X-Answer starts with
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadFull(r.Body, make([]byte, 5)) // the head of the body, not the rest
			w.Header().Set("X-Answer", name+" "+r.URL.Path)
			w.WriteHeader(http.StatusForbidden)
		})
	}
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	forEachPath(t, func(t *testing.T, opts Options) {
		// The backend is the subtest's: closing it (before leakCheck looks) also ends the
		// proxy's connection to it, which may still be sending a body when the answer is in.
		h2c := httptest.NewUnstartedServer(early("h2c"))
		h2c.Config.Protocols = &h2
		h2c.Start()
		t.Cleanup(h2c.Close)
		opts.H2C = true
		opts.ClientBodyTimeout = 5 * time.Second
		tab := buildTable(t,
			route{host: "h2c.test", path: "/", endpoints: []string{hostport(h2c)}, annotations: map[string]string{ingress.AnnotationBackendProtocol: "h2c"}},
		)
		_, addr, _ := startProxy(t, opts, tab)
		// A request's body may still be on its way when the answer is in, so the connection
		// can be busy when the test closes idle ones: it closes itself once idle too, before
		// leakCheck looks.
		tr := &http.Transport{Protocols: &h2, IdleConnTimeout: time.Second}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 48 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				host := "h2c.test"
				body, bw := io.Pipe()
				path := fmt.Sprintf("/%d", i)
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, body)
				req.Host = host
				answered := make(chan struct{})
				go func() {
					// The head, then the rest only once the answer is in: the proxy's
					// transport is still reading the body when its handler returns.
					if _, err := io.WriteString(bw, "head:"); err != nil {
						return
					}
					<-answered
					_, _ = io.WriteString(bw, strings.Repeat("x", 4096))
					bw.Close()
				}()
				resp, err := client.Do(req)
				close(answered)
				if err != nil {
					errs <- fmt.Errorf("to %s: %v", host, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				want := strings.TrimSuffix(host, ".test") + " " + path
				if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Answer") != want {
					errs <- fmt.Errorf("to %s: %d %q, want 403 %q", host, resp.StatusCode, resp.Header.Get("X-Answer"), want)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// Still serving.
		resp, err := client.Get("http://" + addr + "/after")
		if err != nil {
			t.Fatalf("after: %v", err)
		}
		resp.Body.Close()
	})
}
