package refgrant

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// From is the referring side of a reference: the API group and kind of the object that
// refers, and its namespace.
type From struct {
	Group, Kind, Namespace string
}

// Allows reports whether one of grants, in the namespace of to, lets objects of from refer to
// the core object (group "") of kind toKind named to: the grant's from lists from's group,
// kind and namespace, and its to lists the core group, toKind and either no name or to's
// name. A grant in any other namespace counts for nothing: only the owner of the target
// namespace can open it.
func Allows(grants []*gatewayv1beta1.ReferenceGrant, from From, toKind string, to types.NamespacedName) bool {
	for _, g := range grants {
		if g.Namespace != to.Namespace {
			continue
		}
		fromOK, toOK := false, false
		for _, f := range g.Spec.From {
			fromOK = fromOK || string(f.Group) == from.Group && string(f.Kind) == from.Kind && string(f.Namespace) == from.Namespace
		}
		for _, t := range g.Spec.To {
			toOK = toOK || t.Group == corev1.GroupName && string(t.Kind) == toKind && (t.Name == nil || string(*t.Name) == to.Name)
		}
		if fromOK && toOK {
			return true
		}
	}
	return false
}
