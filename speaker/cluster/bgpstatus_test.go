package cluster_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/bgp"
	"github.com/metalgate/metalgate/speaker/cluster"
	"github.com/metalgate/metalgate/speaker/election"
)

// fakeSessions is a PeerStatusSource the test sets.
type fakeSessions struct {
	mu sync.Mutex
	st []bgp.PeerStatus
}

func (f *fakeSessions) Status() []bgp.PeerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.st)
}

func (f *fakeSessions) set(st ...bgp.PeerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
}

// countingRecorder forwards to a real recorder and counts Events by reason.
type countingRecorder struct {
	events.EventRecorder
	mu     sync.Mutex
	counts map[string]int
	notes  []string
}

func (r *countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.mu.Lock()
	r.counts[reason]++
	r.notes = append(r.notes, reason+": "+fmt.Sprintf(note, args...))
	r.mu.Unlock()
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (r *countingRecorder) count(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[reason]
}

// TestBGPStatusWriter runs one status writer per node, as the speaker's ServiceAccount with
// exactly config/speaker/rbac.yaml, against a real API server: each node owns its own entry of
// BGPPeer.status.nodes (server-side apply, field manager per node), nothing is written when
// nothing changed, an entry leaves when the peer no longer applies to the node, invalid peers
// are Unknown with the error and get one Warning Event per distinct error (a Normal one when
// fixed), and entries of deleted nodes are cleaned up. The speaker still cannot touch the spec.
func TestBGPStatusWriter(t *testing.T) {
	cfg, scheme, admin := startAPIServer(t)
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	applyRBAC(t, admin)
	for _, name := range []string{"good", "bad", "other"} {
		must(admin.Create(ctx, &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.BGPPeerSpec{MyASN: 64512, ASN: 64500, Address: "198.51.100.1"}}))
	}

	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":metalgate-speaker"}
	c, err := client.New(sa, client.Options{Scheme: scheme})
	must(err)
	cs, err := kubernetes.NewForConfig(sa)
	must(err)
	bc := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	stop := make(chan struct{})
	bc.StartRecordingToSink(stop)
	t.Cleanup(func() { close(stop); bc.Shutdown() })

	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	type node struct {
		w   *cluster.BGPStatus
		src *fakeSessions
		rec *countingRecorder
	}
	nodes := map[string]*node{}
	for _, name := range []string{"n1", "n2", "n3"} {
		n := &node{src: &fakeSessions{}, rec: &countingRecorder{EventRecorder: bc.NewRecorder(scheme, "metalgate-speaker"), counts: map[string]int{}}}
		n.w, err = cluster.NewBGPStatus(cluster.BGPStatusOptions{Node: name, Namespace: ns, Client: c, Source: n.src, Recorder: n.rec, Now: clock})
		must(err)
		nodes[name] = n
	}
	world := func(peers []string, invalid map[string]string, allNodes ...string) speaker.World {
		w := speaker.World{Speakers: allNodes}
		var bc bgp.Config
		for _, n := range allNodes {
			w.Nodes = append(w.Nodes, election.Node{Name: n})
		}
		for _, p := range peers {
			bc.Peers = append(bc.Peers, bgp.Peer{Name: p})
		}
		for _, p := range slices.Sorted(func(yield func(string) bool) {
			for k := range invalid {
				if !yield(k) {
					return
				}
			}
		}) {
			bc.Invalid = append(bc.Invalid, bgp.InvalidPeer{Name: p, Err: errors.New(invalid[p])})
		}
		w.Modes = map[speaker.Mode]any{speaker.ModeBGP: bc}
		return w
	}
	sync := func(names ...string) {
		t.Helper()
		for _, n := range names {
			if err := nodes[n].w.Sync(ctx); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
		}
	}
	get := func(name string) *v1alpha1.BGPPeer {
		t.Helper()
		var p v1alpha1.BGPPeer
		must(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p))
		return &p
	}
	entries := func(name string) []v1alpha1.BGPPeerNodeStatus {
		t.Helper()
		out := get(name).Status.Nodes
		slices.SortFunc(out, func(a, b v1alpha1.BGPPeerNodeStatus) int { return strings.Compare(a.Node, b.Node) })
		return out
	}
	t1 := now.Add(-time.Minute)
	e := func(node, state string, prefixes int32, lastErr string, at time.Time) v1alpha1.BGPPeerNodeStatus {
		return v1alpha1.BGPPeerNodeStatus{Node: node, SessionState: state, PrefixesAdvertised: prefixes, LastError: lastErr, LastTransitionTime: metav1.NewTime(at)}
	}
	cmpTime := cmp.Comparer(func(a, b metav1.Time) bool { return a.Unix() == b.Unix() })

	// Nothing is written before the first World (a restarted speaker does not wipe its entries).
	sync("n1")
	if got := entries("good"); len(got) != 0 {
		t.Fatalf("wrote %v before the first World", got)
	}

	// n1: "good" is Established with 2 prefixes, "bad" cannot be configured. n2: "good" is
	// Active after a refused connection. "other" selects neither.
	badErr := `spec.passwordSecret: no Secret "md5" in namespace metalgate-system`
	nodes["n1"].src.set(bgp.PeerStatus{Name: "good", SessionState: v1alpha1.SessionStateEstablished, PrefixesAdvertised: 2, Since: t1})
	nodes["n1"].w.SetWorld(world([]string{"good"}, map[string]string{"bad": badErr}, "n1", "n2"))
	nodes["n2"].src.set(bgp.PeerStatus{Name: "good", SessionState: v1alpha1.SessionStateActive, LastError: "connection refused", Since: t1})
	nodes["n2"].w.SetWorld(world([]string{"good"}, nil, "n1", "n2"))
	sync("n1", "n2")
	want := []v1alpha1.BGPPeerNodeStatus{
		e("n1", v1alpha1.SessionStateEstablished, 2, "", t1),
		e("n2", v1alpha1.SessionStateActive, 0, "connection refused", t1),
	}
	if diff := cmp.Diff(want, entries("good"), cmpTime); diff != "" {
		t.Errorf("good (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]v1alpha1.BGPPeerNodeStatus{e("n1", v1alpha1.SessionStateUnknown, 0, badErr, now)}, entries("bad"), cmpTime); diff != "" {
		t.Errorf("bad (-want +got):\n%s", diff)
	}
	if got := entries("other"); len(got) != 0 {
		t.Errorf("other has entries %v; it selects no node", got)
	}
	// One field manager per node, on the status subresource.
	managers := map[string]bool{}
	for _, mf := range get("good").ManagedFields {
		if mf.Subresource == "status" {
			managers[mf.Manager] = true
		}
	}
	if !managers["metalgate-speaker/n1"] || !managers["metalgate-speaker/n2"] {
		t.Errorf("status managers %v, want metalgate-speaker/n1 and /n2", managers)
	}

	// Nothing changed: nothing is written, and no second Warning.
	rv := get("good").ResourceVersion + "/" + get("bad").ResourceVersion
	now = now.Add(5 * time.Second)
	sync("n1", "n2", "n1")
	if got := get("good").ResourceVersion + "/" + get("bad").ResourceVersion; got != rv {
		t.Errorf("resource versions %s -> %s without a change", rv, got)
	}
	if n := nodes["n1"].rec.count(contract.ReasonBGPPeerInvalid); n != 1 {
		t.Errorf("%d InvalidBGPPeer events after three passes, want 1", n)
	}

	// The session goes down on n1: a new state, a new transition time, the error; n2 untouched.
	t2 := now
	nodes["n1"].src.set(bgp.PeerStatus{Name: "good", SessionState: v1alpha1.SessionStateActive, PrefixesAdvertised: 2, LastError: "hold timer expired", Since: t2})
	sync("n1")
	want[0] = e("n1", v1alpha1.SessionStateActive, 2, "hold timer expired", t2)
	if diff := cmp.Diff(want, entries("good"), cmpTime); diff != "" {
		t.Errorf("good after the drop (-want +got):\n%s", diff)
	}
	// Prefixes change, the state does not: the transition time stays.
	nodes["n1"].src.set(bgp.PeerStatus{Name: "good", SessionState: v1alpha1.SessionStateActive, PrefixesAdvertised: 3, LastError: "hold timer expired", Since: now.Add(time.Hour)})
	sync("n1")
	want[0].PrefixesAdvertised = 3
	if diff := cmp.Diff(want, entries("good"), cmpTime); diff != "" {
		t.Errorf("good after a prefix change (-want +got):\n%s", diff)
	}

	// Another error for "bad": a second Warning. Then it is fixed: a Normal Event.
	badErr2 := `spec.passwordSecret: no key "password" in Secret "md5"`
	nodes["n1"].w.SetWorld(world([]string{"good"}, map[string]string{"bad": badErr2}, "n1", "n2"))
	sync("n1", "n1")
	if n := nodes["n1"].rec.count(contract.ReasonBGPPeerInvalid); n != 2 {
		t.Errorf("%d InvalidBGPPeer events after a new error, want 2", n)
	}
	nodes["n1"].w.SetWorld(world([]string{"good", "bad"}, nil, "n1", "n2"))
	sync("n1")
	if n := nodes["n1"].rec.count(contract.ReasonBGPPeerValid); n != 1 {
		t.Errorf("%d BGPPeerConfigured events after the fix, want 1", n)
	}
	if diff := cmp.Diff([]v1alpha1.BGPPeerNodeStatus{e("n1", v1alpha1.SessionStateIdle, 0, "", now)}, entries("bad"), cmpTime); diff != "" {
		t.Errorf("bad after the fix (-want +got):\n%s", diff)
	}
	// The Events reached the API server, on the BGPPeer, naming the field.
	testenv.Eventually(t, 10*time.Second, "the Events on BGPPeer bad reach the API server", func() error {
		var evs eventsv1.EventList
		must(admin.List(ctx, &evs, client.InNamespace(ns)))
		var got []string
		for _, ev := range evs.Items {
			if ev.Regarding.Kind == "BGPPeer" && ev.Regarding.Name == "bad" {
				got = append(got, ev.Type+" "+ev.Reason+": "+ev.Note)
			}
		}
		slices.Sort(got)
		wantEv := []string{
			"Normal BGPPeerConfigured: node n1 configured the peer (session Idle)",
			"Warning InvalidBGPPeer: node n1 cannot use this peer: " + badErr2,
			"Warning InvalidBGPPeer: node n1 cannot use this peer: " + badErr,
		}
		slices.Sort(wantEv)
		if !slices.Equal(got, wantEv) {
			return fmt.Errorf("events on BGPPeer bad:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantEv, "\n"))
		}
		return nil
	})

	// "good" no longer selects n2: n2 removes its entry, n1's stays.
	nodes["n2"].w.SetWorld(world(nil, nil, "n1", "n2"))
	sync("n2")
	if got := entries("good"); len(got) != 1 || got[0].Node != "n1" {
		t.Errorf("good after n2 left: %v, want n1's entry only", got)
	}

	// A node that is deleted cannot remove its entries: the first speaker does.
	nodes["n3"].src.set(bgp.PeerStatus{Name: "good", SessionState: v1alpha1.SessionStateEstablished, Since: t1})
	nodes["n3"].w.SetWorld(world([]string{"good"}, nil, "n1", "n2", "n3"))
	sync("n3")
	if got := entries("good"); len(got) != 2 {
		t.Fatalf("good with n3: %v, want n1 and n3", got)
	}
	sync("n2") // not the first speaker: leaves it
	if got := entries("good"); len(got) != 2 {
		t.Fatalf("n2 removed n3's entry: %v", got)
	}
	sync("n1") // its World has no node n3
	if got := entries("good"); len(got) != 1 || got[0].Node != "n1" {
		t.Errorf("good after n3 was deleted: %v, want n1's entry only", got)
	}

	// Least privilege: the status only, never the spec.
	p := get("good")
	p.Spec.ASN = 1
	if err := c.Update(ctx, p); !apierrors.IsForbidden(err) {
		t.Errorf("speaker updated a BGPPeer spec: err = %v, want Forbidden", err)
	}
	if err := c.Delete(ctx, p); !apierrors.IsForbidden(err) {
		t.Errorf("speaker deleted a BGPPeer: err = %v, want Forbidden", err)
	}
}
