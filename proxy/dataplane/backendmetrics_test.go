package dataplane

import (
	"maps"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metalgate/metalgate/proxy/table"
)

// endpointGauges reads metalgate_proxy_backend_endpoints ("namespace/service/state") and the
// changed timestamps ("namespace/service") from reg.
func endpointGauges(t *testing.T, reg *prometheus.Registry) (counts, changed map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts, changed = map[string]float64{}, map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetName() {
			case "metalgate_proxy_backend_endpoints":
				counts[l["namespace"]+"/"+l["service"]+"/"+l["state"]] = m.GetGauge().GetValue()
			case "metalgate_proxy_backend_endpoints_changed_timestamp_seconds":
				changed[l["namespace"]+"/"+l["service"]] = m.GetGauge().GetValue()
			}
		}
	}
	return counts, changed
}

// TestBackendEndpointsMetric: each Service the table routes to is exported with its routed,
// ejected and not-routed endpoints and when its endpoints last changed. Hostile first:
// requests for hosts no route takes add no series. An endpoint that keeps refusing
// connections shows as ejected; a Service the next table drops disappears.
func TestBackendEndpointsMetric(t *testing.T) {
	be := echoBackend(t, "b")
	// An address that refuses connections: a listener closed at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	two := buildTable(t, route{host: "a.test", path: "/", endpoints: []string{hostport(be), dead}, namespace: "team"},
		route{host: "b.test", path: "/", endpoints: []string{hostport(be)}, namespace: "other"})
	one := buildTable(t, route{host: "a.test", path: "/", endpoints: []string{hostport(be), dead}, namespace: "team"})
	forEachPath(t, func(t *testing.T, opts Options) {
		reg := prometheus.NewRegistry()
		opts.Metrics = NewMetrics(reg)
		opts.FailureThreshold, opts.EjectFor = 1, time.Hour
		s, addr, _ := startProxy(t, opts, two)
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		for _, host := range []string{"evil.test", "x.a.test", "team"} {
			resp, _ := get(t, c, "http://"+addr+"/", map[string]string{"Host": host})
			resp.Body.Close()
		}
		counts, changed := endpointGauges(t, reg)
		want := map[string]float64{"team/r0/routed": 2, "team/r0/ejected": 0, "team/r0/not_routed": 0,
			"other/r1/routed": 1, "other/r1/ejected": 0, "other/r1/not_routed": 0}
		if !maps.Equal(counts, want) {
			t.Errorf("endpoint series %v, want %v", counts, want)
		}
		if len(changed) != 2 || changed["team/r0"] <= 0 || changed["other/r1"] <= 0 {
			t.Errorf("changed timestamps %v, want one per Service", changed)
		}
		// Requests to a.test until the dead endpoint has been tried (and ejected: threshold 1).
		for i := 0; i < 20; i++ {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
			req.Host = "a.test"
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
			}
			if counts, _ = endpointGauges(t, reg); counts["team/r0/ejected"] == 1 {
				break
			}
		}
		if counts["team/r0/ejected"] != 1 {
			t.Errorf("after requests to a.test, ejected %v, want 1 (%s refuses connections)", counts["team/r0/ejected"], dead)
		}
		before := changed["team/r0"]
		s.Swap(one) // a rebuilt table: other/r1 gone, team/r0 with the same endpoints
		counts, changed = endpointGauges(t, reg)
		if _, ok := counts["other/r1/routed"]; ok || len(changed) != 1 {
			t.Errorf("after a table without other/r1: %v %v, want it gone", counts, changed)
		}
		if changed["team/r0"] != before {
			t.Errorf("team/r0 changed at %v after a rebuild with the same endpoints, want %v kept", changed["team/r0"], before)
		}
	})
}

// TestEndpointChanges: a backend's change time moves only when its endpoints change, not when
// a table is rebuilt with the same ones; a backend that leaves is forgotten.
func TestEndpointChanges(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var c endpointChanges
	a1 := testPool("ns/a:80", "10.0.0.1:80", "10.0.0.2:80")
	b1 := testPool("ns/b:80", "10.0.1.1:80")
	c.update([]*pool{a1, b1}, nil, t0)
	a2 := testPool("ns/a:80", "10.0.0.1:80", "10.0.0.2:80") // rebuilt, same endpoints
	c.update([]*pool{a2}, []*pool{a1}, t0.Add(time.Minute))
	a3 := testPool("ns/a:80", "10.0.0.1:80") // one endpoint fewer
	c.update([]*pool{a3}, []*pool{a2, b1}, t0.Add(2*time.Minute))
	got := c.snapshot()
	if len(got) != 1 || !got["ns/a:80"].Equal(t0.Add(2*time.Minute)) {
		t.Errorf("changes %v, want only ns/a:80 at t0+2m (b left; a changed then, not at the rebuild)", got)
	}
	c2 := endpointChanges{}
	c2.update([]*pool{a1}, nil, t0)
	c2.update([]*pool{a2}, []*pool{a1}, t0.Add(time.Minute))
	if got := c2.snapshot()["ns/a:80"]; !got.Equal(t0) {
		t.Errorf("after a rebuild with the same endpoints: %v, want t0 kept", got)
	}
}

func testPool(key string, eps ...string) *pool {
	return &pool{backend: &table.Backend{Key: key, Endpoints: eps}}
}
