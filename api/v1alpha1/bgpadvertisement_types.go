package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BGPAdvertisement announces addresses of some pools to BGP peers, with the
// BGP attributes to attach to the routes. Several BGPAdvertisements may
// select the same pool, for example to send the addresses to different peers
// with different communities.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bgpadv,categories=metalgate
// +kubebuilder:printcolumn:name="IPAddressPools",type=string,JSONPath=`.spec.ipAddressPools`
// +kubebuilder:printcolumn:name="IPAddressPool Selectors",type=string,JSONPath=`.spec.ipAddressPoolSelectors`
// +kubebuilder:printcolumn:name="Peers",type=string,JSONPath=`.spec.peers`
// +kubebuilder:printcolumn:name="Node Selectors",type=string,JSONPath=`.spec.nodeSelectors`,priority=10
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BGPAdvertisement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which pools are announced, to which peers, from which nodes and
	// with which attributes. An empty spec announces every pool to every peer
	// from every node, one route per address.
	// +optional
	Spec BGPAdvertisementSpec `json:"spec,omitempty"`
	// Status is written by the controller: the Valid condition.
	// +optional
	Status BGPAdvertisementStatus `json:"status,omitempty"`
}

// BGPAdvertisementSpec selects the pools announced over BGP and the
// attributes of the routes.
type BGPAdvertisementSpec struct {
	// AggregationLength is the prefix length of the routes announced for IPv4
	// addresses: 32 (the default) announces one route per assigned address; a
	// shorter length announces the block that contains the address instead, so
	// that several addresses share one route. From 0 to 32.
	// +kubebuilder:default=32
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	// +optional
	AggregationLength *int32 `json:"aggregationLength,omitempty"`

	// AggregationLengthV6 is the prefix length of the routes announced for IPv6
	// addresses, from 0 to 128. Defaults to 128, one route per assigned address.
	// +kubebuilder:default=128
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	// +optional
	AggregationLengthV6 *int32 `json:"aggregationLengthV6,omitempty"`

	// LocalPref is the BGP LOCAL_PREF attribute of the routes, from 0 to
	// 4294967295. It is only sent to internal BGP peers (peerASN equal to
	// myASN). When unset or 0 no LOCAL_PREF is set and the peer applies its own
	// default (commonly 100).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	// +optional
	LocalPref uint32 `json:"localPref,omitempty"`

	// Communities are the BGP communities attached to the routes. Each entry is
	// a standard community written as two numbers from 0 to 65535 separated by a
	// colon ("65000:100"), a large community written as "large:" followed by
	// three numbers from 0 to 4294967295 separated by colons
	// ("large:65000:1:2"), or the name of an alias defined in a Community object
	// of this namespace ("no-export").
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule=`self.matches('^[A-Za-z][A-Za-z0-9_.-]*$') || (self.matches('^[0-9]{1,5}:[0-9]{1,5}$') && int(self.find('^[0-9]+')) <= 65535 && int(self.find('[0-9]+$')) <= 65535) || (self.matches('^large:[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10}$') && self.findAll('[0-9]+').all(n, int(n) <= 4294967295))`,message="must be a standard community such as 65000:100 (two numbers from 0 to 65535), a large community such as large:65000:1:2 (three numbers from 0 to 4294967295), or the name of a Community alias (a letter, then letters, digits, '-', '_' or '.')"
	// +optional
	Communities []string `json:"communities,omitempty"`

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

	// NodeSelectors limit the nodes that announce the addresses to those
	// matching at least one selector. When empty, every node that peers
	// announces them.
	// +listType=atomic
	// +optional
	NodeSelectors []metav1.LabelSelector `json:"nodeSelectors,omitempty"`

	// Peers names the BGPPeers, in this namespace, that receive the
	// announcements. When empty, every peer receives them.
	// +listType=atomic
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Peers []string `json:"peers,omitempty"`
}

// BGPAdvertisementStatus is written by the controller: whether the pools, peers and community names it uses exist and its selectors parse.
type BGPAdvertisementStatus struct {
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

// BGPAdvertisementList is a list of BGPAdvertisement.
type BGPAdvertisementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPAdvertisement `json:"items"`
}
