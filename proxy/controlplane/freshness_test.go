package controlplane

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestFreshness(t *testing.T) {
	now := time.Unix(1000, 0)
	f := NewFreshness(2*time.Minute, KindIngress, KindService)
	f.now = func() time.Time { return now }
	f.OK(KindIngress)
	f.OK(KindService)
	steps := []struct {
		desc    string
		advance time.Duration
		do      func()
		ready   bool
	}{
		{"fresh", 0, nil, true},
		{"quiet for long is fine", 10 * time.Minute, nil, true},
		{"watch fails", 0, func() { f.Failed(KindService, errors.New("connection refused")) }, true},
		{"still within the bound", 119 * time.Second, func() { f.Failed(KindService, errors.New("connection refused")) }, true},
		{"past the bound", 2 * time.Second, nil, false},
		{"recovers on the next event or list", time.Second, func() { f.OK(KindService) }, true},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		if s.do != nil {
			s.do()
		}
		err := f.Ready()
		if (err == nil) != s.ready {
			t.Fatalf("%s: Ready() = %v, want ready=%v", s.desc, err, s.ready)
		}
		if err != nil && !strings.Contains(err.Error(), "Service") {
			t.Errorf("%s: error %q does not name the kind", s.desc, err)
		}
	}
	snap := f.Snapshot()
	if len(snap) != 2 || snap[0].Kind != KindIngress || snap[0].Age != 10*time.Minute+2*time.Minute+2*time.Second || snap[1].Broken {
		t.Errorf("snapshot %+v", snap)
	}
}

func TestKindOf(t *testing.T) {
	for desc, want := range map[string]string{"*v1.EndpointSlice": KindEndpointSlice, "*v1.Ingress": KindIngress, "*v1.IngressClass": KindIngressClass} {
		if got := kindOf(desc); got != want {
			t.Errorf("kindOf(%q) = %q, want %q", desc, got, want)
		}
	}
}
