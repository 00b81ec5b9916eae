package table

import (
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SubjectAltNames are the names a backend's certificate may hold instead of
// BackendTLS.ServerName (a BackendTLSPolicy's validation.subjectAltNames): one must match.
type SubjectAltNames struct {
	DNSNames []string // host names, matched as crypto/x509 matches them (wildcards apply)
	URIs     []string // URIs (a SPIFFE ID, say), matched exactly
}

// Empty says whether no name is given (ServerName is then the one checked).
func (s SubjectAltNames) Empty() bool { return len(s.DNSNames) == 0 && len(s.URIs) == 0 }

// String is the names, sorted, as the settings' ID holds them.
func (s SubjectAltNames) String() string {
	var out []string
	for _, n := range s.DNSNames {
		out = append(out, "dns:"+n)
	}
	for _, u := range s.URIs {
		out = append(out, "uri:"+u)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// PolicyBackendTLS is the TLS side of a backend decided by a policy object rather than by a
// route's annotations (a Gateway API BackendTLSPolicy): bt as made by the caller, its ID set
// by the rules every BackendTLS follows (backendTLSID: the Service's namespace ns, the names,
// SNI, verification, the CA source caSource — the ConfigMaps' identity and content, or
// "system" — and why it is refused), so a config, session cache or pooled connection is
// shared only between backends whose settings are the same in every respect.
func PolicyBackendTLS(ns string, bt BackendTLS, caSource string) *BackendTLS {
	bt.ID = backendTLSID(ns, &bt, caSource)
	return &bt
}

// BackendWithTLS is Backend for a backend whose TLS settings bt were decided by a policy
// (PolicyBackendTLS): opts.Protocol must be https or grpcs. Two routes share the backend
// only when bt's ID is the same. A refused bt (Refuse) is reported by the policy's status,
// not as a Problem of src.
func (b *Builder) BackendWithTLS(src SourceRef, svcID types.NamespacedName, ref networkingv1.ServiceBackendPort, opts Options, bt *BackendTLS) *Backend {
	return b.backend(src, svcID, ref, opts, "|"+bt.ID, func() *BackendTLS { return bt })
}

// PolicyStatus is one policy's conditions (Accepted, ResolvedRefs; observedGeneration the
// policy's, lastTransitionTime left for the writer) for the table's Gateway as its ancestor.
type PolicyStatus struct {
	Policy     types.NamespacedName
	Conditions []metav1.Condition
}

// RefProblem is why a reference cannot be used: the reason of the condition that says so,
// and a message naming the reference.
type RefProblem struct {
	Reason  string
	Message string
}
