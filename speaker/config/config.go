package config

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/speaker"
	"github.com/metalgate/metalgate/speaker/bgp"
	"github.com/metalgate/metalgate/speaker/election"
	"github.com/metalgate/metalgate/speaker/layer2"
)

// Snapshot is the listed API objects. Config objects (pools, advertisements, speaker pods) are
// those of the speaker's namespace.
type Snapshot struct {
	Services         []corev1.Service
	EndpointSlices   []discoveryv1.EndpointSlice
	Nodes            []corev1.Node
	Pools            []v1alpha1.IPAddressPool
	L2Advertisements []v1alpha1.L2Advertisement
	// SpeakerPods are the Pods of the speaker DaemonSet: their nodes are the quorum base and
	// their host IPs the memberlist peers.
	SpeakerPods []corev1.Pod
	// BGP configuration of the speaker's namespace.
	BGPPeers          []v1alpha1.BGPPeer
	BGPAdvertisements []v1alpha1.BGPAdvertisement
	BFDProfiles       []v1alpha1.BFDProfile
	Communities       []v1alpha1.Community
	// Passwords maps a Secret name to its "password" key, for BGPPeer passwordSecret.
	Passwords map[string]string
	// PasswordErrors maps a Secret name that could not be read (or has no "password" key) to
	// why; a peer naming it is invalid with that error. A Secret in neither map is reported as
	// missing.
	PasswordErrors map[string]error
}

// Options for Build.
type Options struct {
	// LBClass is the loadBalancerClass served besides Services without one.
	LBClass string
	// MemberlistPort is the port of the peers' memberlist.
	MemberlistPort int
	// Node is this node's name: BGP peers and advertisements are built for it.
	Node string
}

// Build returns the World for s. Invalid parts (a pool address that does not parse, a bad
// selector) are skipped and reported in the returned errors; the rest is still used.
func Build(s Snapshot, o Options) (speaker.World, []error) {
	var errs []error
	l2, perrs := l2Pools(s.Pools, s.L2Advertisements)
	errs = append(errs, perrs...)
	myLabels := nodeLabels(s.Nodes, o.Node)
	bgpPools, berrs := bgpPoolsFor(s, myLabels)
	errs = append(errs, berrs...)

	var w speaker.World
	var bc bgp.Config
	bc.Peers, bc.Invalid = bgpPeers(s, myLabels)
	w.Modes = map[speaker.Mode]any{speaker.ModeBGP: bc}
	for _, p := range bc.Invalid {
		errs = append(errs, fmt.Errorf("BGPPeer %s: %w", p.Name, p.Err))
	}
	var notReady map[string]bool
	w.Nodes, notReady = electionNodes(s.Nodes)
	w.SpeakerAddrs = speakerAddrs(s.SpeakerPods, s.Nodes)
	w.Speakers, w.Peers = liveSpeakers(s.SpeakerPods, notReady, o.MemberlistPort)
	w.VIPs = announcedVIPs(s.Services, readyNodes(s.EndpointSlices), o.LBClass, l2, bgpPools)
	return w, errs
}

// nodeLabels are the labels of the node named name (nil when it is not listed).
func nodeLabels(nodes []corev1.Node, name string) map[string]string {
	var out map[string]string
	for _, n := range nodes {
		if n.Name == name {
			out = n.Labels
		}
	}
	return out
}

// electionNodes are the candidates of the election, sorted by name, each marked excluded when
// it must not announce (excluded); notReady holds the nodes whose Ready condition is present
// and not True (a node without the condition counts as ready).
func electionNodes(nodes []corev1.Node) (out []election.Node, notReady map[string]bool) {
	notReady = map[string]bool{}
	for _, n := range nodes {
		out = append(out, election.Node{Name: n.Name, Labels: n.Labels, Excluded: excluded(n)})
		if c := nodeCondition(n, corev1.NodeReady); c != nil && c.Status != corev1.ConditionTrue {
			notReady[n.Name] = true
		}
	}
	slices.SortFunc(out, func(a, b election.Node) int { return cmp.Compare(a.Name, b.Name) })
	return out, notReady
}

// liveSpeakers are the nodes running a speaker Pod that is scheduled, not terminating, not
// ended and on a ready node (the quorum base), and those Pods' memberlist addresses
// (hostIP:port), each sorted and without duplicates.
func liveSpeakers(pods []corev1.Pod, notReady map[string]bool, port int) (nodes, peers []string) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Spec.NodeName == "" || notReady[p.Spec.NodeName] ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		nodes = append(nodes, p.Spec.NodeName)
		if p.Status.HostIP != "" {
			peers = append(peers, net.JoinHostPort(p.Status.HostIP, strconv.Itoa(port)))
		}
	}
	slices.Sort(nodes)
	slices.Sort(peers)
	return slices.Compact(nodes), slices.Compact(peers)
}

// servedBy reports whether svc is a LoadBalancer of lbClass or of no class.
func servedBy(svc *corev1.Service, lbClass string) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	c := svc.Spec.LoadBalancerClass
	return c == nil || *c == lbClass
}

// announcedVIPs are the VIPs to announce, sorted by address then mode: every address in the
// status of a Service served for lbClass, once per mode whose pools hold it (BGP by bgpPools,
// layer 2 by l2), with the ready endpoints (ready, by Service key) of every Service sharing it.
// Services are read in namespace/name order, so the first Service showing a VIP names it.
func announcedVIPs(services []corev1.Service, ready map[string]map[string]bool, lbClass string, l2 []*l2Pool, bgpPools []*bgpPool) []speaker.VIP {
	services = slices.Clone(services)
	slices.SortFunc(services, func(a, b corev1.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	byL2 := map[netip.Addr]*speaker.VIP{}
	byBGP := map[netip.Addr]*speaker.VIP{}
	for _, svc := range services {
		if !servedBy(&svc, lbClass) {
			continue
		}
		key := svc.Namespace + "/" + svc.Name
		eps := ready[key]
		local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
		annotated := svc.Annotations[contract.AnnotationAllocatedFromPool]
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			vip, err := netip.ParseAddr(ing.IP)
			if err != nil {
				continue // a hostname ingress or garbage: nothing to announce
			}
			vip = vip.Unmap()
			if bp := poolOf(annotated, vip, bgpPools); bp != nil {
				v := byBGP[vip]
				if v == nil {
					v = newVIP(vip, key, bp.name, bp.nodeSelectors, speaker.ModeBGP, bgp.Params{Advertisements: bp.advertisements(vip)})
					byBGP[vip] = v
				}
				addEndpoints(v, eps, local)
			}
			if pool := poolOf(annotated, vip, l2); pool != nil {
				v := byL2[vip]
				if v == nil {
					v = newVIP(vip, key, pool.name, pool.nodeSelectors, speaker.ModeLayer2, layer2.Params{Interfaces: pool.interfaces})
					byL2[vip] = v
				}
				addEndpoints(v, eps, local)
			}
		}
	}
	var out []speaker.VIP
	for _, v := range byL2 {
		out = append(out, *v)
	}
	for _, v := range byBGP {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b speaker.VIP) int {
		return cmp.Or(a.VIP.Compare(b.VIP), cmp.Compare(a.Mode, b.Mode))
	})
	return out
}

// newVIP is vip of the Service key, from pool, announced in mode with params by the nodes
// that sel selects (nil: every node); its endpoints are added after (addEndpoints).
func newVIP(vip netip.Addr, key, pool string, sel []labels.Selector, mode speaker.Mode, params any) *speaker.VIP {
	return &speaker.VIP{
		Request: election.Request{VIP: vip, NodeSelectors: sel, ReadyNodes: map[string]bool{}},
		Mode:    mode,
		Service: key,
		Pool:    pool,
		Params:  params,
	}
}

// speakerAddrs returns, for every node with a speaker Pod that has not ended (terminating ones
// included: they still announce their leave), the node's InternalIPs and the Pod's host IPs
// (the kubelet's choice among the node's addresses, the address the speaker binds to), sorted.
// These are the memberlist members the speakers admit (invariant 11: only speakers speak).
func speakerAddrs(pods []corev1.Pod, nodes []corev1.Node) map[string][]netip.Addr {
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	out := map[string][]netip.Addr{}
	add := func(node, s string) {
		if ip, err := netip.ParseAddr(s); err == nil {
			out[node] = append(out[node], ip.Unmap())
		}
	}
	for _, p := range pods {
		name := p.Spec.NodeName
		if name == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, seen := out[name]; !seen {
			out[name] = nil
			if n := byName[name]; n != nil {
				for _, a := range n.Status.Addresses {
					if a.Type == corev1.NodeInternalIP {
						add(name, a.Address)
					}
				}
			}
		}
		add(name, p.Status.HostIP)
		for _, h := range p.Status.HostIPs {
			add(name, h.IP)
		}
	}
	for name, ips := range out {
		slices.SortFunc(ips, netip.Addr.Compare)
		out[name] = slices.Compact(ips)
		if len(out[name]) == 0 {
			delete(out, name) // no address known: nothing to admit
		}
	}
	return out
}

// addEndpoints adds the ready endpoints of one Service to v. A shared address is announced for
// all its Services: any ready endpoint counts, and if one Service is Local the announcing nodes
// must hold one of its ready endpoints (Cluster Services sharing it are reachable from any node).
func addEndpoints(v *speaker.VIP, eps map[string]bool, local bool) {
	v.AnyReady = v.AnyReady || len(eps) > 0
	if local {
		v.Local = true
		for n := range eps {
			v.ReadyNodes[n] = true
		}
	}
}

// l2Pool is a pool announced at layer 2 with the restrictions of its advertisements.
type l2Pool struct {
	addressPool
	nodeSelectors []labels.Selector // nil: every node
	interfaces    []string          // nil: automatic
}

// addressPool is what each announcement mode keeps of an IPAddressPool to find the pool of a
// VIP: its name and its address ranges.
type addressPool struct {
	name   string
	ranges []allocator.Range
}

func (p *addressPool) contains(a netip.Addr) bool {
	return slices.ContainsFunc(p.ranges, func(r allocator.Range) bool {
		return r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
	})
}

func (p *addressPool) pool() *addressPool { return p }

// l2Pools returns the pools selected by at least one L2Advertisement, sorted by name.
//
// When several advertisements select a pool, their restrictions add up (as the API documents):
// the node selectors of all of them are ORed, and if any of them has no node selector every node
// may announce; likewise the interfaces are the union, and if any advertisement names none the
// interface is chosen automatically.
func l2Pools(pools []v1alpha1.IPAddressPool, ads []v1alpha1.L2Advertisement) ([]*l2Pool, []error) {
	var errs []error
	var out []*l2Pool
	sorted := slices.Clone(pools)
	slices.SortFunc(sorted, func(a, b v1alpha1.IPAddressPool) int { return cmp.Compare(a.Name, b.Name) })
	for _, pool := range sorted {
		var sel []v1alpha1.L2Advertisement
		for _, ad := range ads {
			ok, err := selectsPool(ad.Spec.IPAddressPools, ad.Spec.IPAddressPoolSelectors, pool)
			if err != nil {
				errs = append(errs, fmt.Errorf("L2Advertisement %s: %w", ad.Name, err))
				continue
			}
			if ok {
				sel = append(sel, ad)
			}
		}
		if len(sel) == 0 {
			continue
		}
		p := &l2Pool{addressPool: addressPool{name: pool.Name}}
		for _, a := range pool.Spec.Addresses {
			r, err := allocator.ParseRange(string(a))
			if err != nil {
				errs = append(errs, fmt.Errorf("IPAddressPool %s: %w", pool.Name, err))
				continue
			}
			p.ranges = append(p.ranges, r)
		}
		allNodes, autoIf := false, false
		for _, ad := range sel {
			if len(ad.Spec.NodeSelectors) == 0 {
				allNodes = true
			}
			for _, ls := range ad.Spec.NodeSelectors {
				s, err := metav1.LabelSelectorAsSelector(&ls)
				if err != nil {
					errs = append(errs, fmt.Errorf("L2Advertisement %s: node selector: %w", ad.Name, err))
					continue
				}
				p.nodeSelectors = append(p.nodeSelectors, s)
			}
			if len(ad.Spec.Interfaces) == 0 {
				autoIf = true
			}
			p.interfaces = append(p.interfaces, ad.Spec.Interfaces...)
		}
		if allNodes {
			p.nodeSelectors = nil
		}
		if autoIf {
			p.interfaces = nil
		} else {
			slices.Sort(p.interfaces)
			p.interfaces = slices.Compact(p.interfaces)
		}
		out = append(out, p)
	}
	return out, errs
}

func selectsPool(names []string, sels []metav1.LabelSelector, pool v1alpha1.IPAddressPool) (bool, error) {
	if len(names) == 0 && len(sels) == 0 {
		return true, nil
	}
	if slices.Contains(names, pool.Name) {
		return true, nil
	}
	for _, ls := range sels {
		s, err := metav1.LabelSelectorAsSelector(&ls)
		if err != nil {
			return false, fmt.Errorf("pool selector: %w", err)
		}
		if s.Matches(labels.Set(pool.Labels)) {
			return true, nil
		}
	}
	return false, nil
}

// poolOf returns the pool of vip among the pools one mode announces (layer 2 or BGP): the pool
// the controller recorded (annotated) when that mode announces it and it holds vip, else the
// first pool, by name, that holds vip; nil when none does.
func poolOf[P interface{ pool() *addressPool }](annotated string, vip netip.Addr, pools []P) P {
	if annotated != "" {
		for _, p := range pools {
			if a := p.pool(); a.name == annotated && a.contains(vip) {
				return p
			}
		}
	}
	for _, p := range pools {
		if p.pool().contains(vip) {
			return p
		}
	}
	var none P
	return none
}

// readyNodes maps "namespace/service" to the nodes holding at least one ready endpoint. A nil
// Ready condition means ready (discovery/v1 API: "unknown state ... interpreted as ready").
func readyNodes(slices []discoveryv1.EndpointSlice) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, es := range slices {
		svc := es.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		key := es.Namespace + "/" + svc
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			node := ""
			if ep.NodeName != nil {
				node = *ep.NodeName
			}
			if out[key] == nil {
				out[key] = map[string]bool{}
			}
			out[key][node] = true // "" still counts for AnyReady
		}
	}
	return out
}

func excluded(n corev1.Node) bool {
	if _, ok := n.Labels[contract.LabelExcludeFromLB]; ok {
		return true
	}
	c := nodeCondition(n, corev1.NodeNetworkUnavailable)
	return c != nil && c.Status == corev1.ConditionTrue
}

func nodeCondition(n corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
