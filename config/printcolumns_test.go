package config_test

import (
	"context"
	"strings"
	"testing"
)

// TestPrinterColumns: kubectl get shows a pool's Valid and Overlapping conditions, and the
// Valid condition of advertisements, BGPPeers, BFDProfiles and Communities, as columns (the
// CRD's additionalPrinterColumns, read by a real API server from a status as the controller
// writes it, through the status subresource). A BGPPeer's sessions are per node and an API server's printer column
// shows only the first value of a list, so they are read with kubectl metalgate or -o yaml.
func TestPrinterColumns(t *testing.T) {
	t.Parallel() // its own API server
	s := startAPIServer(t)
	ctx := context.Background()
	s.ensureNamespaces(ctx, t, "metalgate-system")
	objs := `apiVersion: metalgate.io/v1alpha1
kind: IPAddressPool
metadata: {name: lab, namespace: metalgate-system}
spec: {addresses: ["192.0.2.0/28"]}
---
apiVersion: metalgate.io/v1alpha1
kind: L2Advertisement
metadata: {name: lab, namespace: metalgate-system}
---
apiVersion: metalgate.io/v1alpha1
kind: BGPAdvertisement
metadata: {name: lab, namespace: metalgate-system}
---
apiVersion: metalgate.io/v1alpha1
kind: BGPPeer
metadata: {name: lab, namespace: metalgate-system}
spec: {myASN: 64512, peerASN: 64513, peerAddress: 192.0.2.1}
---
apiVersion: metalgate.io/v1alpha1
kind: BFDProfile
metadata: {name: lab, namespace: metalgate-system}
---
apiVersion: metalgate.io/v1alpha1
kind: Community
metadata: {name: lab, namespace: metalgate-system}
`
	if out, err := s.run(ctx, []byte(objs), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	validFalse := `{"status":{"conditions":[{"type":"Valid","status":"False","reason":"PoolNotFound","message":"x",` +
		`"observedGeneration":1,"lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	for _, p := range []struct{ kind, name, patch string }{
		{"ipaddresspool", "lab", `{"status":{"assignedIPv4":0,"assignedIPv6":0,"availableIPv4":16,"availableIPv6":0,"conditions":[` +
			`{"type":"Valid","status":"True","reason":"Valid","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"},` +
			`{"type":"Overlapping","status":"False","reason":"NoOverlap","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`},
		{"l2advertisement", "lab", validFalse},
		{"bgpadvertisement", "lab", validFalse},
		{"bgppeer", "lab", validFalse},
		{"bfdprofile", "lab", validFalse},
		{"community", "lab", validFalse},
	} {
		if out, err := s.run(ctx, nil, "patch", p.kind, p.name, "-n", "metalgate-system", "--subresource=status", "--type=merge", "-p", p.patch); err != nil {
			t.Fatalf("patch %s status: %v\n%s", p.kind, err, out)
		}
	}
	for _, c := range []struct {
		kind    string
		columns map[string]string
	}{
		{"ipaddresspools", map[string]string{"VALID": "True", "OVERLAPPING": "False"}},
		{"l2advertisements", map[string]string{"VALID": "False"}},
		{"bgpadvertisements", map[string]string{"VALID": "False"}},
		{"bgppeers", map[string]string{"VALID": "False"}},
		{"bfdprofiles", map[string]string{"VALID": "False"}},
		{"communities", map[string]string{"VALID": "False"}},
	} {
		out, err := s.run(ctx, nil, "get", c.kind, "-n", "metalgate-system")
		if err != nil {
			t.Fatalf("kubectl get %s: %v\n%s", c.kind, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("kubectl get %s:\n%s", c.kind, out)
		}
		// Multi-word headers (MY ASN, BFD PROFILE, ASSIGNED IPV4, …) split into fields too;
		// locate each wanted column by the text under it instead.
		for col, want := range c.columns {
			i := strings.Index(lines[0], col)
			if i < 0 {
				t.Errorf("kubectl get %s has no %s column:\n%s", c.kind, col, out)
				continue
			}
			got := strings.Fields(lines[1][i:])
			if len(got) == 0 || got[0] != want {
				t.Errorf("kubectl get %s: %s shows %v, want %s:\n%s", c.kind, col, got, want, out)
			}
		}
	}
}
