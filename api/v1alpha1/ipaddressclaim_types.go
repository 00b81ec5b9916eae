package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// IPAddressClaim records that one address is assigned. It is cluster-scoped and named after the
// address (v4-100-64-0-1, v6-<32 hex digits>), so the API server itself guarantees that one address has one claim:
// creating a claim is atomic, and the loser of a race gets AlreadyExists and tries another
// address. Addresses shared by key list every holder. The controller writes these objects; users
// read them (kubectl get ipaddressclaims) and should not edit them.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ipclaim;ipclaims,categories=metalgate
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name="Holder",type=string,JSONPath=`.spec.holders[0].name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPAddressClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAddressClaimSpec `json:"spec"`
}

// IPAddressClaimSpec names the address, the pool it came from and the Services that hold it.
type IPAddressClaimSpec struct {
	// Address is the claimed address in canonical form.
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="address must be an IP address"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="address is immutable"
	// +kubebuilder:validation:MaxLength=45
	Address string `json:"address"`

	// Pool is the IPAddressPool the address was assigned from.
	// +optional
	Pool string `json:"pool,omitempty"`

	// Holders are the Services that hold the address. More than one only when they share it by
	// key (metalgate.io/allow-shared-ip) on disjoint ports.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Holders []ClaimHolder `json:"holders"`
}

// ClaimHolder is one Service that holds a claimed address, with what decides whether another
// Service may share it.
type ClaimHolder struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`

	// SharingKey is the Service's metalgate.io/allow-shared-ip annotation, empty if none.
	// +optional
	SharingKey string `json:"sharingKey,omitempty"`
	// Ports are the Service's ports.
	// +optional
	// +listType=atomic
	Ports []ClaimPort `json:"ports,omitempty"`
	// BackendKey identifies the Service's endpoints when externalTrafficPolicy is Local (its
	// selector), empty otherwise: Services sharing an address with policy Local must agree on it.
	// +optional
	BackendKey string `json:"backendKey,omitempty"`
	// Releasing is set while a controller withdraws the address from this Service: it first
	// marks the holder, then makes sure the Service's status no longer shows the address (a
	// status write, which also fences off any status write prepared before the mark), and only
	// then removes the holder. No controller writes an address into a Service's status while
	// the Service's holder entry is releasing (docs/architecture.md, "Why two controllers
	// cannot double-assign").
	// +optional
	Releasing bool `json:"releasing,omitempty"`
}

// ClaimPort is one port of a holder.
type ClaimPort struct {
	Protocol corev1.Protocol `json:"protocol"`
	Port     int32           `json:"port"`
}

// +kubebuilder:object:root=true

// IPAddressClaimList is a list of IPAddressClaim.
type IPAddressClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressClaim `json:"items"`
}
