package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/refcheck"
)

// poolItem is one family of one pool: a row of pools.
type poolItem struct {
	Pool       string   `json:"pool"`
	Family     string   `json:"family"` // IPv4 or IPv6
	Assigned   int64    `json:"assigned"`
	Available  int64    `json:"available"`
	AutoAssign bool     `json:"autoAssign"`
	Addresses  []string `json:"addresses"`
	// Problems are Overlap reasons and Invalid, from the pool's conditions; empty: none.
	Problems []string `json:"problems"`
	// Wide: how the pool allocates.
	AvoidBuggyIPs  bool   `json:"avoidBuggyIPs"`
	AddressSharing string `json:"addressSharing"` // WithinNamespace unless set
	Priority       int    `json:"priority"`       // serviceAllocation.priority; 0 unset
}

// poolColumns are pools' table columns.
func poolColumns() []column[poolItem] {
	return []column[poolItem]{
		{header: "POOL", cell: func(r poolItem) string { return r.Pool }},
		{header: "FAMILY", cell: func(r poolItem) string { return r.Family }},
		{header: "ASSIGNED", cell: func(r poolItem) string { return fmt.Sprint(r.Assigned) }},
		{header: "AVAILABLE", cell: func(r poolItem) string { return fmt.Sprint(r.Available) }},
		{header: "AUTO-ASSIGN", cell: func(r poolItem) string { return fmt.Sprint(r.AutoAssign) }},
		{header: "ADDRESSES", cell: func(r poolItem) string { return strings.Join(r.Addresses, ",") }},
		{header: "PROBLEMS", cell: func(r poolItem) string { return dashJoin(r.Problems) }},
		{header: "AVOID-BUGGY-IPS", wide: true, cell: func(r poolItem) string { return fmt.Sprint(r.AvoidBuggyIPs) }},
		{header: "ADDRESS-SHARING", wide: true, cell: func(r poolItem) string { return r.AddressSharing }},
		{header: "PRIORITY", wide: true, cell: func(r poolItem) string { return fmt.Sprint(r.Priority) }},
	}
}

// pools prints each pool's usage per family, from the status the controller writes.
func pools(ctx context.Context, e *env, out io.Writer) error {
	var list v1alpha1.IPAddressPoolList
	if err := e.c.List(ctx, &list, client.InNamespace(e.o.metalgateNamespace)); err != nil {
		return fmt.Errorf("list IPAddressPools in %s: %w", e.o.metalgateNamespace, err)
	}
	return printList(out, e.o.output, "PoolList", poolItems(list.Items), poolColumns())
}

// poolItems are the rows of pools, by name, IPv4 before IPv6.
func poolItems(pools []v1alpha1.IPAddressPool) []poolItem {
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	var items []poolItem
	for _, p := range pools {
		v4, v6 := families(p.Spec.Addresses)
		row := poolItem{
			Pool:           p.Name,
			AutoAssign:     p.Spec.AutoAssign == nil || *p.Spec.AutoAssign,
			Problems:       poolProblems(&p),
			AvoidBuggyIPs:  p.Spec.AvoidBuggyIPs,
			AddressSharing: string(p.Spec.AddressSharing),
		}
		if row.AddressSharing == "" {
			row.AddressSharing = "WithinNamespace"
		}
		if p.Spec.ServiceAllocation != nil {
			row.Priority = p.Spec.ServiceAllocation.Priority
		}
		if v4 || !v6 {
			r := row
			r.Family, r.Assigned, r.Available, r.Addresses = "IPv4", p.Status.AssignedIPv4, p.Status.AvailableIPv4, ranges(p.Spec.Addresses, true)
			items = append(items, r)
		}
		if v6 {
			r := row
			r.Family, r.Assigned, r.Available, r.Addresses = "IPv6", p.Status.AssignedIPv6, p.Status.AvailableIPv6, ranges(p.Spec.Addresses, false)
			items = append(items, r)
		}
	}
	return items
}

func poolProblems(p *v1alpha1.IPAddressPool) []string {
	out := []string{}
	for _, t := range []string{v1alpha1.ConditionOverlap} {
		if c := meta.FindStatusCondition(p.Status.Conditions, t); c != nil && c.Status == "True" {
			out = append(out, c.Reason)
		}
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionValid); c != nil && c.Status == "False" {
		out = append(out, "Invalid")
	}
	return out
}

// families reports whether the pool has IPv4 and IPv6 blocks.
func families(addrs []v1alpha1.AddressRange) (v4, v6 bool) {
	for _, a := range addrs {
		if strings.Contains(string(a), ":") {
			v6 = true
		} else {
			v4 = true
		}
	}
	return v4, v6
}

// ranges are the blocks of addrs of one family.
func ranges(addrs []v1alpha1.AddressRange, v4 bool) []string {
	out := []string{}
	for _, a := range addrs {
		if strings.Contains(string(a), ":") != v4 {
			out = append(out, string(a))
		}
	}
	return out
}

// allocationItem is one address of one LoadBalancer Service: a row of allocations.
type allocationItem struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	// Gateway is the Gateway (namespace/name) the Service was made for; "" for others.
	Gateway string `json:"gateway,omitempty"`
	Address string `json:"address"` // "<pending>" until the Service has one
	Pool    string `json:"pool"`    // "-" when no pool annotation names one
	// Announcer is "layer2 NODE" or "bgp NODE,..." as the speakers say; "-" unknown.
	Announcer             string `json:"announcer"`
	LoadBalancerClass     string `json:"loadBalancerClass"` // "-" unset
	ExternalTrafficPolicy string `json:"externalTrafficPolicy"`
	// Wide: the Service's ports ("80/TCP") and IP families.
	Ports      []string `json:"ports"`
	IPFamilies []string `json:"ipFamilies"`
}

// allocationColumns are allocations' table columns.
func allocationColumns() []column[allocationItem] {
	return []column[allocationItem]{
		{header: "NAMESPACE", cell: func(r allocationItem) string { return r.Namespace }},
		{header: "SERVICE", cell: func(r allocationItem) string { return withGateway(r.Service, r.Gateway) }},
		{header: "ADDRESS", cell: func(r allocationItem) string { return r.Address }},
		{header: "POOL", cell: func(r allocationItem) string { return r.Pool }},
		{header: "ANNOUNCER", cell: func(r allocationItem) string { return r.Announcer }},
		{header: "CLASS", cell: func(r allocationItem) string { return r.LoadBalancerClass }},
		{header: "TRAFFIC-POLICY", cell: func(r allocationItem) string { return r.ExternalTrafficPolicy }},
		{header: "PORTS", wide: true, cell: func(r allocationItem) string { return dashJoin(r.Ports) }},
		{header: "IP-FAMILIES", wide: true, cell: func(r allocationItem) string { return dashJoin(r.IPFamilies) }},
	}
}

// allocations prints Service → address → pool → announcer for every LoadBalancer Service
// (of -n's namespace, else of all). The announcer comes from the speakers (as in
// announcers); "-" when none says it announces the address or they cannot be asked.
func allocations(ctx context.Context, e *env, out io.Writer) error {
	var list corev1.ServiceList
	if err := e.c.List(ctx, &list, client.InNamespace(e.o.objectNamespace())); err != nil {
		return fmt.Errorf("list Services: %w", err)
	}
	announcer := map[string]string{}
	if answers, err := askSpeakers(ctx, e); err == nil {
		rows, _ := announcerView(answers, nil, nil)
		announcer = announcerOf(rows)
	}
	return printList(out, e.o.output, "AllocationList", allocationItems(list.Items, announcer), allocationColumns())
}

// allocationItems are the rows of allocations, by namespace and name, one per address;
// announcer maps canonical addresses to who announces them.
func allocationItems(services []corev1.Service, announcer map[string]string) []allocationItem {
	var items []allocationItem
	for _, s := range sortedLoadBalancers(services) {
		class := "-"
		if s.Spec.LoadBalancerClass != nil {
			class = *s.Spec.LoadBalancerClass
		}
		addrs := ingressIPs(&s)
		if len(addrs) == 0 {
			addrs = []string{"<pending>"}
		}
		pool := s.Annotations[contract.AnnotationAllocatedFromPool]
		if pool == "" {
			pool = "-"
		}
		ports := []string{}
		for _, p := range s.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
		families := []string{}
		for _, f := range s.Spec.IPFamilies {
			families = append(families, string(f))
		}
		for _, a := range addrs {
			ann := announcer[canonicalIP(a)]
			if ann == "" {
				ann = unknownAnnouncer
			}
			items = append(items, allocationItem{
				Namespace: s.Namespace, Service: s.Name, Gateway: s.Annotations[contract.AnnotationGateway],
				Address: a, Pool: pool, Announcer: ann, LoadBalancerClass: class,
				ExternalTrafficPolicy: string(s.Spec.ExternalTrafficPolicy), Ports: ports, IPFamilies: families,
			})
		}
	}
	return items
}

func sortedLoadBalancers(items []corev1.Service) []corev1.Service {
	var out []corev1.Service
	for _, s := range items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func ingressIPs(s *corev1.Service) []string {
	var out []string
	for _, i := range s.Status.LoadBalancer.Ingress {
		if i.IP != "" {
			out = append(out, i.IP)
		}
	}
	return out
}

// advertised reports whether any advertisement selects the pool: by name, by label selector,
// or by selecting nothing in particular (all pools).
func advertised(p *v1alpha1.IPAddressPool, l2 []v1alpha1.L2Advertisement, bgp []v1alpha1.BGPAdvertisement) bool {
	for _, a := range l2 {
		if refcheck.SelectsPool(p, a.Spec.IPAddressPools, a.Spec.IPAddressPoolSelectors) {
			return true
		}
	}
	for _, a := range bgp {
		if refcheck.SelectsPool(p, a.Spec.IPAddressPools, a.Spec.IPAddressPoolSelectors) {
			return true
		}
	}
	return false
}

func inAnyPool(a netip.Addr, pools []v1alpha1.IPAddressPool) bool {
	for _, p := range pools {
		for _, s := range p.Spec.Addresses {
			r, err := allocator.ParseRange(string(s))
			if err == nil && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0 {
				return true
			}
		}
	}
	return false
}
