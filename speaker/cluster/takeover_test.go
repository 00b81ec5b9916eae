package cluster_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/cluster"
	"github.com/metalgate/metalgate/speaker/election"
)

// TestTakeoverEventsBounded: 500 takeovers at once (a speaker starting with 500 addresses)
// record Burst Events, count the rest as dropped, and never more than Burst are queued.
func TestTakeoverEventsBounded(t *testing.T) {
	const n, burst = 500, 20
	b := fake.NewClientBuilder()
	for i := range n {
		b = b.WithObjects(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("s%d", i)}})
	}
	rec := events.NewFakeRecorder(n)
	reg := prometheus.NewRegistry()
	on, err := cluster.TakeoverEvents(cluster.TakeoverEventsOptions{Client: b.Build(), Recorder: rec, Node: "n1",
		Burst: burst, PerSecond: 0.001, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		prev := ""
		if i%2 == 1 {
			prev = "n2"
		}
		on(speaker.Takeover{VIP: speaker.VIP{Request: election.Request{VIP: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})}, Service: fmt.Sprintf("default/s%d", i)},
			Previous: prev, Where: []string{"eth0"}})
	}
	if got := len(rec.Events); got != burst {
		t.Errorf("recorded %d Events, want %d", got, burst)
	}
	first := <-rec.Events
	if !strings.Contains(first, cluster.ReasonAnnouncingL2) || !strings.Contains(first, "node n1 announces 192.0.2.0 on eth0") {
		t.Errorf("first Event = %q", first)
	}
	second := <-rec.Events
	if !strings.Contains(second, cluster.ReasonL2OwnerChanged) || !strings.Contains(second, "took 192.0.2.1 over from n2") {
		t.Errorf("second Event = %q", second)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP metalgate_speaker_takeover_events_dropped_total Takeover Events (AnnouncingL2, L2OwnerChanged) not recorded because more than the allowed rate were due.
# TYPE metalgate_speaker_takeover_events_dropped_total counter
metalgate_speaker_takeover_events_dropped_total %d
`, n-burst)), "metalgate_speaker_takeover_events_dropped_total"); err != nil {
		t.Error(err)
	}
}

func TestTakeoverEventsOptionsInvalid(t *testing.T) {
	for _, o := range []cluster.TakeoverEventsOptions{{Burst: -1}, {PerSecond: -2}} {
		if _, err := cluster.TakeoverEvents(o); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("%+v: err = %v, want one naming the negative value", o, err)
		}
	}
}
