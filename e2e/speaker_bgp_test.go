//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/e2e/lab"
)

// bgpPool is off the node segment: only the router's BGP routes reach it.
const bgpPool = "100.64.10.0/24"

// TestSpeakerAnnouncesBGP: with the speaker DaemonSet, a BGPPeer to the lab router and a
// BGPAdvertisement, the router learns the VIP/32 from all three nodes (ECMP) and the client
// reaches the echo pod through it; with externalTrafficPolicy Local only the node holding the
// endpoint advertises.
func TestSpeakerAnnouncesBGP(t *testing.T) {
	l := openLab(t)
	cs := clientset(t, l)
	ctx := context.Background()

	deploySpeaker(t, l, cs)

	cl := labClient(t, l)
	pool := manualPool(t, cl, "e2e-bgp-", bgpPool)
	peer := &v1alpha1.BGPPeer{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-router", Namespace: operatorNamespace},
		Spec:       v1alpha1.BGPPeerSpec{Address: "198.51.100.1", MyASN: 64512, ASN: 64500},
	}
	if err := cl.Create(ctx, peer); err != nil {
		t.Fatalf("create BGPPeer: %v", err)
	}
	adv := &v1alpha1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-bgp-", Namespace: operatorNamespace},
		Spec:       v1alpha1.BGPAdvertisementSpec{IPAddressPools: []string{pool.Name}, Communities: []string{"64512:100"}},
	}
	if err := cl.Create(ctx, adv); err != nil {
		t.Fatalf("create BGPAdvertisement: %v", err)
	}
	t.Cleanup(func() {
		_ = cl.Delete(context.Background(), adv)
		_ = cl.Delete(context.Background(), peer)
	})

	ns := testNamespace(t, cs, "e2e-bgp")
	svc, vip := webService(t, cs, cl, ns, pool.Name)

	var all []string
	for _, n := range lab.Nodes() {
		all = append(all, n.IPv4.String())
	}
	eventually(t, 60*time.Second, fmt.Sprintf("router learns %s/32 from %v", vip, all), func() error {
		return bgpNextHops(ctx, l, vip, all)
	})
	out, err := l.Vtysh(ctx, "show ip bgp "+vip.String()+"/32 json")
	if err != nil || !strings.Contains(out, `"64512:100"`) {
		t.Errorf("router's paths for %s/32 lack community 64512:100 (%v): %s", vip, err, shortErr(out))
	}
	eventually(t, 30*time.Second, fmt.Sprintf("curl http://%s/ from the client through the router", vip), func() error {
		out, err := l.Exec(ctx, "client", "curl", "-s", "--max-time", "3", "http://"+vip.String()+"/")
		if err != nil {
			return fmt.Errorf("curl: %v: %s", err, shortErr(out))
		}
		if !strings.Contains(out, `"namespace":"`+ns+`"`) {
			return fmt.Errorf("answer is not the echo pod of %s: %s", ns, shortErr(out))
		}
		return nil
	})

	// externalTrafficPolicy Local: only the node of the one ready endpoint advertises.
	if err := cl.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	if err := cl.Update(ctx, svc); err != nil {
		t.Fatalf("set externalTrafficPolicy Local: %v", err)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("echo pods: %v (%d)", err, len(pods.Items))
	}
	n, err := lab.NodeByName(pods.Items[0].Spec.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, fmt.Sprintf("router learns %s/32 from %s (%s) only", vip, n.Name, n.IPv4), func() error {
		return bgpNextHops(ctx, l, vip, []string{n.IPv4.String()})
	})
	eventually(t, 30*time.Second, "curl through the router with ETP Local", func() error {
		out, err := l.Exec(ctx, "client", "curl", "-s", "--max-time", "3", "http://"+vip.String()+"/")
		if err != nil {
			return fmt.Errorf("curl: %v: %s", err, shortErr(out))
		}
		return nil
	})
}

// bgpNextHops checks that the router has exactly one path per next hop in want for vip/32.
func bgpNextHops(ctx context.Context, l *lab.Lab, vip netip.Addr, want []string) error {
	out, err := l.Vtysh(ctx, "show ip bgp "+vip.String()+"/32 json")
	if err != nil {
		return fmt.Errorf("vtysh: %v: %s", err, shortErr(out))
	}
	var r struct {
		Paths []struct {
			Nexthops []struct {
				IP string `json:"ip"`
			} `json:"nexthops"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return fmt.Errorf("parse %q: %v", shortErr(out), err)
	}
	var got []string
	for _, p := range r.Paths {
		for _, nh := range p.Nexthops {
			got = append(got, nh.IP)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("next hops %v, want %v", got, want)
	}
	for _, w := range want {
		if !contains(got, w) {
			return fmt.Errorf("next hops %v, want %v", got, want)
		}
	}
	return nil
}
