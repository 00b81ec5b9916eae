//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/e2e/lab"
	"github.com/metalgate/metalgate/speaker/election"
)

const (
	// clientAddrL2Pool is on the lab segment (the client ARPs for it directly), clear of the
	// hosts and of the other tests' pools (198.51.100.224/27).
	clientAddrL2Pool = "198.51.100.216/29"
	// clientAddrBGPPool is off the segment: the client reaches it only through the router.
	clientAddrBGPPool = "100.64.13.0/28"
	// clientAddrBGPPoolV6 is off every lab range, as bgpPoolV6: only the router's routes reach it.
	clientAddrBGPPoolV6 = "2001:db8:64:13::/120"
	// clientAddrPeer is the BGPPeer of the lab router for this test.
	clientAddrPeer = "e2e-clientaddr"
	// spoofedAddr is what a hostile client claims to be in every forwarding header it sends.
	spoofedAddr = "1.2.3.4"
)

// TestProxyClientAddress is issue #14's "real client IP" in the lab, in both announcement
// modes. One namespaced proxy (config/proxy/namespaced, access log on for every request) behind
// LoadBalancer Services with the shipped externalTrafficPolicy Local: the shipped one, announced
// at layer 2, and copies of it from a pool announced by BGP to the router (IPv4, and IPv6
// single-stack). From the client's namespace (198.51.100.100, 2001:db8::100), through each VIP:
//   - the echo backend gets X-Forwarded-For and X-Real-IP equal to the client's own address
//     (no node's: kube-proxy did not SNAT), and Forwarded: for=<client>;
//   - hostile: a client that sends X-Forwarded-For, X-Real-IP, Forwarded (and the underscore
//     form X_Forwarded_For) naming 1.2.3.4 is not believed — it is not a trusted proxy, so the
//     headers are replaced (docs/proxy.md, "Headers"): the backend sees the client's address
//     alone and 1.2.3.4 in no header;
//   - the proxy's access log line of that very request (by its X-Request-Id) names the
//     client's address;
//   - the VIP is announced only from the node of the ready proxy pod (layer 2: arping answered
//     by that node alone; BGP: the router's only next hop, for the /32 and the /128).
func TestProxyClientAddress(t *testing.T) {
	start := time.Now()
	l := openLab(t)
	cs := clientset(t, l)
	cl := labClient(t, l)
	ctx := context.Background()

	deploySpeaker(t, l, cs)
	l2Pool := manualPool(t, cl, "e2e-clientaddr-l2-", clientAddrL2Pool)
	bgpPool := manualPool(t, cl, "e2e-clientaddr-bgp-", clientAddrBGPPool, clientAddrBGPPoolV6)
	l2Advertisement(t, cl, "e2e-clientaddr-", l2Pool.Name)
	routerPeering(t, l, cl, clientAddrPeer, bgpPool.Name, nil)

	ns := testNamespace(t, cs, "e2e-clientaddr")
	class, controller := ownIngressClass(t, cl, ns)
	deployNamespacedProxy(t, l, cl, ns, l2Pool.Name, controller, "--access-log-sample=1")
	echoBackend(t, cl, ns, "echo")
	for _, name := range []string{"metalgate-proxy", "echo"} {
		waitDeploymentReady(t, cs, ns, name, 2*time.Minute)
	}

	// The shipped Service keeps client addresses; the BGP one is its copy on the other pool.
	var shipped corev1.Service
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "metalgate-proxy"}, &shipped); err != nil {
		t.Fatal(err)
	}
	if shipped.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		t.Fatalf("config/proxy/namespaced's Service has externalTrafficPolicy %q, want Local", shipped.Spec.ExternalTrafficPolicy)
	}
	single := corev1.IPFamilyPolicySingleStack
	for _, c := range []struct {
		name   string
		family corev1.IPFamily
	}{{"metalgate-proxy-bgp", corev1.IPv4Protocol}, {"metalgate-proxy-bgp6", corev1.IPv6Protocol}} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: ns, Annotations: map[string]string{"metalgate.io/address-pool": bgpPool.Name}},
			Spec: corev1.ServiceSpec{
				Type:                  corev1.ServiceTypeLoadBalancer,
				ExternalTrafficPolicy: shipped.Spec.ExternalTrafficPolicy,
				Selector:              shipped.Spec.Selector,
				IPFamilyPolicy:        &single,
				IPFamilies:            []corev1.IPFamily{c.family},
			},
		}
		for _, p := range shipped.Spec.Ports {
			p.NodePort = 0
			svc.Spec.Ports = append(svc.Spec.Ports, p)
		}
		if err := cl.Create(ctx, svc); err != nil {
			t.Fatalf("create Service %s: %v", svc.Name, err)
		}
	}
	l2VIP := serviceVIP(t, cl, ns, "metalgate-proxy")
	bgpVIP := serviceVIP(t, cl, ns, "metalgate-proxy-bgp")
	bgpVIP6 := serviceVIP(t, cl, ns, "metalgate-proxy-bgp6")
	for vip, pool := range map[netip.Addr]string{l2VIP: clientAddrL2Pool, bgpVIP: clientAddrBGPPool, bgpVIP6: clientAddrBGPPoolV6} {
		if !netip.MustParsePrefix(pool).Contains(vip) {
			t.Fatalf("VIP %s is not from pool %s", vip, pool)
		}
	}

	p := &proxyLab{l: l, cs: cs, cl: cl, ns: ns, class: class, domain: ns + ".test"}
	if err := cl.Create(ctx, p.ingress("echo", nil, ingressRule(p.host("echo"), "/", "echo"))); err != nil {
		t.Fatalf("create Ingress: %v", err)
	}
	proxyNodes := readyProxyNodes(t, cl, ns)
	t.Logf("proxy on %v, VIPs %s (layer 2), %s and %s (BGP); setup %s", proxyNodes, l2VIP, bgpVIP, bgpVIP6, time.Since(start).Round(time.Millisecond))

	t.Run("layer2", func(t *testing.T) {
		owner, err := lab.NodeByName(election.Owner(l2VIP, proxyNodes))
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, fmt.Sprintf("arping %s answered by %s only (the node with the proxy)", l2VIP, owner.Name), func() error {
			return arpingOnly(ctx, l, l2VIP, owner.MAC)
		})
		p.checkClientAddress(t, l2VIP)
	})
	for _, vip := range []netip.Addr{bgpVIP, bgpVIP6} {
		name := "BGP"
		if vip.Is6() {
			name = "BGP IPv6"
		}
		t.Run(name, func(t *testing.T) {
			var want []string
			for _, name := range proxyNodes {
				n, err := lab.NodeByName(name)
				if err != nil {
					t.Fatal(err)
				}
				if vip.Is6() {
					want = append(want, n.IPv6.String())
				} else {
					want = append(want, n.IPv4.String())
				}
			}
			eventually(t, 60*time.Second, fmt.Sprintf("router learns %s from %v only (the nodes with the proxy)", netip.PrefixFrom(vip, vip.BitLen()), want), func() error {
				return bgpNextHops(ctx, l, vip, want)
			})
			p.checkClientAddress(t, vip)
		})
	}
	t.Logf("TestProxyClientAddress took %s", time.Since(start).Round(time.Millisecond))
}

// checkClientAddress sends requests from the client through vip, honest and hostile, and
// checks what the echo backend and the proxy's access log say the client's address is.
func (p *proxyLab) checkClientAddress(t *testing.T, vip netip.Addr) {
	client, forwardedFor := lab.Client.IPv4.String(), lab.Client.IPv4.String()
	var nodes []string
	for _, n := range lab.Nodes() {
		nodes = append(nodes, n.IPv4.String())
	}
	if vip.Is6() {
		// RFC 7239 §6: an IPv6 node is bracketed and quoted.
		client, forwardedFor = lab.Client.IPv6.String(), `"[`+lab.Client.IPv6.String()+`]"`
		nodes = nodeAddrs(6)
	}
	url := "http://" + netip.AddrPortFrom(vip, 80).String() + "/whoami"
	host := p.host("echo")
	for _, tc := range []struct {
		name    string
		headers []string // sent by the client
	}{
		{name: "spoofed forwarding headers", headers: []string{
			"X-Forwarded-For: " + spoofedAddr,
			"X-Real-IP: " + spoofedAddr,
			"Forwarded: for=" + spoofedAddr,
			"X_Forwarded_For: " + spoofedAddr,
		}},
		{name: "plain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			args := []string{"-g", "-H", "Host: " + host}
			for _, h := range tc.headers {
				args = append(args, "-H", h)
			}
			args = append(args, url)
			// Retried only until the echo answers (the VIP's route, the proxy's table); its
			// answer is then checked once.
			var r proxyEchoReply
			eventually(t, 60*time.Second, "curl "+strings.Join(args, " ")+" reaches the echo", func() error {
				body, info, err := p.curl(ctx, args...)
				if err != nil {
					return err
				}
				r, err = p.expectEcho(body, info, "echo", host, "/whoami")
				return err
			})
			if got := r.Headers.Values("X-Forwarded-For"); len(got) != 1 || got[0] != client {
				t.Errorf("backend's X-Forwarded-For %q, want exactly the client's %s (node addresses: %v)", got, client, nodes)
			}
			if got := r.Headers.Values("X-Real-Ip"); len(got) != 1 || got[0] != client {
				t.Errorf("backend's X-Real-IP %q, want exactly the client's %s", got, client)
			}
			if got := r.Headers.Values("Forwarded"); len(got) != 1 || !strings.HasPrefix(got[0], "for="+forwardedFor+";") {
				t.Errorf("backend's Forwarded %q, want one for=%s;…", got, forwardedFor)
			}
			for k, vv := range r.Headers {
				for _, v := range vv {
					if strings.Contains(v, spoofedAddr) {
						t.Errorf("backend got %s: %s: the client's claim passed", k, v)
					}
				}
			}
			id := r.Headers.Get("X-Request-Id")
			if id == "" {
				t.Fatalf("backend got no X-Request-Id: %v", r.Headers)
			}
			var line accessLogLine
			eventually(t, 30*time.Second, "the proxy's access log has request "+id, func() error {
				var err error
				line, err = proxyAccessLog(ctx, p.cs, p.ns, id)
				return err
			})
			// client is the address the rules judge; peer the connection's (the same here:
			// no SNAT, no trusted proxy in between).
			peer, _, err := net.SplitHostPort(line.Peer)
			if line.Client != client || err != nil || peer != client {
				t.Errorf("access log of request %s: client %q peer %q, want the client's %s (%v): %+v", id, line.Client, line.Peer, client, err, line)
			}
			if line.Host != host || line.Path != "/whoami" || line.Status != 200 {
				t.Errorf("access log of request %s: %+v, want host %s path /whoami status 200", id, line, host)
			}
		})
	}
}

// accessLogLine is the part of the proxy's access log line (JSON on stdout, docs/proxy.md
// "Access log") the test looks at.
type accessLogLine struct {
	Host      string `json:"host"`
	Path      string `json:"path"`
	Status    int    `json:"status"`
	Client    string `json:"client"`
	Peer      string `json:"peer"`
	RequestID string `json:"request_id"`
}

// proxyAccessLog returns the access log line of request id from the logs of the proxy pods
// in ns.
func proxyAccessLog(ctx context.Context, cs kubernetes.Interface, ns, id string) (accessLogLine, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=proxy"})
	if err != nil {
		return accessLogLine{}, err
	}
	for _, pod := range pods.Items {
		out, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "proxy"}).DoRaw(ctx)
		if err != nil {
			return accessLogLine{}, fmt.Errorf("logs of %s: %w", pod.Name, err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), id) {
				continue
			}
			var line accessLogLine
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				return accessLogLine{}, fmt.Errorf("%s: a log line naming %s is not JSON: %v: %s", pod.Name, id, err, shortErr(sc.Text()))
			}
			if line.RequestID == id {
				return line, nil
			}
		}
	}
	return accessLogLine{}, fmt.Errorf("no access log line with requestID %s in %d proxy pod(s)", id, len(pods.Items))
}
