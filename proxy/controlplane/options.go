package controlplane

import (
	"time"

	"github.com/go-logr/logr"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/metalgate/metalgate/proxy/ingress"
	"github.com/metalgate/metalgate/proxy/table"
)

// Options configure the control plane. The zero value works except for Swap; each field says
// its default.
type Options struct {
	// Controller is the IngressClass spec.controller served. Default ingress.ControllerName.
	Controller string
	// Gateway, when set, makes this the proxy of that one Gateway (`metalgate proxy
	// --gateway`): it watches the Gateway, HTTPRoutes, GRPCRoutes and TLSRoutes (when the
	// API server serves them), ReferenceGrants, Namespaces, Services and EndpointSlices, builds the
	// table with gatewayapi.Input.Gateway, and reads no Ingress and writes no status. Excludes
	// WatchNamespaces.
	Gateway types.NamespacedName
	// noGRPCRoute is set by Setup when the API server does not serve GRPCRoute
	// (checkGRPCRoute): a Gateway proxy then neither watches nor lists them.
	noGRPCRoute bool
	// noTLSRoute likewise for TLSRoute.
	noTLSRoute bool
	// noListenerSet likewise for ListenerSet.
	noListenerSet bool
	// noBackendTLSPolicy likewise for BackendTLSPolicy (checkBackendTLSPolicy).
	noBackendTLSPolicy bool
	// WatchNamespaces limits Ingresses (and the Services, EndpointSlices and Secrets they use)
	// to these namespaces. Default: all.
	WatchNamespaces []string
	// WatchDefaultClass also serves Ingresses without a class when the default IngressClass is
	// ours.
	WatchDefaultClass bool
	// AllowUnmanagedSlices also routes to EndpointSlices that the endpoint-slice controller
	// does not manage (hand-written, or mirrored from hand-written Endpoints); see
	// table.Sources.AllowUnmanagedSlices. Default false: their endpoints are refused.
	AllowUnmanagedSlices bool
	// NginxAnnotations also reads the nginx.ingress.kubernetes.io/ forms of the annotations
	// and reports the nginx annotations metalgate does not support; ingress.Input's.
	NginxAnnotations bool
	// SSLPassthrough honours the ssl-passthrough annotation; ingress.Input's.
	SSLPassthrough bool
	// ExternalAuthHosts are the outside hosts an Ingress's auth-url may name; ingress.Input's.
	ExternalAuthHosts table.HostList
	// noReferenceGrant is set by Setup when the API server does not serve ReferenceGrant
	// (Gateway API not installed): an Ingress proxy then neither watches nor lists them, and
	// an auth-url to another namespace's Service is refused as ungranted.
	noReferenceGrant bool
	// DefaultBackendService and DefaultBackendPort name the proxy's own default backend;
	// ingress.Input's. Its namespace is watched too (CacheOptions).
	DefaultBackendService types.NamespacedName
	DefaultBackendPort    networkingv1.ServiceBackendPort

	// PublishService is the Service whose load-balancer addresses go into Ingress status.
	// Default: the Service (type LoadBalancer first) in PodNamespace whose selector matches
	// the labels of Pod PodName.
	PublishService types.NamespacedName
	PodName        string
	PodNamespace   string
	// FieldManager names this proxy's status writes in managedFields; that is how it knows
	// what it wrote and who overwrote it. Default "metalgate-proxy".
	FieldManager string

	// MaxBatch bounds how long a change waits for more changes before the table is rebuilt.
	// Default 50ms. Quiet ends a batch early after this long without a new event. Default 15ms.
	MaxBatch time.Duration
	Quiet    time.Duration
	// StaleAfter is how long a watch may fail before readiness fails. Default 2m.
	StaleAfter time.Duration
	// ProbeInterval is how often each kind is listed (one item) from the API server to check
	// it is reachable. Default StaleAfter/4.
	ProbeInterval time.Duration

	// ConflictWindow is how long overwrites of our status are remembered; two overwrites
	// within it are a conflict. Default 10m. Backoff starts at BackoffBase and doubles up
	// to BackoffMax (defaults 1s, 5m).
	ConflictWindow time.Duration
	BackoffBase    time.Duration
	BackoffMax     time.Duration
	// MaxConflicts overwrites of our value by another writer within ConflictWindow make this
	// proxy stop writing that Ingress (Warning ForeignStatusWriter). Default 3.
	MaxConflicts int
	// ForeignQuiet is how long the status of an Ingress given up to another writer must stay
	// unchanged before this proxy writes it again; doubled per further stop, at most 8×.
	// Default 10m.
	ForeignQuiet time.Duration
	// GoneAfter is how long another proxy's publish Service may have no ready endpoint
	// before that proxy stops outranking serving ones in arbitration (a restart keeps its
	// Ingresses; an uninstalled Deployment whose Service stayed hands them over). Default 2m.
	GoneAfter time.Duration
	// YieldTraffic also leaves out of the routing table the Ingresses whose status another
	// metalgate proxy publishes (it wins arbitration) or that annotation
	// metalgate.io/status-owner gives to another writer. Default false: this proxy still
	// routes them, as it owns their class, so clients that use its VIP keep working.
	YieldTraffic bool
	// ResyncStatus re-checks every Ingress's status this often even without events.
	// Default 30s.
	ResyncStatus time.Duration
	// StatusElection, when set, runs the status publisher under a Lease of its own
	// (statuswriter.go), on a manager without leader election: losing the Lease stops status
	// writing only, and the proxy campaigns again. Nil: the publisher is a leader-only
	// runnable of the manager (with no manager election, every replica writes).
	StatusElection *Election

	// Swap receives every new table (the data plane's Swap). Required.
	Swap func(*table.Table)
	// Metrics, when set, are updated. Recorder receives Warning events; default: the
	// manager's recorder.
	Metrics  *Metrics
	Recorder events.EventRecorder
	Logger   logr.Logger
}

func (o *Options) defaults() {
	if o.Controller == "" {
		o.Controller = ingress.ControllerName
	}
	if o.FieldManager == "" {
		o.FieldManager = "metalgate-proxy"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.MaxBatch, 50*time.Millisecond)
	def(&o.Quiet, 15*time.Millisecond)
	def(&o.StaleAfter, 2*time.Minute)
	def(&o.ProbeInterval, o.StaleAfter/4)
	def(&o.ConflictWindow, 10*time.Minute)
	def(&o.BackoffBase, time.Second)
	def(&o.BackoffMax, 5*time.Minute)
	def(&o.ResyncStatus, 30*time.Second)
	def(&o.ForeignQuiet, 10*time.Minute)
	def(&o.GoneAfter, 2*time.Minute)
	if o.MaxConflicts <= 0 {
		o.MaxConflicts = 3
	}
}
