//go:build e2e

package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/e2e/lab"
	"github.com/metalgate/metalgate/internal/nsexec"
	"github.com/metalgate/metalgate/speaker/election"
	"github.com/metalgate/metalgate/speaker/membership"
)

// TestSpeakerRogueMember: the install made its own memberlist key (the controller created the
// Secret with 32 random bytes; the speakers mount it), and a host on the node network that is
// not a node — the lab's client — cannot join the speakers with stock memberlist, even with
// that key and under a node's name: every speaker keeps three members and counts the refusals,
// and the VIP stays with its elected owner throughout.
func TestSpeakerRogueMember(t *testing.T) {
	l := openLab(t)
	cs := clientset(t, l)
	ctx := context.Background()
	deploySpeaker(t, l, cs)

	sec, err := cs.CoreV1().Secrets(operatorNamespace).Get(ctx, "metalgate-memberlist", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the controller did not create the memberlist key: %v", err)
	}
	key := sec.Data["key"]
	if len(key) != 32 {
		t.Fatalf("data.key has %d bytes, want 32 random bytes", len(key))
	}

	cl := labClient(t, l)
	pool := manualPool(t, cl, "e2e-rogue-", l2Pool)
	adv := &v1alpha1.L2Advertisement{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-rogue-", Namespace: operatorNamespace},
		Spec:       v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{pool.Name}},
	}
	if err := cl.Create(ctx, adv); err != nil {
		t.Fatalf("create L2Advertisement: %v", err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), adv) })
	ns := testNamespace(t, cs, "e2e-rogue")
	_, vip := webService(t, cs, cl, ns, pool.Name)
	var names []string
	for _, n := range lab.Nodes() {
		names = append(names, n.Name)
	}
	owner := election.Owner(vip, names)
	node, err := lab.NodeByName(owner)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, fmt.Sprintf("arping %s answered by %s only", vip, owner), func() error {
		return arpingOnly(ctx, l, vip, node.MAC)
	})

	pods := podsByNode(t, cs, operatorNamespace, "app.kubernetes.io/name=metalgate,app.kubernetes.io/component=speaker")
	token, err := debugReaderToken(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	metric := func(node, series string) (float64, error) {
		p, ok := pods[node]
		if !ok {
			return 0, fmt.Errorf("no speaker pod on %s", node)
		}
		b, err := portForwardGet(ctx, l.RESTConfig(), operatorNamespace, p.Name, 7472, "/metrics", token)
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, series+" ") {
				return strconv.ParseFloat(strings.Fields(line)[1], 64)
			}
		}
		return 0, fmt.Errorf("%s: no %s", node, series)
	}
	for _, n := range names {
		eventually(t, 30*time.Second, n+" sees three members", func() error {
			if v, err := metric(n, "metalgate_speaker_members"); err != nil || v != 3 {
				return fmt.Errorf("members %v (%v)", v, err)
			}
			return nil
		})
	}

	// The rogue: stock memberlist in the client's network namespace, with the cluster's key,
	// once under a name of its own and once under a node's name, joining every node for 5 s.
	clientNS := l.Config.Namespace("client")
	var seeds []string
	for _, n := range lab.Nodes() {
		seeds = append(seeds, net.JoinHostPort(n.IPv4.String(), "7946"))
	}
	start := time.Now()
	for _, name := range []string{"rogue", owner} {
		ml := rogueMemberlist(t, clientNS, name, lab.Client.IPv4.String(), wireKey(key))
		go func() {
			for time.Since(start) < 5*time.Second {
				_, _ = ml.Join(seeds)
				time.Sleep(250 * time.Millisecond)
			}
		}()
	}
	for time.Since(start) < 5*time.Second {
		if err := arpingOnly(ctx, l, vip, node.MAC); err != nil {
			t.Errorf("during the attack: %v", err)
			break
		}
	}
	for _, n := range names {
		if v, err := metric(n, "metalgate_speaker_members"); err != nil || v != 3 {
			t.Errorf("%s: members %v (%v) after the attack, want 3", n, v, err)
		}
		v, err := metric(n, `metalgate_speaker_members_refused_total{reason="source-address"}`)
		if err != nil || v == 0 {
			t.Errorf("%s: refused{source-address} = %v (%v), want > 0", n, v, err)
		}
		t.Logf("%s refused %v packets and streams from non-speaker addresses", n, v)
	}
}

// wireKey is the AES key memberlist uses for a cluster key (speaker/membership/keys.go; written
// out here as any other memberlist client would have to).
func wireKey(secret []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("metalgate/speaker/memberlist/v1"))
	return h.Sum(nil)
}

// nsTransport is memberlist's transport with its sockets in a network namespace.
type nsTransport struct {
	*memberlist.NetTransport
	ns   string
	bind net.IP
}

func (t *nsTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := nsexec.InNS(t.ns, func() error {
		d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: t.bind}}
		var err error
		c, err = d.Dial("tcp", addr)
		return err
	})
	return c, err
}

func (t *nsTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// rogueMemberlist starts stock memberlist named name at addr in network namespace ns,
// encrypting with wireKey.
func rogueMemberlist(t *testing.T, ns, name, addr string, wireKey []byte) *memberlist.Memberlist {
	t.Helper()
	c := membership.Config(name)
	c.BindAddr, c.AdvertiseAddr = addr, addr
	c.Logger = log.New(io.Discard, "", 0)
	kr, err := memberlist.NewKeyring(nil, wireKey)
	if err != nil {
		t.Fatal(err)
	}
	c.Keyring = kr
	var nt *memberlist.NetTransport
	if err := nsexec.InNS(ns, func() error {
		var err error
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{addr}, Logger: c.Logger})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.BindPort = nt.GetAutoBindPort()
	c.AdvertisePort = c.BindPort
	c.Transport = &nsTransport{NetTransport: nt, ns: ns, bind: net.ParseIP(addr)}
	ml, err := memberlist.Create(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	return ml
}
