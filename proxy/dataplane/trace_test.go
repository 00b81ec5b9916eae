package dataplane

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTraceContext: a valid W3C traceparent and its tracestate reach the backend unchanged;
// an invalid traceparent (hostile first: malformed, upper case, all-zero IDs, version ff,
// sent twice) reaches it neither with its tracestate, nor does a tracestate alone; a
// tracestate with control characters or over 512 bytes is dropped alone. Without a
// traceparent the proxy starts none.
func TestTraceContext(t *testing.T) {
	be := echoBackend(t, "b")
	tab := buildTable(t, route{host: "tr.test", path: "/", endpoints: []string{hostport(be)}})
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name      string
		tp, ts    []string
		wantTP    []string
		wantTS    []string
		wantValid bool
	}{
		{name: "malformed", tp: []string{"00-xyz-00f067aa0ba902b7-01"}, ts: []string{"a=b"}},
		{name: "upper-case hex", tp: []string{strings.ToUpper(valid)}, ts: []string{"a=b"}},
		{name: "all-zero trace ID", tp: []string{"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}},
		{name: "all-zero parent ID", tp: []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}},
		{name: "version ff", tp: []string{"ff" + valid[2:]}},
		{name: "version 00 with more", tp: []string{valid + "-extra"}},
		{name: "sent twice", tp: []string{valid, valid}, ts: []string{"a=b"}},
		{name: "tracestate alone", ts: []string{"a=b"}},
		{name: "tracestate too long", tp: []string{valid}, ts: []string{"a=" + strings.Repeat("x", 600)}, wantTP: []string{valid}},
		{name: "tracestate with a tab", tp: []string{valid}, ts: []string{"a=b\tc"}, wantTP: []string{valid}},
		{name: "valid", tp: []string{valid}, ts: []string{"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
			wantTP: []string{valid}, wantTS: []string{"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}},
		{name: "later version with more", tp: []string{"01" + valid[2:] + "-more"}, wantTP: []string{"01" + valid[2:] + "-more"}},
		{name: "tracestate in two fields", tp: []string{valid}, ts: []string{"a=1", "b=2"}, wantTP: []string{valid}, wantTS: []string{"a=1,b=2"}},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				_, addr, _ := startProxy(t, opts, tab)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				defer c.CloseIdleConnections()
				req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
				req.Host = "tr.test"
				req.Header["Traceparent"], req.Header["Tracestate"] = tc.tp, tc.ts
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var e echoReply
				decodeEcho(t, resp, &e)
				if got := e.Header["Traceparent"]; !slices.Equal(got, tc.wantTP) {
					t.Errorf("backend's traceparent %q, want %q", got, tc.wantTP)
				}
				if got := e.Header["Tracestate"]; !slices.Equal(got, tc.wantTS) {
					t.Errorf("backend's tracestate %q, want %q", got, tc.wantTS)
				}
			})
		})
	}
}

// decodeEcho reads resp (which must be a 200) as echoBackend's reply into e.
func decodeEcho(t *testing.T, resp *http.Response, e *echoReply) {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(e); err != nil {
		t.Fatal(err)
	}
}
