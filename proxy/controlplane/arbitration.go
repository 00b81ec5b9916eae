package controlplane

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Arbitration between metalgate proxies (docs/proxy.md, "Two proxies, one class").
//
// Two metalgate proxies can both serve one Ingress: the same --controller-name, and both
// watch its namespace (a tenant's own proxy and a cluster-wide one, say). Exactly one of
// them may write its status, or the status alternates between their VIPs. Every proxy
// computes the same winner from what it reads from the API: each proxy announces itself on
// its publish Service (announce.go), and the Service's status and EndpointSlices say whether
// it has an address and is serving. The rule, first difference decides:
//
//  1. A proxy with an address beats one without (one without never writes anyway).
//  2. A serving proxy (a ready endpoint behind its publish Service, or lost less than
//     Options.GoneAfter ago) beats one that is not.
//  3. Scope: the namespace's own proxy (publish Service in the Ingress's namespace and that
//     namespace in its --watch-namespace) beats one that lists the namespace from elsewhere,
//     which beats a cluster-wide proxy (no --watch-namespace).
//  4. The older publish Service (metadata.creationTimestamp) wins.
//  5. The publish Service's namespace/name that sorts first wins.
//
// The scope order is also what makes the rule computable: a proxy can read the Services of
// the namespaces it watches (and its own), so it always sees every proxy that can outrank it
// by scope — the Ingress's own namespace is one it watches, and a cluster-wide proxy sees all.
// Only two proxies that list the namespace from two other namespaces may not see each other;
// they fall back to the foreign-writer rule (status.go).

// Candidate is one metalgate proxy as any proxy can read it: the announcement on its publish
// Service, and that Service's age, address and endpoints.
type Candidate struct {
	// Service is the proxy's publish Service: its identity.
	Service types.NamespacedName
	// Created is the Service's creationTimestamp.
	Created time.Time
	// Controller is the IngressClass spec.controller it serves (--controller-name).
	Controller string
	// Namespaces it watches (--watch-namespace); nil: all namespaces.
	Namespaces []string
	// WithoutClass: it also serves Ingresses without a class (--watch-ingress-without-class).
	WithoutClass bool
	// FieldManager names its status writes in managedFields.
	FieldManager string
	// Addresses are its Service's load-balancer addresses, what it would publish; none: it
	// writes nothing.
	Addresses []string
	// Serving: its Service has a ready endpoint, or had one less than GoneAfter ago.
	Serving bool
}

// Scope is how specifically a proxy serves a namespace; a lower value wins.
type Scope int

// Scopes, best first.
const (
	// ScopeOwn: the namespace's own proxy (publish Service in the namespace, which it watches).
	ScopeOwn Scope = iota + 1
	// ScopeListed: the namespace is in its --watch-namespace, its Service elsewhere.
	ScopeListed
	// ScopeCluster: it watches every namespace.
	ScopeCluster
	// ScopeNone: it does not serve the namespace.
	ScopeNone
)

func (s Scope) String() string {
	switch s {
	case ScopeOwn:
		return "own"
	case ScopeListed:
		return "listed"
	case ScopeCluster:
		return "cluster-wide"
	default:
		return "none"
	}
}

// DescribeScope says how the proxy serves namespace ns, for messages.
func (c Candidate) DescribeScope(ns string) string {
	switch c.ScopeOf(ns) {
	case ScopeOwn:
		return fmt.Sprintf("namespace %s's own proxy", ns)
	case ScopeListed:
		return fmt.Sprintf("watching %s from namespace %s", ns, c.Service.Namespace)
	case ScopeCluster:
		return "cluster-wide"
	default:
		return fmt.Sprintf("not serving namespace %s", ns)
	}
}

// ScopeOf returns how the proxy serves namespace ns.
func (c Candidate) ScopeOf(ns string) Scope {
	if c.Namespaces == nil {
		return ScopeCluster
	}
	if !slices.Contains(c.Namespaces, ns) {
		return ScopeNone
	}
	if c.Service.Namespace == ns {
		return ScopeOwn
	}
	return ScopeListed
}

// Subject is the Ingress arbitrated: its namespace, the controller its class names, and
// whether it has no class (then only proxies with WithoutClass serve it).
type Subject struct {
	Namespace  string
	Controller string
	Classless  bool
}

// Serves reports whether the proxy would publish the subject's status were it alone.
func (c Candidate) Serves(s Subject) bool {
	return c.Controller == s.Controller && c.ScopeOf(s.Namespace) != ScopeNone && (!s.Classless || c.WithoutClass)
}

func (c Candidate) String() string { return c.Service.String() }

// Decision is the outcome of Arbitrate.
type Decision struct {
	// Serving lists the candidates that serve the subject, winner first.
	Serving []Candidate
	// Winner is the one that writes the status; nil when none has an address.
	Winner *Candidate
}

// Arbitrate returns who publishes the status of the subject among the candidates. It is
// pure and order-independent: every proxy given the same candidates gets the same answer.
func Arbitrate(cands []Candidate, s Subject) Decision {
	var d Decision
	for _, c := range cands {
		if c.Serves(s) {
			d.Serving = append(d.Serving, c)
		}
	}
	slices.SortFunc(d.Serving, func(a, b Candidate) int { return compare(a, b, s.Namespace) })
	if len(d.Serving) > 0 && len(d.Serving[0].Addresses) > 0 {
		d.Winner = &d.Serving[0]
	}
	return d
}

// compare orders a before b (negative) when a outranks b for namespace ns.
func compare(a, b Candidate, ns string) int {
	k, _ := decisive(a, b, ns)
	switch k {
	case keyAddress:
		return boolFirst(len(a.Addresses) > 0, len(b.Addresses) > 0)
	case keyServing:
		return boolFirst(a.Serving, b.Serving)
	case keyScope:
		return cmp.Compare(a.ScopeOf(ns), b.ScopeOf(ns))
	case keyAge:
		return a.Created.Compare(b.Created)
	case keyName:
		return strings.Compare(a.Service.String(), b.Service.String())
	}
	return 0
}

func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}

type rankKey int

const (
	keyNone rankKey = iota
	keyAddress
	keyServing
	keyScope
	keyAge
	keyName
)

// decisive returns the first rule that tells a and b apart, in rule order.
func decisive(a, b Candidate, ns string) (rankKey, bool) {
	switch {
	case (len(a.Addresses) > 0) != (len(b.Addresses) > 0):
		return keyAddress, true
	case a.Serving != b.Serving:
		return keyServing, true
	case a.ScopeOf(ns) != b.ScopeOf(ns):
		return keyScope, true
	case !a.Created.Equal(b.Created):
		return keyAge, true
	case a.Service != b.Service:
		return keyName, true
	}
	return keyNone, false
}

// Why says in a sentence why winner outranks loser for namespace ns, naming the rule.
func Why(winner, loser Candidate, ns string) string {
	k, _ := decisive(winner, loser, ns)
	switch k {
	case keyAddress:
		return fmt.Sprintf("%s has a load-balancer address and %s has none", winner, loser)
	case keyServing:
		return fmt.Sprintf("%s is serving and %s has had no ready endpoint behind its publish Service for longer than the hand-over delay", winner, loser)
	case keyScope:
		return fmt.Sprintf("%s is %s and %s is %s: the more specific scope wins", winner, winner.DescribeScope(ns), loser, loser.DescribeScope(ns))
	case keyAge:
		return fmt.Sprintf("both are %s; the publish Service of %s is older (created %s, %s's %s)", winner.DescribeScope(ns), winner,
			winner.Created.UTC().Format(time.RFC3339), loser, loser.Created.UTC().Format(time.RFC3339))
	case keyName:
		return fmt.Sprintf("both are %s with publish Services created in the same second; %s sorts before %s", winner.DescribeScope(ns), winner, loser)
	}
	return fmt.Sprintf("%s and %s are the same proxy", winner, loser)
}
