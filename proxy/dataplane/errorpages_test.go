package dataplane

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/metalgate/metalgate/proxy/ingress"
)

// errorBackend is an error-page server that records what it was asked and answers with the
// X-Code status and "page:<code>" (as ingress-nginx's custom error pages do), or as mode
// says.
type errorBackend struct {
	mu   sync.Mutex
	reqs []*http.Request
	mode string // "", "hang", "huge"
}

func (eb *errorBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	eb.mu.Lock()
	eb.reqs = append(eb.reqs, r.Clone(r.Context()))
	mode := eb.mode
	eb.mu.Unlock()
	switch mode {
	case "hang":
		<-r.Context().Done()
		return
	case "huge":
		_, _ = w.Write([]byte(strings.Repeat("x", 2<<20)))
		return
	}
	code := 200
	if c := r.Header.Get("X-Code"); c != "" {
		if n, err := strconv.Atoi(c); err == nil {
			code = n
		}
	}
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, "page:"+r.Header.Get("X-Code"))
}

func (eb *errorBackend) asked() []*http.Request {
	eb.mu.Lock()
	defer eb.mu.Unlock()
	return append([]*http.Request(nil), eb.reqs...)
}

// failingUpstream answers by path: /503 a 503 with its own body, /404 a 404, /huge a 503
// whose body never ends (stopped is closed when a write fails: the proxy hung up).
func failingUpstream(t *testing.T) (srv *httptest.Server, stopped chan struct{}) {
	stopped = make(chan struct{})
	var once sync.Once
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "upstream=1")
		switch r.URL.Path {
		case "/503":
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "upstream body")
		case "/404":
			w.WriteHeader(404)
			_, _ = io.WriteString(w, "mine")
		case "/huge":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(503)
			chunk := make([]byte, 32<<10)
			for {
				if _, err := w.Write(chunk); err != nil {
					once.Do(func() { close(stopped) })
					return
				}
			}
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, stopped
}

// TestErrorPages pins custom-http-errors with default-backend (the Ingress's own, and the
// proxy's --default-backend-service) on both forwarding paths, hostile cases first.
func TestErrorPages(t *testing.T) {
	type want struct {
		status int
		body   string
		asked  int    // requests the error backend got
		xcode  string // its X-Code
	}
	for _, tc := range []struct {
		name     string
		host     string
		path     string
		hdr      map[string]string
		mode     string // the error backend's
		global   bool   // the Ingress has no default-backend: the proxy's own serves
		want     want
		noGlobal bool // no proxy default backend at all
	}{
		{name: "503 with an endless body: discarded unread, the page instead", host: "own.test", path: "/huge",
			want: want{503, "page:503", 1, "503"}},
		{name: "error backend hangs: the original status with the built-in body", host: "own.test", path: "/503", mode: "hang",
			want: want{503, "503 Service Unavailable\n", 1, "503"}},
		{name: "error backend page too large: built-in body", host: "own.test", path: "/503", mode: "huge",
			want: want{503, "503 Service Unavailable\n", 1, "503"}},
		{name: "error backend answers a listed code: its page, asked once (no loop)", host: "own.test", path: "/404",
			want: want{404, "page:404", 1, "404"}},
		{name: "a client's own X-Code is not what the error backend sees", host: "own.test", path: "/503", hdr: map[string]string{"X-Code": "200"},
			want: want{503, "page:503", 1, "503"}},
		{name: "path traversal in the URI is a header only", host: "own.test", path: "/503?next=../../../admin",
			want: want{503, "page:503", 1, "503"}},
		{name: "a status not listed passes through", host: "own.test", path: "/ok-but-404-not-listed",
			want: want{200, "ok", 0, ""}},
		{name: "no default-backend: the proxy's own serves", host: "global.test", path: "/503", global: true,
			want: want{503, "page:503", 1, "503"}},
		{name: "no default backend anywhere: the response as it is", host: "global.test", path: "/503", global: true, noGlobal: true,
			want: want{503, "upstream body", 0, ""}},
		{name: "no route: the proxy's own default backend with 404", host: "nowhere.test", path: "/x",
			want: want{404, "page:404", 1, "404"}},
		{name: "the proxy's own 502 is listed: a page too", host: "dead.test", path: "/",
			want: want{502, "page:502", 1, "502"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachPath(t, func(t *testing.T, opts Options) {
				up, stopped := failingUpstream(t)
				eb := &errorBackend{mode: tc.mode}
				ebSrv := httptest.NewServer(eb)
				t.Cleanup(ebSrv.Close)
				dead, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				deadAddr := dead.Addr().String()
				dead.Close() // nothing listens: connections are refused
				errs := map[string]string{ingress.PrefixNginx + "custom-http-errors": "404,502,503", ingress.PrefixNginx + "default-backend": "r1"}
				deadErrs := map[string]string{ingress.PrefixNginx + "proxy-next-upstream": "off"} // a refused connection is 502, not retried
				for k, v := range errs {
					deadErrs[k] = v
				}
				in := tableInput(
					route{host: "own.test", path: "/", endpoints: []string{hostport(up)}, annotations: errs},
					route{host: "errors.test", path: "/", endpoints: []string{hostport(ebSrv)}},
					route{host: "global.test", path: "/", endpoints: []string{hostport(up)}, annotations: map[string]string{ingress.PrefixNginx + "custom-http-errors": "503"}},
					route{host: "dead.test", path: "/", endpoints: []string{deadAddr}, annotations: deadErrs},
					route{host: "sys.test", path: "/", endpoints: []string{hostport(ebSrv)}, namespace: "sys"},
				)
				if !tc.noGlobal {
					in.DefaultBackendService = types.NamespacedName{Namespace: "sys", Name: "r4"}
				}
				tab, problems := ingress.Build(in)
				if len(problems) > 0 && !tc.noGlobal {
					t.Fatalf("build: %v", problems)
				}
				opts.ErrorPageTimeout = 300 * time.Millisecond
				_, addr, _ := startProxy(t, opts, tab)
				c := &http.Client{Timeout: 10 * time.Second}
				hdr := map[string]string{"Host": tc.host, "Accept": "application/json"}
				for k, v := range tc.hdr {
					hdr[k] = v
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+addr+tc.path, nil)
				for k, v := range hdr {
					if k == "Host" {
						req.Host = v
					} else {
						req.Header.Set(k, v)
					}
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want.status || string(body) != tc.want.body {
					t.Fatalf("got %d %q; want %d %q", resp.StatusCode, body, tc.want.status, tc.want.body)
				}
				if tc.want.asked > 0 && resp.Header.Get("Set-Cookie") != "" {
					t.Errorf("the upstream's Set-Cookie reached the client with the error page: %q", resp.Header.Get("Set-Cookie"))
				}
				asked := eb.asked()
				if len(asked) != tc.want.asked {
					t.Fatalf("error backend asked %d times; want %d", len(asked), tc.want.asked)
				}
				if tc.path == "/huge" {
					select {
					case <-stopped:
					case <-time.After(10 * time.Second):
						t.Fatal("the upstream's endless body was still being read")
					}
				}
				if tc.want.asked == 0 {
					return
				}
				got := asked[0]
				if vv := got.Header.Values("X-Code"); len(vv) != 1 || vv[0] != tc.want.xcode {
					t.Errorf("X-Code %q; want %q alone", vv, tc.want.xcode)
				}
				if got.URL.Path != "/" || got.Method != http.MethodGet {
					t.Errorf("error backend asked %s %s; want GET /", got.Method, got.URL)
				}
				if got.Header.Get("X-Format") != "application/json" {
					t.Errorf("X-Format %q; want the client's Accept", got.Header.Get("X-Format"))
				}
				if tc.host == "nowhere.test" {
					return
				}
				if u := got.Header.Get("X-Original-Uri"); u != tc.path {
					t.Errorf("X-Original-URI %q; want %q", u, tc.path)
				}
				ing := "r0"
				switch tc.host {
				case "global.test":
					ing = "r2"
				case "dead.test":
					ing = "r3"
				}
				for k, v := range map[string]string{"X-Namespace": "ns", "X-Ingress-Name": ing, "X-Service-Name": ing, "X-Service-Port": "http",
					"X-Request-Id": resp.Header.Get("X-Request-Id")} {
					if got.Header.Get(k) != v || v == "" {
						t.Errorf("%s %q; want %q", k, got.Header.Get(k), v)
					}
				}
			})
		})
	}
}
