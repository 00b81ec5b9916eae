package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// pools prints each pool's usage per family, from the status the controller writes.
func pools(ctx context.Context, e *env, out io.Writer) error {
	var list v1alpha1.IPAddressPoolList
	if err := e.c.List(ctx, &list, client.InNamespace(e.o.metalgateNamespace)); err != nil {
		return fmt.Errorf("list IPAddressPools in %s: %w", e.o.metalgateNamespace, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "POOL\tFAMILY\tASSIGNED\tAVAILABLE\tAUTO-ASSIGN\tADDRESSES\tPROBLEMS")
	for _, p := range list.Items {
		v4, v6 := families(p.Spec.Addresses)
		auto := p.Spec.AutoAssign == nil || *p.Spec.AutoAssign
		problems := poolProblems(&p)
		if v4 || !v6 {
			fmt.Fprintf(w, "%s\tIPv4\t%d\t%d\t%t\t%s\t%s\n", p.Name, p.Status.AssignedIPv4, p.Status.AvailableIPv4, auto, joinRanges(p.Spec.Addresses, true), problems)
		}
		if v6 {
			fmt.Fprintf(w, "%s\tIPv6\t%d\t%d\t%t\t%s\t%s\n", p.Name, p.Status.AssignedIPv6, p.Status.AvailableIPv6, auto, joinRanges(p.Spec.Addresses, false), problems)
		}
	}
	return w.Flush()
}

func poolProblems(p *v1alpha1.IPAddressPool) string {
	var out []string
	for _, t := range []string{v1alpha1.ConditionOverlap} {
		if c := meta.FindStatusCondition(p.Status.Conditions, t); c != nil && c.Status == "True" {
			out = append(out, c.Reason)
		}
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionValid); c != nil && c.Status == "False" {
		out = append(out, "Invalid")
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
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

func joinRanges(addrs []v1alpha1.AddressRange, v4 bool) string {
	var out []string
	for _, a := range addrs {
		if strings.Contains(string(a), ":") != v4 {
			out = append(out, string(a))
		}
	}
	return strings.Join(out, ",")
}

// allocations prints Service → address → pool → announcer for every LoadBalancer Service.
// The announcer comes from the speakers (as in announcers); "-" when none says it announces
// the address or they cannot be asked.
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
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tSERVICE\tADDRESS\tPOOL\tANNOUNCER\tCLASS\tTRAFFIC-POLICY")
	for _, s := range sortedLoadBalancers(list.Items) {
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
		name := withGateway(s.Name, s.Annotations[contract.AnnotationGateway]) // the Service metalgate made for a Gateway names it
		for _, a := range addrs {
			ann := announcer[canonicalIP(a)]
			if ann == "" {
				ann = unknownAnnouncer
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Namespace, name, a, pool, ann, class, s.Spec.ExternalTrafficPolicy)
		}
	}
	return w.Flush()
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
		if selects(p, a.Spec.IPAddressPools, a.Spec.IPAddressPoolSelectors) {
			return true
		}
	}
	for _, a := range bgp {
		if selects(p, a.Spec.IPAddressPools, a.Spec.IPAddressPoolSelectors) {
			return true
		}
	}
	return false
}

func selects(p *v1alpha1.IPAddressPool, names []string, selectors []metav1.LabelSelector) bool {
	if len(names) == 0 && len(selectors) == 0 {
		return true
	}
	if slices.Contains(names, p.Name) {
		return true
	}
	for i := range selectors {
		sel, err := metav1.LabelSelectorAsSelector(&selectors[i])
		if err == nil && sel.Matches(labels.Set(p.Labels)) {
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
