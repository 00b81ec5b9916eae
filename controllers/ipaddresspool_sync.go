package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// poolSync keeps the allocator's pool set equal to the IPAddressPool objects in the cache. Both
// reconcilers call it, so whichever runs first after a pool edit applies it.
type poolSync struct {
	client    client.Reader
	alloc     *allocator.Allocator
	namespace string

	mu      sync.Mutex
	applied string           // name=resourceVersion of every pool last applied
	invalid map[string]error // pools left out of the last applied set, by name
}

// sync applies the current pools when they changed since the last call. It returns the keys of
// Services whose addresses left every pool (they must be allocated again).
func (p *poolSync) sync(ctx context.Context) ([]string, error) {
	var list v1alpha1.IPAddressPoolList
	if err := p.client.List(ctx, &list, client.InNamespace(p.namespace)); err != nil {
		return nil, fmt.Errorf("list IPAddressPools: %w", err)
	}
	versions := make([]string, 0, len(list.Items))
	for _, o := range list.Items {
		versions = append(versions, o.Name+"="+o.ResourceVersion)
	}
	sort.Strings(versions)
	version := strings.Join(versions, ",")

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.applied == version && p.invalid != nil {
		return nil, nil
	}
	pools, invalid := poolsFor(list.Items)
	released, err := p.alloc.SetPools(pools)
	if err != nil {
		// poolsFor already left out what the parser refuses; what remains is a set the
		// allocator refuses as a whole (e.g. a duplicate name), which cannot come from the API.
		return nil, fmt.Errorf("apply %d IPAddressPools: %w", len(pools), err)
	}
	p.applied, p.invalid = version, invalid
	return released, nil
}

// invalidReason is why a pool was left out of the allocator, or nil.
func (p *poolSync) invalidReason(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.invalid[name]
}
