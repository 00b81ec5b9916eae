package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
)

// TestRecord: what the demo counts as a change of an Ingress's address, from polls and watch
// events, each stream on its own.
func TestRecord(t *testing.T) {
	type step struct {
		poll  bool // else a watch event
		value string
	}
	tests := []struct {
		name        string
		steps       []step
		wantValues  []string
		wantChanges int
		wantLine    string
	}{
		{"nothing read yet", nil, nil, 0, "one=? (0 value(s), 0 change(s))"},
		{"steady", []step{{true, "100.64.0.1"}, {true, "100.64.0.1"}, {false, "100.64.0.1"}, {false, "100.64.0.1"}},
			[]string{"100.64.0.1"}, 0, "one=100.64.0.1 (1 value(s), 0 change(s))"},
		{"a flap seen by polls only: two changes, two values",
			[]step{{true, "100.64.0.1"}, {true, "172.18.0.2"}, {true, "100.64.0.1"}},
			[]string{"100.64.0.1", "172.18.0.2"}, 2, "one=100.64.0.1 (2 value(s), 2 change(s))"},
		{"a flap between polls, seen by the watch",
			[]step{{true, "100.64.0.1"}, {false, "100.64.0.1"}, {false, ""}, {false, "100.64.0.1"}, {true, "100.64.0.1"}},
			[]string{"100.64.0.1", ""}, 2, "one=100.64.0.1 (2 value(s), 2 change(s))"},
		{"the first poll and the first event are no change, even if they differ",
			[]step{{false, ""}, {true, "100.64.0.1"}},
			[]string{"", "100.64.0.1"}, 0, "one=100.64.0.1 (2 value(s), 0 change(s))"},
		{"an empty address shows as <none>", []step{{true, ""}}, []string{""}, 0, "one=<none> (1 value(s), 0 change(s))"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r record
			for _, s := range tc.steps {
				if s.poll {
					r.polled(s.value)
				} else {
					r.watched(s.value)
				}
			}
			if diff := cmp.Diff(tc.wantValues, r.values); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			if r.changes != tc.wantChanges {
				t.Errorf("changes = %d, want %d", r.changes, tc.wantChanges)
			}
			if got := r.progress("one"); got != tc.wantLine {
				t.Errorf("progress = %q, want %q", got, tc.wantLine)
			}
		})
	}
}

// TestDrainIngressWatch: every Ingress event's address is seen; bookmarks move the
// resourceVersion only; an error event makes the watcher read again.
func TestDrainIngressWatch(t *testing.T) {
	ing := func(rv string, ips ...string) *networkingv1.Ingress {
		i := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "echo", ResourceVersion: rv}}
		for _, ip := range ips {
			i.Status.LoadBalancer.Ingress = append(i.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: ip})
		}
		return i
	}
	tests := []struct {
		name   string
		events []apiwatch.Event
		wantRV string
		want   []string
	}{
		{"no events: resume where it started", nil, "10", nil},
		{"updates are seen in order, the last version resumes",
			[]apiwatch.Event{{Type: apiwatch.Modified, Object: ing("11", "100.64.0.1")}, {Type: apiwatch.Modified, Object: ing("12", "100.64.0.1", "2001:db8::1")}},
			"12", []string{"100.64.0.1", "100.64.0.1,2001:db8::1"}},
		{"a bookmark moves the version, shows no value",
			[]apiwatch.Event{{Type: apiwatch.Modified, Object: ing("11", "100.64.0.1")}, {Type: apiwatch.Bookmark, Object: ing("15")}},
			"15", []string{"100.64.0.1"}},
		{"an error (version too old) makes it read again",
			[]apiwatch.Event{{Type: apiwatch.Modified, Object: ing("11", "100.64.0.1")}, {Type: apiwatch.Error, Object: &metav1.Status{Reason: metav1.StatusReasonExpired}}},
			"", []string{"100.64.0.1"}},
		{"deleted: the empty address is seen",
			[]apiwatch.Event{{Type: apiwatch.Deleted, Object: ing("13")}},
			"13", []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := apiwatch.NewFakeWithChanSize(len(tc.events), false)
			for _, ev := range tc.events {
				w.Action(ev.Type, ev.Object)
			}
			w.Stop()
			var seen []string
			rv := drainIngressWatch(w, "10", func(v string) { seen = append(seen, v) })
			if rv != tc.wantRV {
				t.Errorf("resume from %q, want %q", rv, tc.wantRV)
			}
			if diff := cmp.Diff(tc.want, seen); diff != "" {
				t.Errorf("seen (-want +got):\n%s", diff)
			}
		})
	}
}
