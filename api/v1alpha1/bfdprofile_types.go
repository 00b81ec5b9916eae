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
// +kubebuilder:resource:shortName=bfdprofile,categories=metalgate
// +kubebuilder:printcolumn:name="Passive Mode",type=boolean,JSONPath=`.spec.passiveMode`
// +kubebuilder:printcolumn:name="Transmit Interval",type=integer,JSONPath=`.spec.transmitInterval`
// +kubebuilder:printcolumn:name="Receive Interval",type=integer,JSONPath=`.spec.receiveInterval`
// +kubebuilder:printcolumn:name="Multiplier",type=integer,JSONPath=`.spec.detectMultiplier`
// +kubebuilder:printcolumn:name="Echo Mode",type=boolean,JSONPath=`.spec.echoMode`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BFDProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the BFD settings. An empty spec uses the defaults for every
	// setting.
	// +optional
	Spec BFDProfileSpec `json:"spec,omitempty"`
	// Status is reserved for future use.
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

	// EchoInterval is the smallest interval, in milliseconds, at which this end
	// sends echo packets when echoMode is on. From 10 to 60000; defaults to 50.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	// +optional
	EchoInterval *uint32 `json:"echoInterval,omitempty"`

	// EchoMode turns on the BFD echo function: echo packets are sent to the
	// peer, which forwards them back, testing the forwarding path without
	// involving the peer's BFD process. Defaults to false.
	// +optional
	EchoMode bool `json:"echoMode,omitempty"`

	// PassiveMode makes this end wait for the peer to send the first control
	// packet instead of starting the session itself. Defaults to false.
	// +optional
	PassiveMode bool `json:"passiveMode,omitempty"`

	// For multi-hop sessions, the smallest IP time-to-live accepted on incoming
	// control packets; packets that crossed more hops are dropped. From 1 to
	// 254; defaults to 254 (the peer at most one hop away).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=254
	// +optional
	MinimumTTL *uint32 `json:"minimumTtl,omitempty"`
}

// BFDProfileStatus is reserved for future use; it has no fields yet.
type BFDProfileStatus struct{}

// +kubebuilder:object:root=true

// BFDProfileList is a list of BFDProfile.
type BFDProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BFDProfile `json:"items"`
}
