//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// testSessionAcrossRollout: a client's TLS session, made at the proxy's pod, resumes at the
// pod that replaces it in a rollout — the replicas share their ticket keys through the Secret
// metalgate-proxy-tls-tickets, which the proxy made itself with config/proxy/namespaced's
// RBAC — so a rollout does not make every returning client handshake in full. Needs testTLS's
// Ingress and CA.
func (p *proxyLab) testSessionAcrossRollout(t *testing.T) {
	if p.ca == nil {
		t.Fatal("testTLS did not run: no TLS Ingress to connect to")
	}
	ctx := context.Background()
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.cert)
	host := p.host("a")
	cache := &frozenSessionCache{}
	netns := clientNetns(p.l)
	// get makes one request to host on a new TLS connection to the VIP; it returns whether the
	// handshake resumed a session.
	get := func() (bool, error) {
		tr := &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialInNetns(ctx, netns, network, net.JoinHostPort(p.vip.String(), "443"))
			},
			TLSClientConfig:   &tls.Config{ServerName: host, RootCAs: roots, ClientSessionCache: cache},
			DisableKeepAlives: true,
		}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		resp, err := hc.Get("https://" + host + "/secure")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("status %d, want 200", resp.StatusCode)
		}
		return resp.TLS.DidResume, nil
	}

	before := p.proxyPod(t)
	if _, err := get(); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	eventually(t, 30*time.Second, "a second connection to the same pod resumes the session", func() error {
		resumed, err := get()
		if err == nil && !resumed {
			err = fmt.Errorf("not resumed")
		}
		return err
	})
	// From here on the client offers only a session the old pod made: a session the new pod
	// made for itself must not count.
	cache.freeze()
	s, err := p.cs.CoreV1().Secrets(p.ns).Get(ctx, "metalgate-proxy-tls-tickets", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ticket key Secret: %v", err)
	}
	keys := 0
	for name, v := range s.Data {
		if strings.HasPrefix(name, "ticket-key-") && len(v) == 32 {
			keys++
		}
	}
	if keys != 1 {
		t.Fatalf("the ticket key Secret holds %d keys, want 1: %v", keys, s.Data)
	}

	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"e2e.metalgate.io/restarted":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := p.cs.AppsV1().Deployments(p.ns).Patch(ctx, "metalgate-proxy", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("restart the proxy Deployment: %v", err)
	}
	eventually(t, 2*time.Minute, "the rollout replaced the proxy pod", func() error {
		pods, err := p.cs.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=proxy"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Name == before.Name || !podReady(&pods.Items[0]) {
			names := []string{}
			for _, pod := range pods.Items {
				names = append(names, pod.Name)
			}
			return fmt.Errorf("proxy pods %v (the old one %s)", names, before.Name)
		}
		return nil
	})
	eventually(t, 30*time.Second, "the new pod resumes the session made at the old one", func() error {
		resumed, err := get()
		if err == nil && !resumed {
			err = fmt.Errorf("not resumed: full handshake")
		}
		return err
	})
}

// frozenSessionCache keeps the last session it is given until it is frozen; then it offers
// that session for ever and takes no other.
type frozenSessionCache struct {
	mu     sync.Mutex
	last   *tls.ClientSessionState
	frozen bool
}

func (c *frozenSessionCache) Get(string) (*tls.ClientSessionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.last != nil
}

func (c *frozenSessionCache) Put(_ string, cs *tls.ClientSessionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.frozen && cs != nil {
		c.last = cs
	}
}

func (c *frozenSessionCache) freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = true
}
