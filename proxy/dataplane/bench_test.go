package dataplane

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkProxyGET measures the data plane in process: parallel keep-alive clients, one
// backend, small responses. Client and backend share the process, so use it for profiles
// (go test -run '^$' -bench ProxyGET -cpuprofile cpu.out ./proxy/dataplane/).
func BenchmarkProxyGET(b *testing.B) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer be.Close()
	tab := buildTable(b, route{host: "b.test", path: "/", endpoints: []string{hostport(be)}})
	_, addr, _ := startProxy(b, Options{}, tab)
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.Host = "b.test"
		for pb.Next() {
			resp, err := tr.RoundTrip(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
