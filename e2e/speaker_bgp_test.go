//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/e2e/lab"
)

const (
	// bgpPool is off the node segment: only the router's BGP routes reach it.
	bgpPool = "100.64.10.0/24"
	// bgpPoolV6 is off every lab range (segment 2001:db8::/64, pods 2001:db8:1::/48, Services
	// 2001:db8:2::/112, user links 2001:db8:ffff::/48): inside the lab only the router's BGP
	// routes reach it, and nothing routes it into the lab from the root namespace.
	bgpPoolV6 = "2001:db8:64:10::/120"
	// bgpPeerName is the BGPPeer of the lab router.
	bgpPeerName = "e2e-router"
)

// TestSpeakerAnnouncesBGP: with the speaker DaemonSet, a BGPPeer to the lab router (graceful
// restart on) and a BGPAdvertisement, the router learns the VIP/32 from all three nodes (ECMP)
// and the client reaches the echo pod through it. Then, on the same deployment:
//   - every speaker reports its session in BGPPeer.status.nodes and its announcements on
//     /debug/announcements;
//   - a BGPPeer with a missing password Secret gets Warning Events and lastError, once, while
//     the good peer's routes stay; creating the Secret fixes it (Normal Event);
//   - an IPv6 VIP is learned as /128 from all three nodes and reached through the router;
//   - deleting a speaker pod never makes the router withdraw that node's path (graceful
//     restart through the DaemonSet);
//   - with externalTrafficPolicy Local only the node of the endpoint advertises, and the route
//     follows the endpoint when it moves to another node.
func TestSpeakerAnnouncesBGP(t *testing.T) {
	l := openLab(t)
	cs := clientset(t, l)
	ctx := context.Background()

	deploySpeaker(t, l, cs)

	cl := labClient(t, l)
	pool := manualPool(t, cl, "e2e-bgp-", bgpPool, bgpPoolV6)
	routerPeering(t, l, cl, bgpPeerName, pool.Name, func(s *v1alpha1.BGPPeerSpec) { s.EnableGracefulRestart = true }, "64512:100")

	ns := testNamespace(t, cs, "e2e-bgp")
	svc, vip := webService(t, cs, cl, ns, pool.Name)

	eventually(t, 60*time.Second, fmt.Sprintf("router learns %s/32 from %v", vip, nodeAddrs(4)), func() error {
		return bgpNextHops(ctx, l, vip, nodeAddrs(4))
	})
	out, err := l.Vtysh(ctx, "show ip bgp "+vip.String()+"/32 json")
	if err != nil || !strings.Contains(out, `"64512:100"`) {
		t.Errorf("router's paths for %s/32 lack community 64512:100 (%v): %s", vip, err, shortErr(out))
	}
	curlThroughRouter(t, l, vip, ns)

	t.Run("status and debug endpoint", func(t *testing.T) {
		token, err := debugReaderToken(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "BGPPeer "+bgpPeerName+" status: every node Established with the VIP", func() error {
			return peerStatus(ctx, cl, bgpPeerName, func(n lab.Node, e *v1alpha1.BGPPeerNodeStatus) error {
				if e.SessionState != v1alpha1.SessionStateEstablished || e.PrefixesAdvertised < 1 || e.LastError != "" || e.LastTransitionTime.IsZero() {
					return fmt.Errorf("%s: %+v, want Established, prefixesAdvertised >= 1, no error, a transition time", n.Name, *e)
				}
				return nil
			})
		})
		for _, n := range lab.Nodes() {
			eventually(t, 15*time.Second, n.Name+" /debug/announcements lists the VIP to "+bgpPeerName, func() error {
				a, err := debugAnnouncements(ctx, l, n.Name, token)
				if err != nil {
					return err
				}
				if a.Node != n.Name {
					return fmt.Errorf("node %q, want %q", a.Node, n.Name)
				}
				for _, e := range a.Announcements {
					if e.VIP == vip.String() && e.Mode == "bgp" && e.Service == ns+"/web" && slices.Equal(e.Peers, []string{bgpPeerName}) {
						return nil
					}
				}
				return fmt.Errorf("no bgp entry for %s/web %s to [%s]: %+v", ns, vip, bgpPeerName, a.Announcements)
			})
		}
	})

	t.Run("invalid peer", func(t *testing.T) {
		const name, secret = "e2e-bad", "e2e-bad-md5"
		bad := &v1alpha1.BGPPeer{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: operatorNamespace},
			// The control plane runs no BGP: once valid, the session stays Connect/Active.
			Spec: v1alpha1.BGPPeerSpec{Address: lab.ControlPlane.IPv4.String(), MyASN: lab.NodeASN, ASN: lab.RouterASN,
				PasswordSecret: corev1.SecretReference{Name: secret}},
		}
		if err := cl.Create(ctx, bad); err != nil {
			t.Fatalf("create BGPPeer: %v", err)
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: operatorNamespace},
			Type: corev1.SecretTypeBasicAuth, StringData: map[string]string{"password": "s3cret"}}
		t.Cleanup(func() {
			_ = cl.Delete(context.Background(), bad)
			_ = cl.Delete(context.Background(), sec)
		})
		wantErr := fmt.Sprintf("spec.passwordSecret: no Secret %q in namespace %s", secret, operatorNamespace)
		eventually(t, 30*time.Second, "BGPPeer "+name+" status: Unknown with the error on every node", func() error {
			return peerStatus(ctx, cl, name, func(n lab.Node, e *v1alpha1.BGPPeerNodeStatus) error {
				if e.SessionState != v1alpha1.SessionStateUnknown || !strings.Contains(e.LastError, wantErr) {
					return fmt.Errorf("%s: %+v, want Unknown and lastError %q", n.Name, *e, wantErr)
				}
				return nil
			})
		})
		eventually(t, 30*time.Second, "a Warning InvalidBGPPeer Event from every node", func() error {
			return peerEvents(ctx, cs, bad, corev1.EventTypeWarning, "InvalidBGPPeer", wantErr)
		})
		// The good peer is untouched.
		if err := bgpNextHops(ctx, l, vip, nodeAddrs(4)); err != nil {
			t.Errorf("good peer's routes with an invalid peer next to it: %v", err)
		}
		if err := peerStatus(ctx, cl, bgpPeerName, func(n lab.Node, e *v1alpha1.BGPPeerNodeStatus) error {
			if e.SessionState != v1alpha1.SessionStateEstablished {
				return fmt.Errorf("%s: %s", n.Name, e.SessionState)
			}
			return nil
		}); err != nil {
			t.Errorf("good peer's sessions with an invalid peer next to it: %v", err)
		}

		// The Secret appears (the speakers read it again within 10 s): configured, Normal Event.
		if err := cl.Create(ctx, sec); err != nil {
			t.Fatalf("create Secret: %v", err)
		}
		eventually(t, 45*time.Second, "BGPPeer "+name+" configured on every node", func() error {
			return peerStatus(ctx, cl, name, func(n lab.Node, e *v1alpha1.BGPPeerNodeStatus) error {
				if e.SessionState == v1alpha1.SessionStateUnknown {
					return fmt.Errorf("%s: %+v, want a session state", n.Name, *e)
				}
				return nil
			})
		})
		eventually(t, 30*time.Second, "a Normal BGPPeerConfigured Event from every node", func() error {
			return peerEvents(ctx, cs, bad, corev1.EventTypeNormal, "BGPPeerConfigured", "configured the peer")
		})
		// Over those seconds of resyncs each node warned once: an Event recorded again would
		// have become a series.
		evs, err := cs.EventsV1().Events(operatorNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		warnings := 0
		for _, ev := range evs.Items {
			if ev.Regarding.UID == bad.UID && ev.Reason == "InvalidBGPPeer" {
				warnings++
				if ev.Series != nil {
					t.Errorf("Warning Event recorded %d times: %s", ev.Series.Count, ev.Note)
				}
			}
		}
		if warnings != lab.NodeCount {
			t.Errorf("%d InvalidBGPPeer Events, want one per node (%d)", warnings, lab.NodeCount)
		}
		if err := bgpNextHops(ctx, l, vip, nodeAddrs(4)); err != nil {
			t.Errorf("good peer's routes after the invalid peer was fixed: %v", err)
		}
	})

	t.Run("IPv6", func(t *testing.T) {
		single := corev1.IPFamilyPolicySingleStack
		svc6 := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web6", Namespace: ns, Annotations: map[string]string{"metalgate.io/address-pool": pool.Name}},
			Spec: corev1.ServiceSpec{
				Type:           corev1.ServiceTypeLoadBalancer,
				Selector:       map[string]string{"app": "web"},
				IPFamilyPolicy: &single,
				IPFamilies:     []corev1.IPFamily{corev1.IPv6Protocol},
				Ports:          []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		if err := cl.Create(ctx, svc6); err != nil {
			t.Fatal(err)
		}
		var vip6 netip.Addr
		eventually(t, 30*time.Second, "Service "+ns+"/web6 gets an IPv6 address from "+bgpPoolV6, func() error {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(svc6), svc6); err != nil {
				return err
			}
			if len(svc6.Status.LoadBalancer.Ingress) == 0 {
				return fmt.Errorf("no address yet")
			}
			a, err := netip.ParseAddr(svc6.Status.LoadBalancer.Ingress[0].IP)
			if err != nil || !netip.MustParsePrefix(bgpPoolV6).Contains(a) {
				return fmt.Errorf("address %q (%v), want one of %s", svc6.Status.LoadBalancer.Ingress[0].IP, err, bgpPoolV6)
			}
			vip6 = a
			return nil
		})
		eventually(t, 60*time.Second, fmt.Sprintf("router learns %s/128 from %v", vip6, nodeAddrs(6)), func() error {
			return bgpNextHops(ctx, l, vip6, nodeAddrs(6))
		})
		curlThroughRouter(t, l, vip6, ns)
	})

	t.Run("graceful restart", func(t *testing.T) {
		n := lab.Nodes()[1]
		eventually(t, 30*time.Second, "graceful restart negotiated with "+n.Name, func() error {
			out, err := l.Vtysh(ctx, "show bgp neighbors "+n.IPv4.String()+" json")
			if err != nil {
				return err
			}
			if !strings.Contains(out, `"gracefulRestart":"advertisedAndReceived"`) && !strings.Contains(out, `"remoteGrMode":"Restart"`) {
				return fmt.Errorf("no graceful restart in %s", shortErr(out))
			}
			return nil
		})
		eventually(t, 30*time.Second, "the router's kernel route to "+vip.String()+" via every node", func() error {
			nhs, err := kernelNextHops(ctx, l, vip)
			if err != nil {
				return err
			}
			if len(nhs) != lab.NodeCount {
				return fmt.Errorf("next hops %v", nhs)
			}
			return nil
		})
		pods := podsByNode(t, cs, operatorNamespace, "app.kubernetes.io/component=speaker")
		old, ok := pods[n.Name]
		if !ok {
			t.Fatalf("no speaker pod on %s", n.Name)
		}
		// Watch the router while the speaker restarts: its kernel routes every 20 ms (what the
		// client's packets follow; vtysh is too slow to poll that often on a busy machine),
		// and its BGP table for the path turning stale (proof that the session did drop).
		var (
			mu                    sync.Mutex
			polls, missing, stale int
			bgpPolls              int
			lastMiss              string
		)
		stop, done := make(chan struct{}), make(chan struct{}, 2)
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				nhs, err := kernelNextHops(ctx, l, vip)
				if err != nil {
					continue // inconclusive (a group replaced between the two reads): read again
				}
				mu.Lock()
				polls++
				if !nhs[n.IPv4.String()] {
					missing++
					lastMiss = fmt.Sprintf("kernel next hops %v", nhs)
				}
				mu.Unlock()
			}
		}()
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				paths, err := l.RouterPaths(ctx, vip)
				mu.Lock()
				bgpPolls++
				p, ok := paths[n.IPv4.String()]
				switch {
				case err != nil || !ok:
					missing++
					lastMiss = fmt.Sprintf("BGP paths %v, error %v", paths, err)
				case p.Stale:
					stale++
				}
				mu.Unlock()
			}
		}()
		if err := cs.CoreV1().Pods(operatorNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
			close(stop)
			t.Fatalf("delete speaker pod %s: %v", old.Name, err)
		}
		eventually(t, 90*time.Second, "a new speaker pod on "+n.Name+", ready", func() error {
			p, ok := podsByNode(t, cs, operatorNamespace, "app.kubernetes.io/component=speaker")[n.Name]
			if !ok || p.UID == old.UID {
				return fmt.Errorf("not yet replaced")
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("%s not ready", p.Name)
		})
		eventually(t, 60*time.Second, "the router's path from "+n.Name+" fresh again", func() error {
			paths, err := l.RouterPaths(ctx, vip)
			if err != nil {
				return err
			}
			if p, ok := paths[n.IPv4.String()]; !ok || p.Stale || len(paths) != lab.NodeCount {
				return fmt.Errorf("paths %v", paths)
			}
			return nil
		})
		close(stop)
		<-done
		<-done
		mu.Lock()
		defer mu.Unlock()
		t.Logf("during the restart: %d reads of the router's kernel routes, %d of its BGP table (%d with %s's path stale); %d without the path",
			polls, bgpPolls, stale, n.Name, missing)
		if missing > 0 {
			t.Errorf("the router lacked %s's path in %d of %d reads (last: %s)", n.Name, missing, polls+bgpPolls, lastMiss)
		}
		if polls < 20 {
			t.Errorf("only %d reads of the router's kernel routes: too few to tell", polls)
		}
		if stale == 0 {
			t.Errorf("the router never held %s's path as stale: the restart was not observed", n.Name)
		}
		eventually(t, 30*time.Second, "status of "+n.Name+" Established again", func() error {
			return peerStatus(ctx, cl, bgpPeerName, func(m lab.Node, e *v1alpha1.BGPPeerNodeStatus) error {
				if e.SessionState != v1alpha1.SessionStateEstablished {
					return fmt.Errorf("%s: %s", m.Name, e.SessionState)
				}
				return nil
			})
		})
	})

	t.Run("externalTrafficPolicy Local", func(t *testing.T) {
		// Only the node of the one ready endpoint advertises.
		if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			t.Fatal(err)
		}
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		if err := cl.Update(ctx, svc); err != nil {
			t.Fatalf("set externalTrafficPolicy Local: %v", err)
		}
		from := webPodNode(t, cs, ns)
		eventually(t, 60*time.Second, fmt.Sprintf("router learns %s/32 from %s (%s) only", vip, from.Name, from.IPv4), func() error {
			return bgpNextHops(ctx, l, vip, []string{from.IPv4.String()})
		})
		curlThroughRouter(t, l, vip, ns)

		// The endpoint moves to another node: so does the route.
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":`+
			`{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/hostname","operator":"NotIn","values":[%q]}]}]}}}}}}}`, from.Name)
		if out, err := l.Kubectl(ctx, "-n", ns, "patch", "deployment", "web", "--type=merge", "-p", patch); err != nil {
			t.Fatalf("move the echo pod off %s: %v\n%s", from.Name, err, out)
		}
		var to lab.Node
		eventually(t, 2*time.Minute, "the echo pod runs on another node than "+from.Name, func() error {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return err
			}
			if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName == from.Name || pods.Items[0].Spec.NodeName == "" {
				return fmt.Errorf("%d pods (the old one must be gone)", len(pods.Items))
			}
			to, err = lab.NodeByName(pods.Items[0].Spec.NodeName)
			return err
		})
		eventually(t, 60*time.Second, fmt.Sprintf("router learns %s/32 from %s (%s) only", vip, to.Name, to.IPv4), func() error {
			return bgpNextHops(ctx, l, vip, []string{to.IPv4.String()})
		})
		curlThroughRouter(t, l, vip, ns)
	})
}

// nodeAddrs returns every lab node's address of one IP version (4 or 6).
func nodeAddrs(version int) []string {
	var out []string
	for _, n := range lab.Nodes() {
		if version == 6 {
			out = append(out, n.IPv6.String())
		} else {
			out = append(out, n.IPv4.String())
		}
	}
	return out
}

// curlThroughRouter fetches http://vip/ from the client, whose default route is the router,
// until the echo pod of ns answers.
func curlThroughRouter(t *testing.T, l *lab.Lab, vip netip.Addr, ns string) {
	t.Helper()
	url := "http://" + netip.AddrPortFrom(vip, 80).String() + "/"
	eventually(t, 30*time.Second, "curl -g "+url+" from the client through the router", func() error {
		out, err := l.Exec(context.Background(), "client", "curl", "-g", "-s", "--max-time", "3", url)
		if err != nil {
			return fmt.Errorf("curl: %v: %s", err, shortErr(out))
		}
		if !strings.Contains(out, `"namespace":"`+ns+`"`) {
			return fmt.Errorf("answer is not the echo pod of %s: %s", ns, shortErr(out))
		}
		return nil
	})
}

// webPodNode returns the node of the one "app=web" pod in ns.
func webPodNode(t *testing.T, cs kubernetes.Interface, ns string) lab.Node {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("echo pods: %v (%d)", err, len(pods.Items))
	}
	n, err := lab.NodeByName(pods.Items[0].Spec.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// kernelNextHops returns the gateways of the router's kernel route to the VIP (zebra installs
// it with a nexthop object: a group of gateways for ECMP, or one gateway).
func kernelNextHops(ctx context.Context, l *lab.Lab, vip netip.Addr) (map[string]bool, error) {
	// ip -n: cheaper than ip netns exec (no mount namespace), it only needs the network one.
	ip := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "ip", append([]string{"-j", "-n", l.Namespace("router")}, args...)...).Output()
		return string(out), err
	}
	out, err := ip("route", "show", netip.PrefixFrom(vip, vip.BitLen()).String())
	if err != nil {
		return nil, err
	}
	var routes []struct {
		NHID     int    `json:"nhid"`
		Gateway  string `json:"gateway"`
		Nexthops []struct {
			Gateway string `json:"gateway"`
		} `json:"nexthops"`
	}
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		return nil, fmt.Errorf("parse %q: %v", shortErr(out), err)
	}
	got := map[string]bool{}
	if len(routes) == 0 {
		return got, nil // no route: nothing reaches the VIP
	}
	r := routes[0]
	if r.NHID == 0 {
		if r.Gateway != "" {
			got[r.Gateway] = true
		}
		for _, nh := range r.Nexthops {
			got[nh.Gateway] = true
		}
		return got, nil
	}
	out, err = ip("nexthop", "show")
	if err != nil {
		return nil, err
	}
	var nhs []struct {
		ID      int    `json:"id"`
		Gateway string `json:"gateway"`
		Group   []struct {
			ID int `json:"id"`
		} `json:"group"`
	}
	if err := json.Unmarshal([]byte(out), &nhs); err != nil {
		return nil, fmt.Errorf("parse %q: %v", shortErr(out), err)
	}
	byID := map[int]int{}
	for i, nh := range nhs {
		byID[nh.ID] = i
	}
	i, ok := byID[r.NHID]
	if !ok {
		return nil, fmt.Errorf("nexthop %d gone", r.NHID)
	}
	members := []int{r.NHID}
	if len(nhs[i].Group) > 0 {
		members = members[:0]
		for _, g := range nhs[i].Group {
			members = append(members, g.ID)
		}
	}
	for _, id := range members {
		j, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("nexthop %d gone", id)
		}
		got[nhs[j].Gateway] = true
	}
	return got, nil
}

// bgpNextHops checks that the router has exactly one path per next hop in want for the VIP.
func bgpNextHops(ctx context.Context, l *lab.Lab, vip netip.Addr, want []string) error {
	paths, err := l.RouterPaths(ctx, vip)
	if err != nil {
		return err
	}
	var got []string
	for nh := range paths {
		got = append(got, nh)
	}
	slices.Sort(got)
	w := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, w) {
		return fmt.Errorf("next hops %v, want %v", got, w)
	}
	return nil
}

// peerStatus checks every lab node's entry of BGPPeer name's status with check, and that there
// is no other entry.
func peerStatus(ctx context.Context, cl client.Client, name string, check func(lab.Node, *v1alpha1.BGPPeerNodeStatus) error) error {
	var p v1alpha1.BGPPeer
	if err := cl.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: name}, &p); err != nil {
		return err
	}
	if len(p.Status.Nodes) != lab.NodeCount {
		return fmt.Errorf("status.nodes %+v, want one entry per node", p.Status.Nodes)
	}
	for _, n := range lab.Nodes() {
		i := slices.IndexFunc(p.Status.Nodes, func(e v1alpha1.BGPPeerNodeStatus) bool { return e.Node == n.Name })
		if i < 0 {
			return fmt.Errorf("no entry for %s in %+v", n.Name, p.Status.Nodes)
		}
		if err := check(n, &p.Status.Nodes[i]); err != nil {
			return err
		}
	}
	return nil
}

// peerEvents checks that every lab node recorded an Event of type and reason on the BGPPeer
// (this very object: by UID) whose note contains note.
func peerEvents(ctx context.Context, cs kubernetes.Interface, p *v1alpha1.BGPPeer, typ, reason, note string) error {
	evs, err := cs.EventsV1().Events(operatorNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var seen []eventsv1.Event
	for _, ev := range evs.Items {
		if ev.Regarding.Kind == "BGPPeer" && ev.Regarding.UID == p.UID && ev.Type == typ && ev.Reason == reason && strings.Contains(ev.Note, note) {
			seen = append(seen, ev)
		}
	}
	for _, n := range lab.Nodes() {
		if !slices.ContainsFunc(seen, func(ev eventsv1.Event) bool { return strings.Contains(ev.Note, "node "+n.Name+" ") }) {
			return fmt.Errorf("no %s %s Event from %s containing %q (%d matching)", typ, reason, n.Name, note, len(seen))
		}
	}
	return nil
}

// debugAnnouncements reads a speaker's /debug/announcements on its metrics port, from its node,
// with token (debugReaderToken): on the host network, loopback is no credential.
func debugAnnouncements(ctx context.Context, l *lab.Lab, node, token string) (*speakerAnnouncements, error) {
	out, err := l.Exec(ctx, node, "curl", "-s", "--max-time", "3", "-H", "Authorization: Bearer "+token, "http://127.0.0.1:7472/debug/announcements")
	if err != nil {
		return nil, fmt.Errorf("curl: %v: %s", err, shortErr(out))
	}
	var a speakerAnnouncements
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		return nil, fmt.Errorf("parse %q: %v", shortErr(out), err)
	}
	return &a, nil
}

// speakerAnnouncements is the JSON of GET /debug/announcements, as a client reads it.
type speakerAnnouncements struct {
	Node          string `json:"node"`
	Announcements []struct {
		Service    string   `json:"service"`
		VIP        string   `json:"vip"`
		Mode       string   `json:"mode"`
		Interfaces []string `json:"interfaces"`
		Peers      []string `json:"peers"`
	} `json:"announcements"`
}
