package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Community defines names for BGP community values. A BGPAdvertisement in
// the same namespace may then list a name ("no-export") in its communities
// instead of the value ("65535:65281").
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=metalgate
// +kubebuilder:printcolumn:name="Communities",type=string,JSONPath=`.spec.communities`,priority=1
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Community struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec lists the aliases.
	// +optional
	Spec CommunitySpec `json:"spec,omitempty"`
	// Status is written by the controller: the Valid condition.
	// +optional
	Status CommunityStatus `json:"status,omitempty"`
}

// CommunitySpec lists community aliases.
type CommunitySpec struct {
	// Communities are the aliases, each with a distinct name.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Communities []CommunityAlias `json:"communities,omitempty"`
}

// CommunityAlias gives a name to a BGP community value.
type CommunityAlias struct {
	// Name is the alias used in BGPAdvertisement communities: a letter followed
	// by letters, digits, '-', '_' or '.', at most 63 characters ("no-export",
	// "NO_ADVERTISE").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[A-Za-z][A-Za-z0-9_.-]*$')`,message="must start with a letter and contain only letters, digits, '-', '_' and '.'"
	Name string `json:"name"`

	// Value is the community the name stands for: a standard community written
	// as two numbers from 0 to 65535 separated by a colon ("65535:65281"), or a
	// large community written as "large:" followed by three numbers from 0 to
	// 4294967295 separated by colons ("large:65000:1:2").
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`(self.matches('^[0-9]{1,5}:[0-9]{1,5}$') && int(self.find('^[0-9]+')) <= 65535 && int(self.find('[0-9]+$')) <= 65535) || (self.matches('^large:[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10}$') && self.findAll('[0-9]+').all(n, int(n) <= 4294967295))`,message="must be a standard community such as 65000:100 (two numbers from 0 to 65535) or a large community such as large:65000:1:2 (three numbers from 0 to 4294967295)"
	Value string `json:"value"`
}

// CommunityStatus is written by the controller: whether each name it defines has one value in the namespace.
type CommunityStatus struct {
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

// CommunityList is a list of Community.
type CommunityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Community `json:"items"`
}
