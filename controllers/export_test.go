package controllers

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// NewHandDrivenServiceReconciler builds a Service reconciler without a manager, with its own
// allocator and metrics, for tests that call Reconcile themselves to play out an interleaving
// of two controllers step by step. c reads from a cache that has the claim-holder index
// (IndexClaims); reader reads from the API server.
func NewHandDrivenServiceReconciler(c client.Client, reader client.Reader, recorder events.EventRecorder) *ServiceReconciler {
	alloc := allocator.New()
	return &ServiceReconciler{
		Client:    c,
		APIReader: reader,
		Alloc:     alloc,
		Recorder:  recorder,
		Metrics:   NewMetrics(prometheus.NewRegistry()),
		LBClass:   DefaultLBClass,
		Namespace: DefaultNamespace,
		pools:     &poolSync{client: c, alloc: alloc, namespace: DefaultNamespace},
	}
}

// IndexClaims adds to i the index of claims by holder that the Service reconciler lists by.
func IndexClaims(ctx context.Context, i client.FieldIndexer) error {
	return i.IndexField(ctx, &v1alpha1.IPAddressClaim{}, claimHolderIndex, claimHolderKeys)
}
