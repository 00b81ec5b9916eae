package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
)

// speakerLabels select the speaker pods: the DaemonSet selector of config/speaker.
func speakerLabels() client.MatchingLabels {
	return client.MatchingLabels{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "speaker"}
}

// How the allocations table shows announcers (announcerOf): "-" when no speaker announces the
// address, and a count instead of names past a few nodes.
const (
	unknownAnnouncer     = "-"
	maxAnnouncerListSize = 4
)

// speakerAnswer is what one speaker pod said, or why it said nothing.
type speakerAnswer struct {
	pod, node string
	got       *contract.Announcements
	err       error
}

// askSpeakers lists the speaker pods in namespace and asks each for its announcements.
// Only listing the pods can fail; a speaker that does not answer is an answer with err.
func askSpeakers(ctx context.Context, e *env) ([]speakerAnswer, error) {
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods, client.InNamespace(e.o.metalgateNamespace), speakerLabels()); err != nil {
		return nil, fmt.Errorf("list speaker pods in %s: %w", e.o.metalgateNamespace, err)
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Spec.NodeName < pods.Items[j].Spec.NodeName })
	var header http.Header
	if len(pods.Items) > 0 && e.speakerTokens != nil {
		tok, err := e.speakerTokens.token(ctx, e.o.metalgateNamespace)
		if err != nil {
			return nil, err
		}
		header = http.Header{"Authorization": {"Bearer " + tok}}
	}
	out := make([]speakerAnswer, len(pods.Items))
	parallel(len(pods.Items), func(i int) { out[i] = askSpeaker(ctx, e.pods, &pods.Items[i], header) })
	return out, nil
}

// askSpeaker asks one speaker pod for its announcements, sending header (the bearer token).
func askSpeaker(ctx context.Context, pods podProxy, p *corev1.Pod, header http.Header) speakerAnswer {
	a := speakerAnswer{pod: p.Name, node: p.Spec.NodeName}
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		a.err = fmt.Errorf("pod is %s", podState(p))
		return a
	}
	code, body, err := pods.Get(ctx, p.Namespace, p.Name, contract.SpeakerMetricsPort, contract.DebugAnnouncementsPath, nil, header)
	switch {
	case err != nil:
		a.err = err
	case code != http.StatusOK:
		a.err = fmt.Errorf("GET %s: HTTP %d: %s", contract.DebugAnnouncementsPath, code, shortBody(body))
	default:
		var na contract.Announcements
		if err := json.Unmarshal(body, &na); err != nil {
			a.err = fmt.Errorf("decode %s: %w", contract.DebugAnnouncementsPath, err)
			return a
		}
		if na.Node == "" {
			na.Node = p.Spec.NodeName
		}
		a.node, a.got = na.Node, &na
	}
	return a
}

// maxParallel bounds the pods asked at once (one port-forward each through the API server).
const maxParallel = 8

// parallel runs f(0..n-1), at most maxParallel at a time, and returns when all are done.
func parallel(n int, f func(i int)) {
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

func podState(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "terminating"
	}
	return strings.ToLower(string(p.Status.Phase))
}

// announcerRow is one VIP of one Service in one mode, with every node announcing it.
type announcerRow struct {
	vip, service, mode string
	// gateway is the Gateway (namespace/name) whose Service this is (annotation
	// metalgate.io/gateway on the Service); "" for any other Service.
	gateway string
	nodes   []string
	via     []string // interfaces (layer2) or BGPPeers (bgp), sorted and unique
}

// announcerView joins the speakers' answers into rows, sorted by VIP, each with the Gateway its
// Service serves (from services), and lists what looks wrong: a layer-2 VIP answered by two
// nodes, a metalgate VIP announced by no node, speakers that did not answer.
func announcerView(answers []speakerAnswer, services []corev1.Service, pools []v1alpha1.IPAddressPool) (rows []announcerRow, warnings []string) {
	gatewayOf := map[string]string{} // Service namespace/name → Gateway namespace/name
	for _, s := range services {
		if gw := s.Annotations[contract.AnnotationGateway]; gw != "" {
			gatewayOf[s.Namespace+"/"+s.Name] = gw
		}
	}
	byKey := map[[3]string]*announcerRow{}
	announced := map[string]bool{}
	silent := 0
	for _, a := range answers {
		if a.got == nil {
			silent++
			warnings = append(warnings, fmt.Sprintf("speaker %s on node %s did not answer: %v", a.pod, a.node, a.err))
			continue
		}
		for _, an := range a.got.Announcements {
			vip := canonicalIP(an.VIP)
			k := [3]string{vip, an.Service, an.Mode}
			r := byKey[k]
			if r == nil {
				r = &announcerRow{vip: vip, service: an.Service, mode: an.Mode, gateway: gatewayOf[an.Service]}
				byKey[k] = r
			}
			r.nodes = appendUnique(r.nodes, a.got.Node)
			r.via = appendUnique(r.via, an.Where...)
			announced[vip] = true
		}
	}
	for _, r := range byKey {
		sort.Strings(r.nodes)
		sort.Strings(r.via)
		rows = append(rows, *r)
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.vip != b.vip {
			return ipLess(a.vip, b.vip)
		}
		if a.service != b.service {
			return a.service < b.service
		}
		return a.mode < b.mode
	})
	for _, r := range rows {
		if r.mode == contract.ModeLayer2 && len(r.nodes) > 1 {
			warnings = append(warnings, fmt.Sprintf("VIP %s (%s) is announced by layer 2 from %d nodes at once (%s): clients flap between them; do the speakers reach each other (memberlist port 7946)?",
				r.vip, withGateway(r.service, r.gateway), len(r.nodes), strings.Join(r.nodes, ", ")))
		}
	}
	var missing []string
	for _, s := range sortedLoadBalancers(services) {
		for _, ip := range ingressIPs(&s) {
			a, err := netip.ParseAddr(ip)
			if err != nil || !inAnyPool(a, pools) || announced[a.String()] {
				continue
			}
			msg := fmt.Sprintf("VIP %s of Service %s is announced by no node", a, withGateway(s.Namespace+"/"+s.Name, s.Annotations[contract.AnnotationGateway]))
			if silent > 0 {
				msg += fmt.Sprintf(" that answered (%d speaker(s) did not)", silent)
			}
			missing = append(missing, msg+"; kubectl metalgate check, and the Service's events, say why")
		}
	}
	return rows, append(warnings, missing...)
}

// announcers prints, per VIP, who announces it, from the speakers themselves.
func announcers(ctx context.Context, e *env, out io.Writer) error {
	answers, err := askSpeakers(ctx, e)
	if err != nil {
		return err
	}
	var svcs corev1.ServiceList
	if err := e.c.List(ctx, &svcs); err != nil {
		return fmt.Errorf("list Services: %w", err)
	}
	var pools v1alpha1.IPAddressPoolList
	if err := e.c.List(ctx, &pools, client.InNamespace(e.o.metalgateNamespace)); err != nil {
		return fmt.Errorf("list IPAddressPools in %s: %w", e.o.metalgateNamespace, err)
	}
	rows, warnings := announcerView(answers, svcs.Items, pools.Items)
	if ns := e.o.objectNamespace(); ns != "" { // -n: that namespace's VIPs; warnings stay cluster-wide
		rows = slices.DeleteFunc(rows, func(r announcerRow) bool { return !strings.HasPrefix(r.service, ns+"/") })
	}
	if len(answers) == 0 {
		warnings = append([]string{fmt.Sprintf("no speaker pods in namespace %s (label app.kubernetes.io/component=speaker)", e.o.metalgateNamespace)}, warnings...)
	}
	return writeAnnouncers(out, e.stderr, e.o.output, announcerItems(rows, pools.Items), warnings)
}

// announcerItem is one VIP of one Service in one mode: a row of announcers.
type announcerItem struct {
	VIP     string `json:"vip"`
	Service string `json:"service"` // namespace/name
	// Gateway is the Gateway (namespace/name) the Service was made for; "" for others.
	Gateway string   `json:"gateway,omitempty"`
	Mode    string   `json:"mode"`  // layer2 or bgp
	Nodes   []string `json:"nodes"` // the nodes announcing it
	// Via are the interfaces (layer2) or BGPPeers (bgp) it is announced on.
	Via []string `json:"via"`
	// Pool is the pool the VIP is in (wide); "" for none.
	Pool string `json:"pool"`
}

// announcerColumns are announcers' table columns.
func announcerColumns() []column[announcerItem] {
	return []column[announcerItem]{
		{header: "VIP", cell: func(r announcerItem) string { return r.VIP }},
		{header: "SERVICE", cell: func(r announcerItem) string { return r.Service }},
		{header: "GATEWAY", cell: func(r announcerItem) string { return orDash(r.Gateway) }},
		{header: "MODE", cell: func(r announcerItem) string { return r.Mode }},
		{header: "NODE(S)", cell: func(r announcerItem) string { return dashJoin(r.Nodes) }},
		{header: "INTERFACE/PEERS", cell: func(r announcerItem) string { return dashJoin(r.Via) }},
		{header: "POOL", wide: true, cell: func(r announcerItem) string { return orDash(r.Pool) }},
	}
}

// announcerItems are rows as announcers prints them, each with the pool (of pools) its VIP is in.
func announcerItems(rows []announcerRow, pools []v1alpha1.IPAddressPool) []announcerItem {
	items := make([]announcerItem, 0, len(rows))
	for _, r := range rows {
		it := announcerItem{VIP: r.vip, Service: r.service, Gateway: r.gateway, Mode: r.mode, Nodes: r.nodes, Via: r.via}
		if it.Nodes == nil {
			it.Nodes = []string{}
		}
		if it.Via == nil {
			it.Via = []string{}
		}
		if a, err := netip.ParseAddr(r.vip); err == nil {
			for _, p := range pools {
				if inAnyPool(a, []v1alpha1.IPAddressPool{p}) {
					it.Pool = p.Name
					break
				}
			}
		}
		items = append(items, it)
	}
	return items
}

// writeAnnouncers prints items in format, then the warnings: after the table as
// "warning: ..." lines, or on warn (standard error) for -o json and yaml, so that standard
// output stays one document.
func writeAnnouncers(out, warn io.Writer, format outputFormat, items []announcerItem, warnings []string) error {
	if err := printList(out, format, "AnnouncerList", items, announcerColumns()); err != nil {
		return err
	}
	if format == outputJSON || format == outputYAML {
		out = warn
	}
	for _, m := range warnings {
		fmt.Fprintf(out, "warning: %s\n", m)
	}
	return nil
}

// announcerOf summarises rows per VIP for the allocations table: "layer2 node1" or
// "bgp node1,node2,node3" (past a few nodes, "bgp 5 nodes").
func announcerOf(rows []announcerRow) map[string]string {
	out := map[string]string{}
	for _, r := range rows {
		nodes := strings.Join(r.nodes, ",")
		if len(r.nodes) > maxAnnouncerListSize {
			nodes = fmt.Sprintf("%d nodes", len(r.nodes))
		}
		s := r.mode + " " + nodes
		if prev := out[r.vip]; prev != "" && prev != s {
			s = prev + "; " + s
		}
		out[r.vip] = s
	}
	return out
}

// withGateway is "ns/svc (Gateway ns/gw)" for the Service metalgate made for a Gateway, else
// the Service alone.
func withGateway(service, gateway string) string {
	if gateway == "" {
		return service
	}
	return service + " (Gateway " + gateway + ")"
}

func canonicalIP(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.String()
	}
	return s
}

// ipLess orders addresses numerically (IPv4 first), anything unparsable last.
func ipLess(a, b string) bool {
	x, errx := netip.ParseAddr(a)
	y, erry := netip.ParseAddr(b)
	if errx != nil || erry != nil {
		if (errx == nil) != (erry == nil) {
			return errx == nil
		}
		return a < b
	}
	return x.Less(y)
}

func appendUnique(list []string, more ...string) []string {
	for _, m := range more {
		if m != "" && !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	return list
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
