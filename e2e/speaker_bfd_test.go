//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/e2e/lab"
)

// bfdPool is off the node segment and clear of the other tests' pools.
const bfdPool = "100.64.11.0/28"

// TestSpeakerBGPBFD: a BGPPeer with a BFDProfile (100 ms × 3, like the lab router's profile)
// runs BFD from every node's speaker. Freezing one speaker (SIGSTOP: the process and its TCP
// session stay, it only falls silent — the hard case) makes the router drop that node's path
// long before the hold timer could (keepalive 3 s, hold 9 s: 6 s at the earliest); after
// SIGCONT the session and the path come back.
func TestSpeakerBGPBFD(t *testing.T) {
	l := openLab(t)
	cs := clientset(t, l)
	ctx := context.Background()

	deploySpeaker(t, l, cs)

	cl := labClient(t, l)
	pool := manualPool(t, cl, "e2e-bfd-", bfdPool)
	prof := &v1alpha1.BFDProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bfd", Namespace: operatorNamespace},
		Spec: v1alpha1.BFDProfileSpec{ReceiveInterval: ptr.To[uint32](100), TransmitInterval: ptr.To[uint32](100),
			DetectMultiplier: ptr.To[uint32](3)},
	}
	if err := cl.Create(ctx, prof); err != nil {
		t.Fatalf("create BFDProfile: %v", err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), prof) })
	routerPeering(t, l, cl, "e2e-bfd-router", pool.Name, func(s *v1alpha1.BGPPeerSpec) { s.BFDProfile = prof.Name })

	ns := testNamespace(t, cs, "e2e-bfd")
	_, vip := webService(t, cs, cl, ns, pool.Name)
	eventually(t, 60*time.Second, fmt.Sprintf("router learns %s/32 from %v", vip, nodeAddrs(4)), func() error {
		return bgpNextHops(ctx, l, vip, nodeAddrs(4))
	})
	eventually(t, 60*time.Second, "the router's BFD sessions with the three nodes are up", func() error {
		up, err := bfdPeersUp(ctx, l)
		if err != nil {
			return err
		}
		for _, a := range nodeAddrs(4) {
			if !up[a] {
				return fmt.Errorf("BFD up with %v, not with %s", up, a)
			}
		}
		return nil
	})

	n := lab.Nodes()[1]
	pod, ok := podsByNode(t, cs, operatorNamespace, "app.kubernetes.io/component=speaker")[n.Name]
	if !ok {
		t.Fatalf("no speaker pod on %s", n.Name)
	}
	t.Cleanup(func() { _ = l.SignalPod(context.Background(), operatorNamespace, pod.Name, syscall.SIGCONT) })
	frozen := time.Now()
	if err := l.SignalPod(ctx, operatorNamespace, pod.Name, syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze %s's speaker: %v", n.Name, err)
	}
	// The hold timer cannot act before 6 s (hold 9 s after a keepalive at most 3 s old); BFD
	// detects in 300 ms. 4 s leaves room for a loaded machine and still tells the two apart.
	var gone time.Duration
	pollFast(t, 4*time.Second, fmt.Sprintf("the router drops %s's path to %s (BFD)", n.Name, vip), func() error {
		nhs, err := kernelNextHops(ctx, l, vip)
		if err != nil {
			return err
		}
		if nhs[n.IPv4.String()] {
			return fmt.Errorf("next hops %v still include %s", nhs, n.IPv4)
		}
		if len(nhs) != lab.NodeCount-1 {
			return fmt.Errorf("next hops %v, want the other %d nodes", nhs, lab.NodeCount-1)
		}
		gone = time.Since(frozen)
		return nil
	})
	t.Logf("%s's path withdrawn %v after its speaker froze", n.Name, gone.Round(time.Millisecond))

	if err := l.SignalPod(ctx, operatorNamespace, pod.Name, syscall.SIGCONT); err != nil {
		t.Fatalf("thaw %s's speaker: %v", n.Name, err)
	}
	eventually(t, 60*time.Second, fmt.Sprintf("%s's path to %s back after SIGCONT", n.Name, vip), func() error {
		return bgpNextHops(ctx, l, vip, nodeAddrs(4))
	})
}

// bfdPeersUp returns the peers of the router's BFD sessions that are up.
func bfdPeersUp(ctx context.Context, l *lab.Lab) (map[string]bool, error) {
	out, err := l.Vtysh(ctx, "show bfd peers json")
	if err != nil {
		return nil, fmt.Errorf("vtysh: %v: %s", err, shortErr(out))
	}
	var peers []struct {
		Peer   string `json:"peer"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &peers); err != nil {
		return nil, fmt.Errorf("parse %q: %v", shortErr(out), err)
	}
	up := map[string]bool{}
	for _, p := range peers {
		if p.Status == "up" {
			up[p.Peer] = true
		}
	}
	return up, nil
}
