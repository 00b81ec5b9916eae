package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"

	"github.com/metalgate/metalgate/internal/adminauth"
)

// fakeKubelet answers pods/portforward as the API server and kubelet do together: it refuses
// the websocket upgrade (as an API server before 1.31 would, so the plugin falls back to SPDY),
// upgrades to SPDY, and for each stream pair dials the pod's port "inside the pod" — here a
// listener on 127.0.0.1, so the pod sees a loopback caller, as from the container runtime.
type fakeKubelet struct {
	ports     map[string]string // "namespace/pod:port" → 127.0.0.1 address; missing: refused
	forbidden map[string]bool   // "namespace/pod": 403, as RBAC without pods/portforward

	mu       sync.Mutex
	upgrades map[string]int // forwarding connections per "namespace/pod"
	streams  int            // data streams (TCP connections to pods)
	closed   chan string    // "namespace/pod" when its forwarding connection ends
}

func (k *fakeKubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// /api/v1/namespaces/NS/pods/POD/portforward
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 7 || parts[6] != "portforward" || r.Method != http.MethodPost && r.Method != http.MethodGet {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	pod := parts[3] + "/" + parts[5]
	if k.forbidden[pod] {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,`+
			`"message":"pods \"%s\" is forbidden: User \"jane\" cannot create resource \"pods/portforward\" in API group \"\" in the namespace \"%s\""}`, parts[5], parts[3])
		return
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, "websocket port-forward not supported here", http.StatusBadRequest)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{portforward.PortForwardProtocolV1Name}); err != nil {
		return // Handshake wrote the answer
	}
	streams := make(chan httpstream.Stream)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
		streams <- s
		return nil
	})
	if conn == nil {
		return
	}
	k.mu.Lock()
	k.upgrades[pod]++
	k.mu.Unlock()
	defer func() { k.closed <- pod }()
	errStreams := map[string]httpstream.Stream{}
	for {
		select {
		case <-conn.CloseChan():
			return
		case s := <-streams:
			id := s.Headers().Get(corev1.PortForwardRequestIDHeader)
			switch s.Headers().Get(corev1.StreamType) {
			case corev1.StreamTypeError:
				errStreams[id] = s
			case corev1.StreamTypeData:
				k.mu.Lock()
				k.streams++
				k.mu.Unlock()
				go k.serveStream(pod+":"+s.Headers().Get(corev1.PortHeader), s, errStreams[id])
				delete(errStreams, id)
			}
		}
	}
}

func (k *fakeKubelet) serveStream(target string, data, errStream httpstream.Stream) {
	defer errStream.Close()
	defer data.Close()
	addr := k.ports[target]
	if addr == "" {
		addr = "127.0.0.1:1" // nothing listens there
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		// As the kubelet writes it.
		fmt.Fprintf(errStream, "error forwarding port %s to pod: failed to connect to localhost: %v", target, err)
		return
	}
	defer c.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, data)
		close(done)
	}()
	_, _ = io.Copy(data, c)
	<-done
}

// TestPortForwards: Get reaches each pod's port through pods/portforward, one forwarding
// connection per pod for all requests to it, from loopback as the pod sees it; a port where
// nothing listens and a user without pods/portforward are errors that say why; Close ends
// the forwarding connections.
func TestPortForwards(t *testing.T) {
	pod := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !adminauth.IsLoopback(r.RemoteAddr) {
				http.Error(w, "not from loopback: "+r.RemoteAddr, http.StatusUnauthorized)
				return
			}
			fmt.Fprintf(w, "%s %s?%s", name, r.URL.Path, r.URL.RawQuery)
			if a := r.Header.Get("Authorization"); a != "" {
				fmt.Fprintf(w, " (%s)", a)
			}
		}))
	}
	speaker1, speaker2, proxy := pod("speaker-1"), pod("speaker-2"), pod("proxy")
	defer speaker1.Close()
	defer speaker2.Close()
	defer proxy.Close()
	k := &fakeKubelet{
		ports: map[string]string{
			"metalgate-system/speaker-1:7472": speaker1.Listener.Addr().String(),
			"metalgate-system/speaker-2:7472": speaker2.Listener.Addr().String(),
			"shop/proxy-1:10254":              proxy.Listener.Addr().String(),
		},
		forbidden: map[string]bool{"secret/proxy-2": true},
		upgrades:  map[string]int{},
		closed:    make(chan string, 10),
	}
	api := httptest.NewServer(k)
	defer api.Close()
	cfg := &rest.Config{Host: api.URL}
	pf, err := newPortForwards(cfg, kubernetes.NewForConfigOrDie(cfg).CoreV1().RESTClient())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	tests := []struct {
		ns, pod  string
		port     int
		path     string
		query    url.Values
		header   http.Header
		wantCode int
		wantBody string
		wantErr  string
	}{
		{ns: "metalgate-system", pod: "speaker-1", port: 7472, path: "/debug/announcements", wantCode: 200, wantBody: "speaker-1 /debug/announcements?"},
		{ns: "metalgate-system", pod: "speaker-1", port: 7472, path: "/debug/announcements", wantCode: 200, wantBody: "speaker-1 /debug/announcements?"},
		{ns: "metalgate-system", pod: "speaker-2", port: 7472, path: "/debug/announcements", wantCode: 200, wantBody: "speaker-2 /debug/announcements?"},
		{ns: "metalgate-system", pod: "speaker-2", port: 7472, path: "/debug/announcements", header: http.Header{"Authorization": {"Bearer t0ken"}}, wantCode: 200, wantBody: "speaker-2 /debug/announcements? (Bearer t0ken)"},
		{ns: "shop", pod: "proxy-1", port: 10254, path: "/debug/backends", query: url.Values{"ingress": {"shop/web"}}, wantCode: 200, wantBody: "proxy /debug/backends?ingress=shop%2Fweb"},
		{ns: "shop", pod: "proxy-1", port: 10254, path: "/debug/backends", query: url.Values{"ingress": {"shop/api"}}, wantCode: 200, wantBody: "proxy /debug/backends?ingress=shop%2Fapi"},
		{ns: "shop", pod: "proxy-1", port: 9999, path: "/metrics", wantErr: "failed to connect to localhost"},
		{ns: "secret", pod: "proxy-2", port: 10254, path: "/metrics", wantErr: `cannot create resource "pods/portforward"`},
	}
	for _, tc := range tests {
		code, body, err := pf.Get(ctx, tc.ns, tc.pod, tc.port, tc.path, tc.query, tc.header)
		what := fmt.Sprintf("GET %s/%s:%d%s", tc.ns, tc.pod, tc.port, tc.path)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want one containing %q", what, err, tc.wantErr)
			}
			continue
		}
		if err != nil || code != tc.wantCode || string(body) != tc.wantBody {
			t.Errorf("%s = %d %q %v, want %d %q", what, code, body, err, tc.wantCode, tc.wantBody)
		}
	}
	k.mu.Lock()
	upgrades, streams := k.upgrades, k.streams
	k.mu.Unlock()
	want := map[string]int{"metalgate-system/speaker-1": 1, "metalgate-system/speaker-2": 1, "shop/proxy-1": 1}
	if fmt.Sprint(upgrades) != fmt.Sprint(want) {
		t.Errorf("forwarding connections per pod = %v, want %v (one per pod, reused)", upgrades, want)
	}
	// speaker-1's two requests and proxy-1's two share keep-alive streams; the refused port
	// took one.
	if streams != 4 {
		t.Errorf("data streams = %d, want 4", streams)
	}

	pf.Close()
	for range want {
		<-k.closed // each forwarding connection ends (the test times out otherwise)
	}
	if _, _, err := pf.Get(ctx, "metalgate-system", "speaker-1", 7472, "/x", nil, nil); err == nil {
		t.Error("Get after Close succeeded")
	}
}
