package controlplane

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The status publisher's policy for one Ingress (decide.go), stepped through like the
// publisher does: each step is one sync of the Ingress; the state a step leaves is the next
// step's, and a write the step decides succeeds. When decide asks for the live Services, the
// step's live verdict answers.
func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	self := types.NamespacedName{Namespace: "ingress", Name: "proxy-a"}
	winner := Candidate{Service: types.NamespacedName{Namespace: "team", Name: "proxy-b"}, FieldManager: "metalgate-proxy-b",
		Addresses: []string{"100.64.0.2"}}
	ours := lbAddrs("100.64.0.1")
	foreign := lbAddrs("172.18.0.2") // a node IP, written by a controller with a wrong publishService
	policy := statusPolicy{ConflictWindow: 10 * time.Minute, MaxConflicts: 3, BackoffBase: time.Second,
		BackoffMax: 5 * time.Minute, ForeignQuiet: 10 * time.Minute}
	noRival, lost := &rival{}, &rival{Lost: true, Winner: winner}

	// The world as another writer left it: its value, its field manager.
	replaced := func(in *decideInput) { in.Current, in.Mine, in.OtherWriter = foreign, false, "nginx" }
	// The world right after our write.
	written := func(in *decideInput) { in.Current, in.Mine = ours, true }

	type want struct {
		Action    action
		Recheck   bool   // decide asked for the live Services first
		Yield     string // yield reason (actYield)
		To        string
		Until     time.Duration // after t0; 0: no wake-up
		Addrs     string
		Report    bool
		Conflict  bool
		Stopped   bool
		NoAddrEv  bool
		Resumed   string
		ResumedFW string
		Forget    bool
	}
	type step struct {
		at   time.Duration // after t0
		edit func(*decideInput)
		live *rival // the live verdict, when decide asks for it
		want want
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a foreign writer that keeps replacing our status: back off, stop, resume after quiet, stop for good", []step{
			{0, nil, nil, want{Action: actWrite, Addrs: "100.64.0.1"}},
			{time.Second, replaced, noRival, want{Action: actWrite, Recheck: true, Addrs: "100.64.0.1"}},
			{2 * time.Second, replaced, noRival, want{Action: actWait, Recheck: true, Until: 3 * time.Second, Conflict: true}},
			{2500 * time.Millisecond, replaced, noRival, want{Action: actWait, Until: 3 * time.Second}},
			{3 * time.Second, replaced, noRival, want{Action: actWrite, Recheck: true, Addrs: "100.64.0.1"}},
			{4 * time.Second, replaced, noRival, want{Action: actYield, Recheck: true, Yield: yieldForeign, To: "nginx",
				Until: 4*time.Second + 10*time.Minute, Report: true, Stopped: true}},
			{5 * time.Second, replaced, nil, want{Action: actWait, Until: 4*time.Second + 10*time.Minute}},
			{4*time.Second + 10*time.Minute, replaced, noRival, want{Action: actWrite, Recheck: true, Addrs: "100.64.0.1", ResumedFW: "nginx"}},
			// One overwrite after a resume stops it again; the quiet time doubles.
			{11 * time.Minute, replaced, noRival, want{Action: actYield, Recheck: true, Yield: yieldForeign, To: "nginx",
				Until: 31 * time.Minute, Report: true, Stopped: true}},
			{31 * time.Minute, replaced, noRival, want{Action: actWrite, Recheck: true, Addrs: "100.64.0.1", ResumedFW: "nginx"}},
			// The third stop is for good: no wake-up, it waits until nginx lets go.
			{32 * time.Minute, replaced, noRival, want{Action: actYield, Recheck: true, Yield: yieldForeign, To: "nginx", Report: true, Stopped: true}},
			{5 * time.Hour, replaced, nil, want{Action: actWait}},
			{5*time.Hour + time.Second, func(in *decideInput) { in.Current, in.OtherWriter = nil, "" }, nil,
				want{Action: actWrite, Addrs: "100.64.0.1", ResumedFW: "nginx"}},
		}},
		{"another metalgate proxy wins the arbitration: yield, reported once; write again when it goes", []step{
			{0, func(in *decideInput) { in.Cached = *lost }, nil, want{Action: actYield, Yield: yieldProxy, To: "team/proxy-b", Report: true}},
			{time.Second, func(in *decideInput) { in.Cached = *lost }, nil, want{Action: actYield, Yield: yieldProxy, To: "team/proxy-b"}},
			{2 * time.Second, nil, nil, want{Action: actWrite, Addrs: "100.64.0.1", Resumed: yieldProxy}},
		}},
		{"a proxy newer than our cache wrote the status: the live re-check finds it, no write", []step{
			{0, func(in *decideInput) { in.Current, in.OtherWriter = lbAddrs("100.64.0.2"), "metalgate-proxy-b" }, lost,
				want{Action: actYield, Recheck: true, Yield: yieldProxy, To: "team/proxy-b", Report: true}},
		}},
		{"our value replaced by a proxy that wins on the live Services: yield, not a conflict", []step{
			{0, nil, nil, want{Action: actWrite, Addrs: "100.64.0.1"}},
			{time.Second, func(in *decideInput) {
				in.Current, in.Mine, in.OtherWriter = lbAddrs("100.64.0.2"), false, "metalgate-proxy-b"
			}, lost,
				want{Action: actYield, Recheck: true, Yield: yieldProxy, To: "team/proxy-b", Report: true}},
		}},
		{"the status-owner annotation names another writer: yield, even with nothing written", []step{
			{0, func(in *decideInput) { in.StatusOwner = "nginx" }, nil, want{Action: actYield, Yield: yieldAnnotation, To: "nginx", Report: true}},
			{time.Second, func(in *decideInput) { in.StatusOwner = "nginx"; replaced(in) }, nil, want{Action: actYield, Yield: yieldAnnotation, To: "nginx"}},
			{2 * time.Second, func(in *decideInput) { in.StatusOwner = "other" }, nil, want{Action: actYield, Yield: yieldAnnotation, To: "other", Report: true}},
		}},
		{"the annotation naming us forces the write: no arbitration, no live check, no stop", []step{
			{0, func(in *decideInput) { in.StatusOwner = "metalgate-proxy"; in.Cached = *lost; replaced(in) }, nil,
				want{Action: actWrite, Addrs: "100.64.0.1"}},
			{time.Second, func(in *decideInput) { in.StatusOwner = "ingress/proxy-a"; replaced(in) }, nil, want{Action: actWrite, Addrs: "100.64.0.1"}},
			{2 * time.Second, func(in *decideInput) { in.StatusOwner = "ingress/proxy-a"; replaced(in) }, nil,
				want{Action: actWait, Until: 3 * time.Second, Conflict: true}},
			{3 * time.Second, func(in *decideInput) { in.StatusOwner = "ingress/proxy-a"; replaced(in) }, nil, want{Action: actWrite, Addrs: "100.64.0.1"}},
			{4 * time.Second, func(in *decideInput) { in.StatusOwner = "ingress/proxy-a"; replaced(in) }, nil,
				want{Action: actWait, Until: 6 * time.Second, Conflict: true}},
		}},
		{"our Service loses its address: clear what we wrote, report once", []step{
			{0, nil, nil, want{Action: actWrite, Addrs: "100.64.0.1"}},
			{time.Second, func(in *decideInput) {
				written(in)
				in.Want, in.NoAddress = nil, "publish Service ingress/proxy-a has no load-balancer address yet"
			}, nil,
				want{Action: actClear, NoAddrEv: true}},
			{2 * time.Second, func(in *decideInput) {
				in.Want, in.NoAddress = nil, "publish Service ingress/proxy-a has no load-balancer address yet"
			}, nil,
				want{Action: actNothing}},
		}},
		{"our Service has no address: a foreign status is never cleared", []step{
			{0, func(in *decideInput) {
				replaced(in)
				in.Want, in.NoAddress = nil, "publish Service ingress/proxy-a not found"
			}, nil,
				want{Action: actNothing, NoAddrEv: true}},
		}},
		{"an Ingress no longer ours: clear only what we wrote, forget it", []step{
			{0, func(in *decideInput) { in.Owned = false; written(in) }, nil, want{Action: actClear, Forget: true}},
			{time.Second, func(in *decideInput) { in.Owned = false; replaced(in) }, nil, want{Action: actNothing, Forget: true}},
		}},
		{"our write not in the cache yet: the cached status is not judged", []step{
			{0, nil, nil, want{Action: actWrite, Addrs: "100.64.0.1"}},
			{time.Second, func(in *decideInput) { in.ResourceVersion = "0"; replaced(in) }, nil, want{Action: actNothing}},
		}},
		{"already right: nothing to write", []step{
			{0, written, nil, want{Action: actNothing}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st statusState
			for i, s := range tc.steps {
				in := decideInput{
					Now: t0.Add(s.at), Policy: policy, Self: self, FieldManager: "metalgate-proxy", Owned: true,
					ResourceVersion: fmt.Sprint(i), Want: ours, State: st,
				}
				if s.edit != nil {
					s.edit(&in)
				}
				before := fmt.Sprintf("%+v", in.State)
				d := decide(in)
				recheck := d.Action == actRecheck
				if recheck {
					if s.live == nil {
						t.Fatalf("step %d: decide asked for the live Services (%s); the step has no live verdict", i, d.Reason)
					}
					in.Live = s.live
					d = decide(in)
				}
				if after := fmt.Sprintf("%+v", in.State); after != before {
					t.Fatalf("step %d: decide changed its input state:\n%s\n%s", i, before, after)
				}
				got := want{Action: d.Action, Recheck: recheck, Yield: d.Yield.Why, To: d.Yield.To, Addrs: formatAddresses(d.Addrs),
					Report: d.ReportYield, Conflict: d.Conflict, Stopped: d.Stopped, NoAddrEv: d.NoAddressEvent,
					Resumed: d.ResumedFrom, ResumedFW: d.ResumedForeign, Forget: d.Forget}
				if !d.Until.IsZero() {
					got.Until = d.Until.Sub(t0)
				}
				if d.Action != actWrite {
					got.Addrs = ""
				}
				if diff := cmp.Diff(s.want, got); diff != "" {
					t.Fatalf("step %d at %v (%s): decision (-want +got):\n%s", i, s.at, d.Reason, diff)
				}
				if d.Reason == "" {
					t.Errorf("step %d: decision %s without a reason", i, d.Action)
				}
				st = d.Next
				if d.Action == actWrite { // the write succeeds, as the publisher records it
					st.wrote, st.basedOn = d.Addrs, in.ResourceVersion
				}
			}
		})
	}
}

func lbAddrs(ips ...string) []networkingv1.IngressLoadBalancerIngress {
	out := make([]networkingv1.IngressLoadBalancerIngress, len(ips))
	for i, ip := range ips {
		out[i].IP = ip
	}
	return out
}
