package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// L2Advertisement announces addresses of some pools on the local network at
// layer 2: one node answers ARP requests (IPv4) and NDP neighbor
// solicitations (IPv6) for each assigned address, so traffic for the address
// reaches that node, and another node takes over when it fails. Several
// L2Advertisements may select the same pool; their node and interface
// restrictions then add up.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=l2adv,categories=metalgate
// +kubebuilder:printcolumn:name="IPAddressPools",type=string,JSONPath=`.spec.ipAddressPools`
// +kubebuilder:printcolumn:name="IPAddressPool Selectors",type=string,JSONPath=`.spec.ipAddressPoolSelectors`
// +kubebuilder:printcolumn:name="Interfaces",type=string,JSONPath=`.spec.interfaces`
// +kubebuilder:printcolumn:name="Node Selectors",type=string,JSONPath=`.spec.nodeSelectors`,priority=10
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type L2Advertisement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which pools are announced, from which nodes and on which
	// interfaces. An empty spec announces every pool from every node on every
	// interface.
	// +optional
	Spec L2AdvertisementSpec `json:"spec,omitempty"`
	// Status is written by the controller: the Valid condition.
	// +optional
	Status L2AdvertisementStatus `json:"status,omitempty"`
}

// L2AdvertisementSpec selects the pools announced at layer 2, the nodes that
// may announce them and the interfaces used.
type L2AdvertisementSpec struct {
	// IPAddressPools names the pools, in this namespace, whose addresses are
	// announced. When both ipAddressPools and ipAddressPoolSelectors are empty,
	// every pool is announced.
	// +listType=atomic
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	IPAddressPools []string `json:"ipAddressPools,omitempty"`

	// IPAddressPoolSelectors select pools, by label, whose addresses are
	// announced, in addition to those named in ipAddressPools.
	// +listType=atomic
	// +optional
	IPAddressPoolSelectors []metav1.LabelSelector `json:"ipAddressPoolSelectors,omitempty"`

	// NodeSelectors limit the nodes that may announce the addresses to those
	// matching at least one selector. When empty, any node may announce them.
	// +listType=atomic
	// +optional
	NodeSelectors []metav1.LabelSelector `json:"nodeSelectors,omitempty"`

	// Interfaces limit the announcements to these network interfaces of the node
	// (for example eth0 or bond0.100). Each is a Linux interface name: 1 to 15
	// characters, no '/', ':' or whitespace, and not "." or "..". When empty,
	// every interface is used.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=15
	// +kubebuilder:validation:items:XValidation:rule=`self.matches('^[^/:\\s]+$') && self != '.' && self != '..'`,message="must be a network interface name: 1 to 15 characters, no '/', ':' or whitespace, not '.' or '..'"
	// +optional
	Interfaces []string `json:"interfaces,omitempty"`
}

// L2AdvertisementStatus is written by the controller: whether the pools it names exist and its selectors parse.
type L2AdvertisementStatus struct {
	// ObservedGeneration is the metadata.generation the controller last
	// checked; the conditions describe that generation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Valid is True when every reference of the object resolves,
	// False with a reason (PoolNotFound, CommunityNotFound, InvalidSelector, …)
	// and a message naming each offending field otherwise.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +kubebuilder:object:root=true

// L2AdvertisementList is a list of L2Advertisement.
type L2AdvertisementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []L2Advertisement `json:"items"`
}
