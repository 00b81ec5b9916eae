package refcheck

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

// SelectsPool reports whether an advertisement with these pool names and pool selectors
// picks pool p: by name, by a selector that matches its labels, or by naming nothing at all
// (every pool). A selector that does not parse matches nothing; L2Advertisement and
// BGPAdvertisement report it as InvalidSelector.
func SelectsPool(p *v1alpha1.IPAddressPool, names []string, selectors []metav1.LabelSelector) bool {
	if len(names) == 0 && len(selectors) == 0 {
		return true
	}
	if slices.Contains(names, p.Name) {
		return true
	}
	for i := range selectors {
		sel, err := metav1.LabelSelectorAsSelector(&selectors[i])
		if err == nil && sel.Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}
