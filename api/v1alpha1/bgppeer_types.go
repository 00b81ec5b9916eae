package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BGP session states reported in BGPPeerNodeStatus.SessionState: the states
// of the BGP finite state machine (RFC 4271, section 8), plus Unknown when
// the speaker could not be asked.
const (
	SessionStateIdle        = "Idle"
	SessionStateConnect     = "Connect"
	SessionStateActive      = "Active"
	SessionStateOpenSent    = "OpenSent"
	SessionStateOpenConfirm = "OpenConfirm"
	SessionStateEstablished = "Established"
	SessionStateUnknown     = "Unknown"
)

// Duration fields of BGPPeer share one shape check: what Go's
// time.ParseDuration accepts, restricted to the units in decreasing order,
// each at most once, with at most 6 integer and 9 fraction digits ("0",
// "90s", "1m30s", "1.5s", "500ms"). The restriction keeps every accepted
// value far below the int64-nanosecond limit, so the CEL duration()
// conversions in the rules, which are guarded by the same expression, can
// never fail.

// BGPPeer is a BGP router that the metalgate speakers on the selected nodes
// open a session with, to announce the addresses selected by
// BGPAdvertisements.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bgppeer,categories=metalgate
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.peerAddress`
// +kubebuilder:printcolumn:name="ASN",type=integer,JSONPath=`.spec.peerASN`
// +kubebuilder:printcolumn:name="My ASN",type=integer,JSONPath=`.spec.myASN`
// +kubebuilder:printcolumn:name="BFD Profile",type=string,JSONPath=`.spec.bfdProfile`
// +kubebuilder:printcolumn:name="Multi Hops",type=boolean,JSONPath=`.spec.ebgpMultiHop`,priority=1
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BGPPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the peer and the session parameters.
	Spec BGPPeerSpec `json:"spec"`
	// Status is written by the speakers (the state of the session from each
	// node) and by the controller (the Valid condition).
	// +optional
	Status BGPPeerStatus `json:"status,omitempty"`
}

// BGPPeerSpec describes a BGP peer and how to talk to it.
//
// +kubebuilder:validation:XValidation:rule=`!has(self.holdTime) || !has(self.keepaliveTime) || self.holdTime.size() == 0 || self.keepaliveTime.size() == 0 || !self.holdTime.matches('^(0|([0-9]{1,6}(\\.[0-9]{1,9})?h)?([0-9]{1,6}(\\.[0-9]{1,9})?m)?([0-9]{1,6}(\\.[0-9]{1,9})?s)?([0-9]{1,6}(\\.[0-9]{1,9})?ms)?([0-9]{1,6}(\\.[0-9]{1,9})?(us|µs))?([0-9]{1,6}(\\.[0-9]{1,9})?ns)?)$') || !self.keepaliveTime.matches('^(0|([0-9]{1,6}(\\.[0-9]{1,9})?h)?([0-9]{1,6}(\\.[0-9]{1,9})?m)?([0-9]{1,6}(\\.[0-9]{1,9})?s)?([0-9]{1,6}(\\.[0-9]{1,9})?ms)?([0-9]{1,6}(\\.[0-9]{1,9})?(us|µs))?([0-9]{1,6}(\\.[0-9]{1,9})?ns)?)$') || duration(self.holdTime) == duration('0s') || duration(self.keepaliveTime) < duration(self.holdTime)`,message="keepaliveTime must be less than holdTime",fieldPath=`.keepaliveTime`
// +kubebuilder:validation:XValidation:rule=`!has(self.password) || self.password.size() == 0 || !has(self.passwordSecret) || !has(self.passwordSecret.name) || self.passwordSecret.name.size() == 0`,message="password and passwordSecret are mutually exclusive: set at most one",fieldPath=`.password`
type BGPPeerSpec struct {
	// MyASN is the autonomous system number metalgate uses in the session (the
	// local AS), from 1 to 4294967295.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	MyASN uint32 `json:"myASN"`

	// The autonomous system number of the peer, from 1 to 4294967295. When it
	// equals myASN the session is internal BGP (iBGP), otherwise external
	// (eBGP).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	ASN uint32 `json:"peerASN"`

	// The IPv4 or IPv6 address of the peer.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="peerAddress must be an IPv4 or IPv6 address"
	Address string `json:"peerAddress"`

	// The TCP port of the peer, from 1 to 65535. Defaults to 179.
	// +kubebuilder:default=179
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *uint16 `json:"peerPort,omitempty"`

	// The local address the session is opened from. It must be configured on the
	// nodes that peer; usually combined with nodeSelectors that pick a single
	// node. When unset the node's routing table decides.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="sourceAddress must be an IPv4 or IPv6 address"
	// +optional
	SrcAddress string `json:"sourceAddress,omitempty"`

	// HoldTime is the BGP hold time proposed to the peer: the session is dropped
	// when nothing is heard from the peer for this long. A duration such as
	// "90s" or "1m30s"; must be 0 or between 3s and 65535s. When unset or 0 the
	// speaker proposes GoBGP's default, 90s: GoBGP cannot propose 0. The session
	// still runs without a hold timer (and without keepalives) when the peer
	// proposes 0, since BGP uses the smaller of the two (RFC 4271 4.2).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule=`self.matches('^(0|([0-9]{1,6}(\\.[0-9]{1,9})?h)?([0-9]{1,6}(\\.[0-9]{1,9})?m)?([0-9]{1,6}(\\.[0-9]{1,9})?s)?([0-9]{1,6}(\\.[0-9]{1,9})?ms)?([0-9]{1,6}(\\.[0-9]{1,9})?(us|µs))?([0-9]{1,6}(\\.[0-9]{1,9})?ns)?)$')`,message="holdTime must be a duration such as 90s, 1m30s or 500ms (units h, m, s, ms, us, ns, in that order, each at most once, at most 6 digits before the point)"
	// +kubebuilder:validation:XValidation:rule=`self == '' || !self.matches('^(0|([0-9]{1,6}(\\.[0-9]{1,9})?h)?([0-9]{1,6}(\\.[0-9]{1,9})?m)?([0-9]{1,6}(\\.[0-9]{1,9})?s)?([0-9]{1,6}(\\.[0-9]{1,9})?ms)?([0-9]{1,6}(\\.[0-9]{1,9})?(us|µs))?([0-9]{1,6}(\\.[0-9]{1,9})?ns)?)$') || duration(self) == duration('0s') || duration(self) >= duration('3s')`,message="holdTime must be 0 or at least 3s"
	// +kubebuilder:validation:XValidation:rule=`self == '' || !self.matches('^(0|([0-9]{1,6}(\\.[0-9]{1,9})?h)?([0-9]{1,6}(\\.[0-9]{1,9})?m)?([0-9]{1,6}(\\.[0-9]{1,9})?s)?([0-9]{1,6}(\\.[0-9]{1,9})?ms)?([0-9]{1,6}(\\.[0-9]{1,9})?(us|µs))?([0-9]{1,6}(\\.[0-9]{1,9})?ns)?)$') || duration(self) <= duration('65535s')`,message="holdTime must be at most 65535s"
	// +optional
	HoldTime *metav1.Duration `json:"holdTime,omitempty"`

	// KeepaliveTime is the interval between BGP keepalive messages, a duration
	// such as "30s". It must be less than holdTime when holdTime is set and not
	// 0, and at most 65535s. When unset the BGP implementation's default applies
	// (commonly a third of the hold time).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule=`self.matches('^(0|([0-9]{1,6}(\\.[0-9]{1,9})?h)?([0-9]{1,6}(\\.[0-9]{1,9})?m)?([0-9]{1,6}(\\.[0-9]{1,9})?s)?([0-9]{1,6}(\\.[0-9]{1,9})?ms)?([0-9]{1,6}(\\.[0-9]{1,9})?(us|µs))?([0-9]{1,6}(\\.[0-9]{1,9})?ns)?)$')`,message="keepaliveTime must be a duration such as 90s, 1m30s or 500ms (units h, m, s, ms, us, ns, in that order, each at most once, at most 6 digits before the point)"
	// +kubebuilder:validation:XValidation:rule=`self == '' || !self.matches('^(0|([0-9]{1,6}(\\.[0-9]{1,9})?h)?([0-9]{1,6}(\\.[0-9]{1,9})?m)?([0-9]{1,6}(\\.[0-9]{1,9})?s)?([0-9]{1,6}(\\.[0-9]{1,9})?ms)?([0-9]{1,6}(\\.[0-9]{1,9})?(us|µs))?([0-9]{1,6}(\\.[0-9]{1,9})?ns)?)$') || duration(self) <= duration('65535s')`,message="keepaliveTime must be at most 65535s"
	// +optional
	KeepaliveTime *metav1.Duration `json:"keepaliveTime,omitempty"`

	// ConnectTime is how long to wait between attempts to open the TCP
	// connection to the peer, a duration between 1s and 65535s such as "10s".
	// When unset the BGP implementation's default applies.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule=`self.matches('^(0|([0-9]{1,6}(\\.[0-9]{1,9})?h)?([0-9]{1,6}(\\.[0-9]{1,9})?m)?([0-9]{1,6}(\\.[0-9]{1,9})?s)?([0-9]{1,6}(\\.[0-9]{1,9})?ms)?([0-9]{1,6}(\\.[0-9]{1,9})?(us|µs))?([0-9]{1,6}(\\.[0-9]{1,9})?ns)?)$')`,message="connectTime must be a duration such as 90s, 1m30s or 500ms (units h, m, s, ms, us, ns, in that order, each at most once, at most 6 digits before the point)"
	// +kubebuilder:validation:XValidation:rule=`self == '' || !self.matches('^(0|([0-9]{1,6}(\\.[0-9]{1,9})?h)?([0-9]{1,6}(\\.[0-9]{1,9})?m)?([0-9]{1,6}(\\.[0-9]{1,9})?s)?([0-9]{1,6}(\\.[0-9]{1,9})?ms)?([0-9]{1,6}(\\.[0-9]{1,9})?(us|µs))?([0-9]{1,6}(\\.[0-9]{1,9})?ns)?)$') || (duration(self) >= duration('1s') && duration(self) <= duration('65535s'))`,message="connectTime must be between 1s and 65535s"
	// +optional
	ConnectTime *metav1.Duration `json:"connectTime,omitempty"`

	// RouterID is the BGP router identifier metalgate uses in the session,
	// written as an IPv4 address. When unset each node chooses its own, usually
	// one of its IPv4 addresses.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 4",message="routerID must be an IPv4 address"
	// +optional
	RouterID string `json:"routerID,omitempty"`

	// NodeSelectors limit the nodes that open a session with this peer to those
	// matching at least one selector. When empty, every node running a metalgate
	// speaker peers.
	// +listType=atomic
	// +optional
	NodeSelectors []metav1.LabelSelector `json:"nodeSelectors,omitempty"`

	// Password is the TCP MD5 authentication password of the session (RFC 2385),
	// in clear text. Prefer passwordSecret, which keeps the password out of this
	// object; at most one of the two may be set. At most 80 characters.
	// +kubebuilder:validation:MaxLength=80
	// +optional
	Password string `json:"password,omitempty"`

	// PasswordSecret refers to a Secret of type kubernetes.io/basic-auth whose
	// "password" key holds the TCP MD5 authentication password of the session.
	// Cannot be combined with password.
	// +optional
	PasswordSecret corev1.SecretReference `json:"passwordSecret,omitempty"`

	// BFDProfile names the BFDProfile, in this namespace, whose settings run a
	// BFD session next to the BGP session so that a failed link is noticed
	// within milliseconds. When unset, BFD is not used.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	BFDProfile string `json:"bfdProfile,omitempty"`

	// EnableGracefulRestart announces the BGP graceful restart capability (RFC
	// 4724), so the peer keeps the routes learned from a node while its speaker
	// restarts. Defaults to false.
	// +optional
	EnableGracefulRestart bool `json:"enableGracefulRestart,omitempty"`

	// EBGPMultiHop allows an external BGP peer that is not directly connected,
	// more than one IP hop away. Defaults to false.
	// +optional
	EBGPMultiHop bool `json:"ebgpMultiHop,omitempty"`

	// VRFName is not supported: the speaker opens every session in the nodes'
	// default routing table, and the API server refuses a BGPPeer that names a
	// VRF. The field exists so that a MetalLB manifest fails with a clear
	// message instead of an unknown-field error; leave it unset.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="self.size() == 0",message="vrf is not supported: the speaker opens every session in the nodes' default routing table; remove vrf"
	// +optional
	VRFName string `json:"vrf,omitempty"`
}

// BGPPeerStatus reports the state of the sessions with the peer.
type BGPPeerStatus struct {
	// Nodes has one entry per node that has, or should have, a session with the
	// peer.
	// +listType=map
	// +listMapKey=node
	// +optional
	Nodes []BGPPeerNodeStatus `json:"nodes,omitempty"`

	// Conditions are written by the controller: Valid is True when
	// spec.bfdProfile names an existing, usable BFDProfile (or is unset) and
	// spec.nodeSelectors parse; False with a reason (BFDProfileNotFound,
	// BFDMultiHopUnsupported, InvalidSelector, …) and a message naming the
	// field otherwise. spec.passwordSecret is not checked here: each speaker
	// reads the Secret and reports a missing one in its nodes entry
	// (lastError). Each condition's observedGeneration is the generation the
	// controller checked.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// BGPPeerNodeStatus is the state of the session between one node and the
// peer.
type BGPPeerNodeStatus struct {
	// Node is the name of the node.
	Node string `json:"node"`

	// SessionState is the BGP state of the session: Idle, Connect, Active,
	// OpenSent, OpenConfirm, Established (routes are being exchanged), or
	// Unknown when the speaker could not report it.
	// +kubebuilder:validation:Enum=Idle;Connect;Active;OpenSent;OpenConfirm;Established;Unknown
	SessionState string `json:"sessionState"`

	// PrefixesAdvertised is the number of prefixes the node announces to the
	// peer.
	// +optional
	PrefixesAdvertised int32 `json:"prefixesAdvertised"`

	// LastError is the last error the node met with this peer, empty if none.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// LastTransitionTime is when sessionState last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// +kubebuilder:object:root=true

// BGPPeerList is a list of BGPPeer.
type BGPPeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPPeer `json:"items"`
}
