package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BFDProfile is a set of Bidirectional Forwarding Detection (RFC 5880)
// settings. A BGPPeer that names a profile in its bfdProfile field runs a
// BFD session with the peer, which notices a failed link or router much
// faster than the BGP hold timer. Unset fields take the defaults of the BFD
// implementation, given with each field.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bfdprofile,categories=metalgate
// +kubebuilder:printcolumn:name="Transmit Interval",type=integer,JSONPath=`.spec.transmitInterval`
// +kubebuilder:printcolumn:name="Receive Interval",type=integer,JSONPath=`.spec.receiveInterval`
// +kubebuilder:printcolumn:name="Multiplier",type=integer,JSONPath=`.spec.detectMultiplier`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BFDProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the BFD settings. An empty spec uses the defaults for every
	// setting.
	// +optional
	Spec BFDProfileSpec `json:"spec,omitempty"`
	// Status is written by the controller: the Valid condition.
	// +optional
	Status BFDProfileStatus `json:"status,omitempty"`
}

// BFDProfileSpec holds the settings of a BFD session. Intervals are in
// milliseconds.
type BFDProfileSpec struct {
	// ReceiveInterval is the smallest interval, in milliseconds, at which this
	// end wants to receive control packets from the peer. From 10 to 60000;
	// defaults to 300.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	// +optional
	ReceiveInterval *uint32 `json:"receiveInterval,omitempty"`

	// TransmitInterval is the smallest interval, in milliseconds, at which this
	// end wants to send control packets to the peer; the interval actually used
	// is negotiated with the peer. From 10 to 60000; defaults to 300.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	// +optional
	TransmitInterval *uint32 `json:"transmitInterval,omitempty"`

	// DetectMultiplier is the number of control packets that may be missed in a
	// row before the session is declared down: the detection time is this number
	// times the negotiated receive interval. From 2 to 255; defaults to 3.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=255
	// +optional
	DetectMultiplier *uint32 `json:"detectMultiplier,omitempty"`

	// EchoInterval is accepted and not used: the embedded BFD has no echo
	// function (see echoMode). It is kept so that MetalLB manifests port over.
	// From 10 to 60000.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	// +optional
	EchoInterval *uint32 `json:"echoInterval,omitempty"`

	// EchoMode is not supported: the embedded BFD has no echo function (RFC
	// 5880 §6.4), and the API server refuses echoMode: true. Leave it unset or
	// false.
	// +kubebuilder:validation:XValidation:rule="!self",message="echoMode is not supported: the embedded BFD has no echo function; remove echoMode or set it to false"
	// +optional
	EchoMode bool `json:"echoMode,omitempty"`

	// PassiveMode is not supported: the embedded BFD always starts the session
	// itself, and the API server refuses passiveMode: true. Leave it unset or
	// false.
	// +kubebuilder:validation:XValidation:rule="!self",message="passiveMode is not supported: the embedded BFD always starts the session itself; remove passiveMode or set it to false"
	// +optional
	PassiveMode bool `json:"passiveMode,omitempty"`

	// MinimumTTL is accepted and not used: it concerns multi-hop sessions, and
	// the embedded BFD is single-hop only (a bfdProfile on an ebgpMultiHop
	// BGPPeer is refused by the speaker). It is kept so that MetalLB manifests
	// port over. From 1 to 254.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=254
	// +optional
	MinimumTTL *uint32 `json:"minimumTtl,omitempty"`
}

// BFDProfileStatus is written by the controller: whether the speakers can use the profile.
type BFDProfileStatus struct {
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

// BFDProfileList is a list of BFDProfile.
type BFDProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BFDProfile `json:"items"`
}
