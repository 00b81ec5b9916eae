package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: "metalgate.io", Version: "v1alpha1"}

// AddToScheme registers every kind in this package with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes()...)
	metav1AddToGroupVersion(s)
	return nil
}

// knownTypes lists the kinds of this package; each *_types.go file adds its own in init-free form.
func knownTypes() []runtime.Object {
	return []runtime.Object{
		&IPAddressPool{}, &IPAddressPoolList{},
		&L2Advertisement{}, &L2AdvertisementList{},
		&BGPPeer{}, &BGPPeerList{},
		&BGPAdvertisement{}, &BGPAdvertisementList{},
		&BFDProfile{}, &BFDProfileList{},
		&Community{}, &CommunityList{},
		&IPAddressClaim{}, &IPAddressClaimList{},
	}
}
