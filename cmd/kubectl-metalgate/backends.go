package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/contract"
)

// proxyAnswer is what one proxy pod said about an Ingress, HTTPRoute or GRPCRoute.
type proxyAnswer struct {
	proxy    proxyPod
	backends *contract.Backends // set when the proxy serves the object
	notOurs  string             // the proxy's 404 message: it does not serve the object
	err      error              // no usable answer
}

// The kinds backends takes as TARGET: what a "kind/" prefix may say (as kubectl spells them).
var (
	ingressKinds   = []string{"ingress", "ingresses", "ing", "ingress.networking.k8s.io", "ingresses.networking.k8s.io"}
	httpRouteKinds = []string{"httproute", "httproutes", "httproute.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io"}
	grpcRouteKinds = []string{"grpcroute", "grpcroutes", "grpcroute.gateway.networking.k8s.io", "grpcroutes.gateway.networking.k8s.io"}
)

// backendsTarget parses the TARGET of backends: [KIND/]NAME or [KIND/]NAMESPACE/NAME, KIND
// ingress (the default), httproute or grpcroute; a NAME alone is in namespace ns. It returns
// the /debug/backends query parameter ("ingress", "httproute" or "grpcroute") and the object.
func backendsTarget(arg, ns string) (param string, id types.NamespacedName, err error) {
	param, rest := "ingress", arg
	if kind, after, ok := strings.Cut(arg, "/"); ok {
		switch k := strings.ToLower(kind); {
		case slices.Contains(ingressKinds, k):
			rest = after
		case slices.Contains(httpRouteKinds, k):
			param, rest = "httproute", after
		case slices.Contains(grpcRouteKinds, k):
			param, rest = "grpcroute", after
		}
	}
	id.Namespace, id.Name = ns, rest
	if before, after, ok := strings.Cut(rest, "/"); ok {
		id.Namespace, id.Name = before, after
	}
	if id.Namespace == "" || id.Name == "" || strings.Contains(id.Name, "/") {
		return "", id, fmt.Errorf("TARGET %q: want [ingress/]NAME, httproute/NAME, grpcroute/NAME (with -n NAMESPACE) or NAMESPACE/NAME after the kind", arg)
	}
	return param, id, nil
}

// backends prints the live routing table of every proxy pod that serves the Ingress, or of
// the proxies of the Gateways an HTTPRoute or GRPCRoute names (routeBackends).
func backends(ctx context.Context, e *env, out io.Writer) error {
	ns := e.contextNamespace
	if e.o.namespaceSet {
		ns = e.o.namespace
	}
	param, id, err := backendsTarget(e.args[0], ns)
	if err != nil {
		return err
	}
	if param != "ingress" {
		return routeBackends(ctx, e, out, param, id)
	}
	proxies, err := listProxies(ctx, e.c)
	if err != nil {
		return err
	}
	if len(proxies) == 0 {
		return errors.New("no metalgate proxy pods in any namespace (label app.kubernetes.io/component=proxy)")
	}
	answers := askProxies(ctx, e.pods, proxies, url.Values{"ingress": {id.String()}})
	if structured(e.o.output) {
		var items []backendItem
		if err := writeBackendsTo(out, e.stderr, id.String(), answers, e.now(), &items); err != nil {
			return err
		}
		return printList(out, e.o.output, "BackendList", items, nil)
	}
	return writeBackends(out, id.String(), answers, e.now())
}

// askProxies asks every running proxy pod for the routes of query (?ingress=, ?httproute= or
// ?grpcroute=).
func askProxies(ctx context.Context, pods podProxy, proxies []proxyPod, query url.Values) []proxyAnswer {
	out := make([]proxyAnswer, len(proxies))
	parallel(len(proxies), func(i int) { out[i] = askProxy(ctx, pods, proxies[i], query) })
	return out
}

// askProxy asks one proxy pod for the routes of query.
func askProxy(ctx context.Context, pods podProxy, p proxyPod, query url.Values) proxyAnswer {
	a := proxyAnswer{proxy: p}
	if p.pod.Status.Phase != corev1.PodRunning || p.pod.DeletionTimestamp != nil {
		a.err = fmt.Errorf("pod is %s", podState(p.pod))
		return a
	}
	code, body, err := pods.Get(ctx, p.pod.Namespace, p.pod.Name, p.adminPort, contract.DebugBackendsPath, query, nil)
	switch {
	case err != nil:
		a.err = err
	case code == http.StatusNotFound:
		a.notOurs = shortBody(body)
	case code != http.StatusOK:
		a.err = fmt.Errorf("HTTP %d: %s", code, shortBody(body))
	default:
		var b contract.Backends
		if err := json.Unmarshal(body, &b); err != nil {
			a.err = fmt.Errorf("decode %s: %w", contract.DebugBackendsPath, err)
		} else {
			a.backends = &b
		}
	}
	return a
}

// writeBackends prints one table per proxy pod serving the Ingress; an error when none does.
func writeBackends(out io.Writer, id string, answers []proxyAnswer, now time.Time) error {
	return writeBackendsTo(out, out, id, answers, now, nil)
}

// writeBackendsTo is writeBackends with what is not a table written to msgs; with items set,
// each serving proxy's answer is appended to it instead of printed (-o json, yaml).
func writeBackendsTo(out, msgs io.Writer, id string, answers []proxyAnswer, now time.Time, items *[]backendItem) error {
	served := 0
	var others []string
	for _, a := range answers {
		switch {
		case a.err != nil:
			others = append(others, fmt.Sprintf("proxy %s did not answer: %v", a.proxy, a.err))
		case a.backends == nil:
			others = append(others, fmt.Sprintf("proxy %s: %s", a.proxy, a.notOurs))
		}
	}
	for _, a := range answers {
		if a.backends == nil {
			continue
		}
		if items != nil {
			served++
			*items = append(*items, newBackendItem("", a))
			continue
		}
		if served > 0 {
			fmt.Fprintln(out)
		}
		served++
		fmt.Fprintf(out, "proxy %s (node %s): %s\n", a.proxy, orDash(a.proxy.pod.Spec.NodeName), tableAge(a.backends, now))
		if err := writeRoutes(out, a.backends.Routes, false); err != nil {
			return err
		}
	}
	if served == 0 {
		for _, o := range others {
			fmt.Fprintln(msgs, o)
		}
		return fmt.Errorf("no metalgate proxy serves Ingress %s (%d asked); kubectl metalgate check says why", id, len(answers))
	}
	for _, o := range others {
		if !strings.Contains(o, "does not serve") {
			fmt.Fprintf(msgs, "warning: %s\n", o)
		}
	}
	return nil
}

// backendItem is one proxy's routes of the TARGET: an item of backends -o json and yaml.
type backendItem struct {
	// Gateway is the Gateway (namespace/name) whose proxy this is; "" for an Ingress.
	Gateway    string                  `json:"gateway,omitempty"`
	Proxy      string                  `json:"proxy"` // namespace/name of the pod
	Node       string                  `json:"node"`
	Generation uint64                  `json:"generation"`
	Applied    time.Time               `json:"applied"`
	Routes     []contract.BackendRoute `json:"routes"`
}

func newBackendItem(gateway string, a proxyAnswer) backendItem {
	routes := a.backends.Routes
	if routes == nil {
		routes = []contract.BackendRoute{}
	}
	return backendItem{Gateway: gateway, Proxy: a.proxy.String(), Node: a.proxy.pod.Spec.NodeName,
		Generation: a.backends.Generation, Applied: a.backends.Applied, Routes: routes}
}

// tableAge is "table generation N, applied D ago" of an answer.
func tableAge(b *contract.Backends, now time.Time) string {
	applied := "unknown"
	if !b.Applied.IsZero() {
		applied = fmt.Sprintf("%s ago", now.Sub(b.Applied).Round(time.Second))
	}
	return fmt.Sprintf("table generation %d, applied %s", b.Generation, applied)
}

// writeRoutes prints routes, one line per endpoint; weights adds the WEIGHT column (an
// HTTPRoute's split between backendRefs).
func writeRoutes(out io.Writer, routes []contract.BackendRoute, weights bool) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	weightCol := func(s string) string {
		if !weights {
			return ""
		}
		return s + "\t"
	}
	fmt.Fprintf(w, "HOST\tPATH\tSERVICE:PORT\t%sENDPOINT\tREADY\tHEALTHY\tIN-FLIGHT\n", weightCol("WEIGHT"))
	for _, r := range routes {
		host := r.Host
		if host == "" {
			host = "*"
		}
		path := fmt.Sprintf("%s (%s)", r.Path, r.PathType)
		svc := r.Service + ":" + r.Port
		if r.Unresolved {
			svc = "<unresolved: 500>"
		}
		weight := "-"
		if r.Weight > 0 {
			weight = fmt.Sprintf("%d%%", r.Weight)
		}
		if len(r.Endpoints) == 0 {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s<none>\t-\t-\t-\n", host, path, svc, weightCol(weight))
		}
		for _, ep := range r.Endpoints {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s%s\t%s\t%s\t%s\n", host, path, svc, weightCol(weight), ep.Address, readiness(ep), health(ep), inFlight(ep))
		}
	}
	return w.Flush()
}

// readiness is the READY column: the EndpointSlice conditions.
func readiness(e contract.BackendEndpoint) string {
	switch {
	case e.Ready:
		return "yes"
	case e.Serving && e.Terminating:
		return "terminating"
	case e.Terminating:
		return "no (terminating)"
	}
	return "no"
}

// health is the HEALTHY column: the data plane's view; "-" when not routed at all, with the
// reason when the proxy refuses the address.
func health(e contract.BackendEndpoint) string {
	switch {
	case e.Refused != "":
		return "- (refused: " + e.Refused + ")"
	case !e.Routed:
		return "- (not routed)"
	case e.Healthy:
		return "yes"
	}
	return "no (ejected)"
}

func inFlight(e contract.BackendEndpoint) string {
	if !e.Routed {
		return "-"
	}
	return fmt.Sprint(e.InFlight)
}

// gatewayProxyLabels select the proxies the Gateway controller runs, one Deployment per
// Gateway (controllers/gateway.DesiredDeployment), in any namespace; each pod's --gateway
// argument names its Gateway.
func gatewayProxyLabels() client.MatchingLabels {
	return client.MatchingLabels{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "gateway-proxy"}
}

// routeGateway is one Gateway a route's parentRefs name, and what its proxies said.
type routeGateway struct {
	gateway types.NamespacedName
	// problem says why no proxy was asked: no such Gateway, not metalgate's, no proxy pod.
	problem string
	// notAccepted is metalgate's Accepted=False condition of the route for this Gateway
	// ("Reason: message"), "" when accepted or not reported.
	notAccepted string
	answers     []proxyAnswer
}

// gatewayRoute is what backends reads of an HTTPRoute or a GRPCRoute: both kinds share
// parentRefs and status.parents.
type gatewayRoute struct {
	kind    string // "HTTPRoute" or "GRPCRoute"
	id      types.NamespacedName
	refs    []gwv1.ParentReference
	parents []gwv1.RouteParentStatus
}

// getRoute reads route id of the kind param names ("httproute" or "grpcroute").
func getRoute(ctx context.Context, c client.Reader, param string, id types.NamespacedName) (gatewayRoute, error) {
	r := gatewayRoute{kind: "HTTPRoute", id: id}
	var obj client.Object
	var hr gwv1.HTTPRoute
	var gr gwv1.GRPCRoute
	if param == "grpcroute" {
		r.kind, obj = "GRPCRoute", &gr
	} else {
		obj = &hr
	}
	if err := c.Get(ctx, id, obj); err != nil {
		switch {
		case meta.IsNoMatchError(err):
			return r, fmt.Errorf("%s %s: the cluster has no %s CRD (Gateway API)", r.kind, id, r.kind)
		case apierrors.IsNotFound(err):
			return r, fmt.Errorf("%s %s not found", r.kind, id)
		}
		return r, fmt.Errorf("get %s %s: %w", r.kind, id, err)
	}
	if param == "grpcroute" {
		r.refs, r.parents = gr.Spec.ParentRefs, gr.Status.Parents
	} else {
		r.refs, r.parents = hr.Spec.ParentRefs, hr.Status.Parents
	}
	return r, nil
}

// routeBackends prints, for each Gateway the route's parentRefs name, the route's live
// routes as that Gateway's proxies serve them.
func routeBackends(ctx context.Context, e *env, out io.Writer, param string, id types.NamespacedName) error {
	r, err := getRoute(ctx, e.c, param, id)
	if err != nil {
		return err
	}
	gws := parentGateways(r)
	if len(gws) == 0 {
		return fmt.Errorf("%s %s is attached to no Gateway: its spec.parentRefs name none", r.kind, id)
	}
	proxies, err := listProxyPods(ctx, e.c, gatewayProxyLabels())
	if err != nil {
		return err
	}
	rgs := make([]routeGateway, 0, len(gws))
	for _, gw := range gws {
		rg := routeGateway{gateway: gw, notAccepted: notAccepted(r, gw)}
		problem, programmed, err := gatewayProblem(ctx, e.c, gw)
		if err != nil {
			return err
		}
		var mine []proxyPod
		for _, p := range proxies {
			if p.gateway == gw.String() {
				mine = append(mine, p)
			}
		}
		switch {
		case problem != "":
			rg.problem = problem
		case len(mine) == 0:
			rg.problem = fmt.Sprintf("no proxy pod (label app.kubernetes.io/component=gateway-proxy, argument --gateway=%s)%s", gw, programmed)
		default:
			rg.answers = askProxies(ctx, e.pods, mine, url.Values{param: {id.String()}})
		}
		rgs = append(rgs, rg)
	}
	if structured(e.o.output) {
		var items []backendItem
		if err := writeRouteBackendsTo(out, e.stderr, r.kind+" "+id.String(), rgs, e.now(), &items); err != nil {
			return err
		}
		return printList(out, e.o.output, "BackendList", items, nil)
	}
	return writeRouteBackends(out, r.kind+" "+id.String(), rgs, e.now())
}

// parentGateways are the Gateways r's parentRefs name, in order, each once.
func parentGateways(r gatewayRoute) []types.NamespacedName {
	var out []types.NamespacedName
	for _, pr := range r.refs {
		if (pr.Group != nil && *pr.Group != gwv1.GroupName) || (pr.Kind != nil && *pr.Kind != "Gateway") {
			continue
		}
		gw := types.NamespacedName{Namespace: r.id.Namespace, Name: string(pr.Name)}
		if pr.Namespace != nil {
			gw.Namespace = string(*pr.Namespace)
		}
		if !slices.Contains(out, gw) {
			out = append(out, gw)
		}
	}
	return out
}

// notAccepted is "Reason: message" of metalgate's Accepted=False condition of r for Gateway
// gw, or "".
func notAccepted(r gatewayRoute, gw types.NamespacedName) string {
	for _, ps := range r.parents {
		ns := r.id.Namespace
		if ps.ParentRef.Namespace != nil {
			ns = string(*ps.ParentRef.Namespace)
		}
		if ps.ControllerName != gatewayController || ns != gw.Namespace || string(ps.ParentRef.Name) != gw.Name {
			continue
		}
		if c := meta.FindStatusCondition(ps.Conditions, string(gwv1.RouteConditionAccepted)); c != nil && c.Status == metav1.ConditionFalse {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// gatewayProblem says why Gateway gw has no metalgate proxy to ask ("" when it should have
// one), and programmed is its Programmed=False condition (" (Programmed=False, Reason:
// message)"), or "".
func gatewayProblem(ctx context.Context, c client.Reader, gw types.NamespacedName) (problem, programmed string, err error) {
	var g gwv1.Gateway
	if err := c.Get(ctx, gw, &g); err != nil {
		if apierrors.IsNotFound(err) {
			return "no such Gateway", "", nil
		}
		return "", "", fmt.Errorf("get Gateway %s: %w", gw, err)
	}
	var gc gwv1.GatewayClass
	if err := c.Get(ctx, types.NamespacedName{Name: string(g.Spec.GatewayClassName)}, &gc); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("its GatewayClass %s does not exist", g.Spec.GatewayClassName), "", nil
		}
		return "", "", fmt.Errorf("get GatewayClass %s: %w", g.Spec.GatewayClassName, err)
	}
	if gc.Spec.ControllerName != gatewayController {
		return fmt.Sprintf("not metalgate's: its GatewayClass %s has controller %s", gc.Name, gc.Spec.ControllerName), "", nil
	}
	if c := meta.FindStatusCondition(g.Status.Conditions, string(gwv1.GatewayConditionProgrammed)); c != nil && c.Status == metav1.ConditionFalse {
		programmed = fmt.Sprintf(" (Programmed=False, %s: %s)", c.Reason, c.Message)
	}
	return "", programmed, nil
}

// writeRouteBackends prints, per Gateway of route id ("HTTPRoute ns/name" or "GRPCRoute
// ns/name"), each proxy's routes of it, and why a Gateway has none; an error when no proxy
// routes it at all.
func writeRouteBackends(out io.Writer, id string, rgs []routeGateway, now time.Time) error {
	return writeRouteBackendsTo(out, out, id, rgs, now, nil)
}

// writeRouteBackendsTo is writeRouteBackends with what is not a table written to msgs; with
// items set, each answering proxy's routes are appended to it instead of printed.
func writeRouteBackendsTo(out, msgs io.Writer, id string, rgs []routeGateway, now time.Time, items *[]backendItem) error {
	served, unattached, asked := 0, 0, 0
	var why []string
	for _, rg := range rgs {
		if rg.problem != "" {
			fmt.Fprintf(msgs, "Gateway %s: %s\n", rg.gateway, rg.problem)
			why = append(why, fmt.Sprintf("Gateway %s: %s", rg.gateway, rg.problem))
			continue
		}
		for _, a := range rg.answers {
			asked++
			switch {
			case a.err != nil:
				fmt.Fprintf(msgs, "Gateway %s: proxy %s did not answer: %v\n", rg.gateway, a.proxy, a.err)
				why = append(why, fmt.Sprintf("proxy %s of Gateway %s did not answer", a.proxy, rg.gateway))
				continue
			case a.backends == nil:
				fmt.Fprintf(msgs, "Gateway %s: proxy %s: %s\n", rg.gateway, a.proxy, a.notOurs)
				why = append(why, fmt.Sprintf("proxy %s of Gateway %s: %s", a.proxy, rg.gateway, a.notOurs))
				continue
			}
			if items != nil {
				*items = append(*items, newBackendItem(rg.gateway.String(), a))
			} else {
				fmt.Fprintf(out, "Gateway %s, proxy %s (node %s): %s\n", rg.gateway, a.proxy, orDash(a.proxy.pod.Spec.NodeName), tableAge(a.backends, now))
			}
			if len(a.backends.Routes) == 0 {
				unattached++
				msg := fmt.Sprintf("%s is attached to no listener of Gateway %s", id, rg.gateway)
				if rg.notAccepted != "" {
					msg += " (" + rg.notAccepted + ")"
				}
				fmt.Fprintf(msgs, "  no routes: %s\n", msg)
				why = append(why, msg)
				continue
			}
			served++
			if items != nil {
				continue
			}
			if err := writeRoutes(out, a.backends.Routes, true); err != nil {
				return err
			}
		}
	}
	if served > 0 {
		return nil
	}
	if unattached > 0 && unattached == asked && len(why) == unattached {
		return fmt.Errorf("%s is attached to no Gateway: %s; kubectl metalgate check says why", id, strings.Join(why, "; "))
	}
	return fmt.Errorf("no metalgate proxy routes %s: %s", id, strings.Join(why, "; "))
}
