package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types reported in IPAddressPoolStatus.Conditions.
const (
	// ConditionOverlap is True when the pool shares at least one address with
	// another pool; the condition message names the other pool. An address in
	// several pools is assigned from the first of them by priority, then by
	// name.
	ConditionOverlap = "Overlapping"
	// ConditionValid is True when the controller could parse and use the pool's
	// spec. When False the message says what is wrong.
	ConditionValid = "Valid"
)

// IPAddressPool is a set of addresses that metalgate may assign to Services
// of type LoadBalancer. A Service gets an address from a pool when the pool
// has autoAssign enabled and its serviceAllocation (if any) matches the
// Service, or when the Service asks for the pool by name with the
// metalgate.io/address-pool annotation. How the assigned addresses are
// announced to the network is configured separately, with L2Advertisement
// and BGPAdvertisement objects that select pools.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ippool;ippools,categories=metalgate
// +kubebuilder:printcolumn:name="Auto Assign",type=boolean,JSONPath=`.spec.autoAssign`
// +kubebuilder:printcolumn:name="Avoid Buggy IPs",type=boolean,JSONPath=`.spec.avoidBuggyIPs`
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.spec.addresses`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Overlapping",type=string,JSONPath=`.status.conditions[?(@.type=="Overlapping")].status`
// +kubebuilder:printcolumn:name="Assigned IPv4",type=integer,JSONPath=`.status.assignedIPv4`
// +kubebuilder:printcolumn:name="Assigned IPv6",type=integer,JSONPath=`.status.assignedIPv6`
// +kubebuilder:printcolumn:name="Available IPv4",type=integer,JSONPath=`.status.availableIPv4`,priority=1
// +kubebuilder:printcolumn:name="Available IPv6",type=integer,JSONPath=`.status.availableIPv6`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPAddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec lists the addresses of the pool and which Services may use them.
	Spec IPAddressPoolSpec `json:"spec"`
	// Status is written by the controller: how many addresses are in use and
	// whether the pool is valid and free of overlaps with other pools.
	// +optional
	Status IPAddressPoolStatus `json:"status,omitempty"`
}

// IPAddressPoolSpec lists the addresses of a pool and the rules for handing
// them out.
type IPAddressPoolSpec struct {
	// Addresses are the address blocks of the pool, from 1 to 256 entries. A
	// pool may mix IPv4 and IPv6 blocks. Every address of a block may be
	// assigned, including the first and last of a CIDR; set avoidBuggyIPs to
	// skip IPv4 addresses ending in .0 or .255.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Addresses []AddressRange `json:"addresses"`

	// AutoAssign lets metalgate pick addresses from this pool for any Service
	// that does not ask for a specific pool. Set it to false to reserve the pool
	// for Services that name it with the metalgate.io/address-pool annotation or
	// request one of its addresses explicitly. Defaults to true.
	// +kubebuilder:default=true
	// +optional
	AutoAssign *bool `json:"autoAssign,omitempty"`

	// AvoidBuggyIPs keeps metalgate from assigning IPv4 addresses that end in .0
	// or .255, which some old or broken client equipment mistakes for network or
	// broadcast addresses and drops. It has no effect on IPv6 addresses.
	// Defaults to false.
	// +optional
	AvoidBuggyIPs bool `json:"avoidBuggyIPs,omitempty"`

	// ServiceAllocation restricts the pool to some namespaces or Services and
	// orders it against other pools. When unset the pool serves every Service
	// and has the lowest precedence.
	// +optional
	ServiceAllocation *ServiceAllocation `json:"serviceAllocation,omitempty"`

	// AddressSharing says which Services may share one of the pool's addresses
	// under a metalgate.io/allow-shared-ip key (always with disjoint ports).
	// WithinNamespace, also when unset: only Services of one namespace, so that
	// a Service cannot attach to another namespace's address by using the same
	// key. AcrossNamespaces: Services of any namespaces the pool serves, as
	// MetalLB allows; set it on a pool whose namespaces trust each other (the
	// pool's serviceAllocation.namespaces can narrow who that is). No
	// server-side default, so that MetalLB manifests read back as written.
	// +optional
	AddressSharing AddressSharing `json:"addressSharing,omitempty"`
}

// AddressSharing is the scope of address sharing in a pool.
// +kubebuilder:validation:Enum=WithinNamespace;AcrossNamespaces
type AddressSharing string

// Address sharing scopes.
const (
	// AddressSharingWithinNamespace: only Services of one namespace share an
	// address.
	AddressSharingWithinNamespace AddressSharing = "WithinNamespace"
	// AddressSharingAcrossNamespaces: Services of different namespaces may
	// share an address.
	AddressSharingAcrossNamespaces AddressSharing = "AcrossNamespaces"
)

// Validation of AddressRange. The first rule checks the shape. The second
// and third only look at well-formed ranges and pass anything else (which
// the first rule refuses), so that no rule can fail to evaluate; CEL's ||
// and && decide as soon as one side does.
//
// The third rule decides "end < start" although CEL has no ordering on IP
// addresses. Let q (0-based, from the most significant bit) run over the bit
// positions of the family. end is below start exactly when, for some q, end
// and start agree on their first q bits, end has a 0 at position q and start
// has a 1. With c = cidr(end/(q+1)), that is: c contains the network address
// of start/q (start's first q bits followed by zeros: so end agrees with
// start on q bits and has a 0 at q) and c does not contain start (so start
// has a 1 at q). Equal ends pass. To keep the estimated cost within the API
// server's limits: q runs as byte*8+bit over two short literal lists; the
// prefix suffixes "/0".."/128" come from a literal list, because string(int)
// has no size bound for the cost estimator; and one-element lists with all()
// stand in for variables (CEL in CRDs has no cel.bind) so that start, end
// and ip(start) are computed once per value, not once per bit.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=100
// +kubebuilder:validation:XValidation:rule=`isCIDR(self) || (self.matches('^[^-]+-[^-]+$') && isIP(self.find('^[^-]+').trim()) && isIP(self.find('[^-]+$').trim()))`,message="must be a CIDR such as 192.0.2.0/24 or a range such as 192.0.2.10-192.0.2.20",messageExpression=`'"' + self + '" must be a CIDR such as 192.0.2.0/24 or a range such as 192.0.2.10-192.0.2.20'`
// +kubebuilder:validation:XValidation:rule=`!self.matches('^[^-]+-[^-]+$') || !isIP(self.find('^[^-]+').trim()) || !isIP(self.find('[^-]+$').trim()) || ip(self.find('^[^-]+').trim()).family() == ip(self.find('[^-]+$').trim()).family()`,message="both ends of a range must be of the same family (IPv4 or IPv6)",messageExpression=`'"' + self + '" mixes IPv4 and IPv6: both ends of a range must be of the same family'`
// +kubebuilder:validation:XValidation:rule=`!self.matches('^[^-]+-[^-]+$') || !isIP(self.find('^[^-]+').trim()) || !isIP(self.find('[^-]+$').trim()) || ip(self.find('^[^-]+').trim()).family() != ip(self.find('[^-]+$').trim()).family() || [self.find('^[^-]+').trim()].all(s, [self.find('[^-]+$').trim()].all(e, [ip(s)].all(si, ![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].exists(o, o < (si.family() == 4 ? 4 : 16) && [0, 1, 2, 3, 4, 5, 6, 7].exists(b, [cidr(e + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][o * 8 + b + 1])].all(c, c.containsIP(cidr(s + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][o * 8 + b]).masked().ip()) && !c.containsIP(si)))))))`,message="the start of a range must not be after its end",messageExpression=`'"' + self + '": the start of a range must not be after its end'`

// AddressRange is one block of addresses: a CIDR such as 192.0.2.0/24 or
// 2001:db8::/64 (host bits are ignored: 192.0.2.7/24 means 192.0.2.0/24), or
// an inclusive range of two addresses of the same family, the first not
// after the last, such as 192.0.2.10-192.0.2.20 (spaces around the dash are
// allowed). At most 100 characters.
type AddressRange string

// ServiceAllocation limits which Services may get addresses from a pool and
// sets the pool's precedence. The namespace conditions (namespaces,
// namespaceSelectors) are combined with OR, the Service conditions
// (serviceSelectors) likewise, and the two groups with AND; an empty group
// matches everything.
type ServiceAllocation struct {
	// Priority orders the pools that match a Service: metalgate tries the pool
	// with the lowest non-zero number first, then the others in increasing
	// order, and pools without a priority (0, the default) last. Must not be
	// negative.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Priority int `json:"priority,omitempty"`

	// Namespaces lists namespaces, by name, whose Services may use the pool.
	// +listType=atomic
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelectors select, by label, namespaces whose Services may use the
	// pool.
	// +listType=atomic
	// +optional
	NamespaceSelectors []metav1.LabelSelector `json:"namespaceSelectors,omitempty"`

	// ServiceSelectors select, by label, the Services that may use the pool.
	// +listType=atomic
	// +optional
	ServiceSelectors []metav1.LabelSelector `json:"serviceSelectors,omitempty"`
}

// IPAddressPoolStatus reports how the pool is used. The controller writes
// it; counts are numbers of addresses.
type IPAddressPoolStatus struct {
	// AssignedIPv4 is the number of IPv4 addresses of the pool assigned to
	// Services.
	// +optional
	AssignedIPv4 int64 `json:"assignedIPv4"`
	// AssignedIPv6 is the number of IPv6 addresses of the pool assigned to
	// Services.
	// +optional
	AssignedIPv6 int64 `json:"assignedIPv6"`
	// AvailableIPv4 is the number of IPv4 addresses of the pool not yet
	// assigned.
	// +optional
	AvailableIPv4 int64 `json:"availableIPv4"`
	// AvailableIPv6 is the number of IPv6 addresses of the pool not yet
	// assigned. Very large pools report at most the largest 64-bit integer.
	// +optional
	AvailableIPv6 int64 `json:"availableIPv6"`

	// Conditions describe the state of the pool: Valid (the spec could be used)
	// and Overlapping (the pool shares addresses with another pool, named in the
	// message).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +kubebuilder:object:root=true

// IPAddressPoolList is a list of IPAddressPool.
type IPAddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressPool `json:"items"`
}
