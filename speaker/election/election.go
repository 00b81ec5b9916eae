package election

import (
	"bytes"
	"crypto/sha256"
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"
)

// Node is a node as the election sees it.
type Node struct {
	// Name is the Kubernetes node name; it is also the speaker's membership name.
	Name string
	// Labels are the node's labels, matched against node selectors.
	Labels map[string]string
	// Excluded is true for nodes that must never announce: labelled
	// node.kubernetes.io/exclude-from-external-load-balancers or with condition
	// NetworkUnavailable=True.
	Excluded bool
}

// Request describes one address to elect an owner for.
type Request struct {
	VIP netip.Addr
	// NodeSelectors restrict the candidates to nodes matching at least one selector; none means
	// every node.
	NodeSelectors []labels.Selector
	// Local is true when traffic must reach a local endpoint (externalTrafficPolicy: Local):
	// only nodes in ReadyNodes may announce.
	Local bool
	// ReadyNodes are the nodes with at least one ready endpoint of the Service.
	ReadyNodes map[string]bool
	// AnyReady is true when the Service has at least one ready endpoint anywhere; without one
	// (and with Local=false) nobody announces.
	AnyReady bool
}

// Candidates returns the names of the nodes that may announce req.VIP: live (a speaker runs and is
// reachable), not excluded, selected by NodeSelectors and, for Local, holding a ready endpoint.
// The result keeps the order of nodes.
func Candidates(req Request, nodes []Node, live map[string]bool) []string {
	if !req.Local && !req.AnyReady {
		return nil
	}
	var out []string
	for _, n := range nodes {
		if !live[n.Name] || n.Excluded {
			continue
		}
		if req.Local && !req.ReadyNodes[n.Name] {
			continue
		}
		if !selected(req.NodeSelectors, n.Labels) {
			continue
		}
		out = append(out, n.Name)
	}
	return out
}

func selected(sels []labels.Selector, l map[string]string) bool {
	if len(sels) == 0 {
		return true
	}
	for _, s := range sels {
		if s.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

// Owner returns the candidate with the highest weight for vip, or "" when there is none.
func Owner(vip netip.Addr, candidates []string) string {
	var best string
	var bestW [sha256.Size]byte
	for _, c := range candidates {
		w := Weight(c, vip)
		if best == "" {
			best, bestW = c, w
			continue
		}
		switch cmp := bytes.Compare(w[:], bestW[:]); {
		case cmp > 0, cmp == 0 && c < best:
			best, bestW = c, w
		}
	}
	return best
}

// Weight is the rendezvous weight of node for vip: sha256(node + "#" + vip), vip in its canonical
// text form (netip.Addr.String, so IPv4-mapped IPv6 and IPv4 differ; callers pass unmapped
// addresses).
func Weight(node string, vip netip.Addr) [sha256.Size]byte {
	return sha256.Sum256([]byte(node + "#" + vip.String()))
}

// Elect returns the owner of req.VIP among nodes, or "" when no node may announce it.
func Elect(req Request, nodes []Node, live map[string]bool) string {
	return Owner(req.VIP, Candidates(req, nodes, live))
}
