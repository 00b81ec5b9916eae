package controllers

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// poolsFor translates IPAddressPool objects into allocator pools. A pool the allocator cannot
// use (an address or selector the schema let through but the parser refuses) is left out and
// its error returned by name, so one bad pool never stops the others.
func poolsFor(objs []v1alpha1.IPAddressPool) ([]allocator.Pool, map[string]error) {
	sort.Slice(objs, func(i, j int) bool { return objs[i].Name < objs[j].Name })
	var pools []allocator.Pool
	bad := map[string]error{}
	for i := range objs {
		p, err := poolFor(&objs[i])
		if err != nil {
			bad[objs[i].Name] = err
			continue
		}
		pools = append(pools, p)
	}
	return pools, bad
}

func poolFor(obj *v1alpha1.IPAddressPool) (allocator.Pool, error) {
	p := allocator.Pool{
		Name:          obj.Name,
		AutoAssign:    obj.Spec.AutoAssign == nil || *obj.Spec.AutoAssign,
		AvoidBuggyIPs: obj.Spec.AvoidBuggyIPs,
		// Unset (an object stored before the field existed) is the default, WithinNamespace.
		ShareAcrossNamespaces: obj.Spec.AddressSharing == v1alpha1.AddressSharingAcrossNamespaces,
	}
	for i, a := range obj.Spec.Addresses {
		if _, err := allocator.ParseRange(string(a)); err != nil {
			return p, fmt.Errorf("spec.addresses[%d]: %w", i, err)
		}
		p.Addresses = append(p.Addresses, string(a))
	}
	if sa := obj.Spec.ServiceAllocation; sa != nil {
		p.Priority = sa.Priority
		p.Namespaces = append(p.Namespaces, sa.Namespaces...)
		var err error
		if p.NamespaceSelectors, err = matchers(sa.NamespaceSelectors, "spec.serviceAllocation.namespaceSelectors"); err != nil {
			return p, err
		}
		if p.ServiceSelectors, err = matchers(sa.ServiceSelectors, "spec.serviceAllocation.serviceSelectors"); err != nil {
			return p, err
		}
	}
	return p, nil
}

func matchers(sels []metav1.LabelSelector, field string) ([]allocator.LabelMatcher, error) {
	var out []allocator.LabelMatcher
	for i := range sels {
		s, err := metav1.LabelSelectorAsSelector(&sels[i])
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out = append(out, func(l map[string]string) bool { return s.Matches(labels.Set(l)) })
	}
	return out, nil
}
