package gateway

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

func gw(opts ...func(*gwv1.Gateway)) *gwv1.Gateway {
	g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Generation: 3}}
	for _, o := range opts {
		o(g)
	}
	return g
}

func l(name string, proto gwv1.ProtocolType, port int32, mods ...func(*gwv1.Listener)) func(*gwv1.Gateway) {
	return func(g *gwv1.Gateway) {
		li := gwv1.Listener{Name: gwv1.SectionName(name), Protocol: proto, Port: gwv1.PortNumber(port)}
		if proto == gwv1.HTTPSProtocolType {
			li.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}
		}
		for _, m := range mods {
			m(&li)
		}
		g.Spec.Listeners = append(g.Spec.Listeners, li)
	}
}

func addr(t gwv1.AddressType, v string) func(*gwv1.Gateway) {
	return func(g *gwv1.Gateway) {
		g.Spec.Addresses = append(g.Spec.Addresses, gwv1.GatewaySpecAddress{Type: &t, Value: v})
	}
}

func host(h string) func(*gwv1.Listener) {
	return func(l *gwv1.Listener) { l.Hostname = ptr(gwv1.Hostname(h)) }
}

func kinds(ks ...string) func(*gwv1.Listener) {
	return func(l *gwv1.Listener) {
		l.AllowedRoutes = &gwv1.AllowedRoutes{}
		for _, k := range ks {
			l.AllowedRoutes.Kinds = append(l.AllowedRoutes.Kinds, gwv1.RouteGroupKind{Kind: gwv1.Kind(k)})
		}
	}
}

func tlsMode(m gwv1.TLSModeType) func(*gwv1.Listener) {
	return func(l *gwv1.Listener) { l.TLS = &gwv1.ListenerTLSConfig{Mode: &m} }
}

func certRef(r gwv1.SecretObjectReference) func(*gwv1.Listener) {
	return func(l *gwv1.Listener) { l.TLS.CertificateRefs = []gwv1.SecretObjectReference{r} }
}

// summary renders conditions as "Type=Status/Reason" in order, for compact comparison.
func summary(conds []metav1.Condition) string {
	var out []string
	for _, c := range conds {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(out, " ")
}

func TestPlanGateway(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gw        *gwv1.Gateway
		accepted  string // summary of the Accepted condition
		msg       string // in the Accepted message or AddressProblem
		problem   bool   // AddressProblem set
		ports     []int32
		static    []string
		listeners []string // summary per listener, and its supported kinds in order
		kindsMsg  []string // each in some listener's InvalidRouteKinds message
		service   bool
		grants    []*gwv1beta1.ReferenceGrant
	}{{
		name: "one HTTP listener", gw: gw(l("http", "HTTP", 80)),
		accepted: "Accepted=True/Accepted", ports: []int32{80}, service: true,
		listeners: []string{"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=HTTPRoute,GRPCRoute"},
	}, {
		name: "ports are distinct and sorted", gw: gw(l("b", "HTTP", 8080), l("a", "HTTP", 80, host("a.test")), l("c", "HTTP", 80, host("c.test")), l("s", "HTTPS", 443)),
		accepted: "Accepted=True/Accepted", ports: []int32{80, 443, 8080}, service: true,
	}, {
		name: "unsupported protocol only", gw: gw(l("tcp", "TCP", 5432)),
		accepted: "Accepted=False/ListenersNotValid", msg: "tcp",
		listeners: []string{"Accepted=False/UnsupportedProtocol ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds="},
	}, {
		name: "one valid, one unsupported", gw: gw(l("http", "HTTP", 80), l("tls", "TLS", 443)),
		accepted: "Accepted=True/ListenersNotValid", msg: "tls", ports: []int32{80}, service: true,
	}, {
		name: "TLS Passthrough takes its port and TLSRoutes; Terminate is not served", gw: gw(l("pass", "TLS", 443, tlsMode(gwv1.TLSModePassthrough)),
			l("term", "TLS", 8443, tlsMode(gwv1.TLSModeTerminate)), l("pass-kinds", "TLS", 9443, tlsMode(gwv1.TLSModePassthrough), host("a.test"), kinds("TCPRoute", "TLSRoute"))),
		accepted: "Accepted=True/ListenersNotValid", msg: "term", ports: []int32{443, 9443}, service: true,
		listeners: []string{
			"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=TLSRoute",
			"Accepted=False/UnsupportedValue ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=",
			"Accepted=True/Accepted ResolvedRefs=False/InvalidRouteKinds Conflicted=False/NoConflicts kinds=TLSRoute",
		},
	}, {
		name: "HTTPS and TLS Passthrough on one port conflict", gw: gw(l("https", "HTTPS", 443), l("pass", "TLS", 443, tlsMode(gwv1.TLSModePassthrough), host("a.test"))),
		accepted: "Accepted=False/ListenersNotValid",
		listeners: []string{
			"Accepted=False/ProtocolConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/ProtocolConflict kinds=HTTPRoute,GRPCRoute",
			"Accepted=False/ProtocolConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/ProtocolConflict kinds=TLSRoute",
		},
	}, {
		name: "protocol conflict on one port", gw: gw(l("http", "HTTP", 443), l("https", "HTTPS", 443)),
		accepted: "Accepted=False/ListenersNotValid",
		listeners: []string{
			"Accepted=False/ProtocolConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/ProtocolConflict kinds=HTTPRoute,GRPCRoute",
			"Accepted=False/ProtocolConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/ProtocolConflict kinds=HTTPRoute,GRPCRoute",
		},
	}, {
		name: "hostname conflict, a third listener on the port with another hostname is fine", gw: gw(l("a", "HTTP", 80), l("b", "HTTP", 80), l("c", "HTTP", 80, host("c.test"))),
		accepted: "Accepted=True/ListenersNotValid", ports: []int32{80}, service: true,
		listeners: []string{
			"Accepted=False/HostnameConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/HostnameConflict kinds=HTTPRoute,GRPCRoute",
			"Accepted=False/HostnameConflict ResolvedRefs=True/ResolvedRefs Conflicted=True/HostnameConflict kinds=HTTPRoute,GRPCRoute",
			"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=HTTPRoute,GRPCRoute",
		},
	}, {
		name: "an unsupported listener takes no port", gw: gw(l("http", "HTTP", 80), l("udp", "UDP", 80)),
		accepted: "Accepted=True/ListenersNotValid", ports: []int32{80}, service: true,
		listeners: []string{
			"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=HTTPRoute,GRPCRoute",
			"Accepted=False/UnsupportedProtocol ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=",
		},
	}, {
		name: "invalid route kinds", gw: gw(l("only-bad", "HTTP", 80, kinds("TCPRoute")), l("some", "HTTP", 81, kinds("HTTPRoute", "TLSRoute", "GRPCRoute"))),
		accepted: "Accepted=True/Accepted", ports: []int32{80, 81}, service: true,
		listeners: []string{
			"Accepted=True/Accepted ResolvedRefs=False/InvalidRouteKinds Conflicted=False/NoConflicts kinds=",
			"Accepted=True/Accepted ResolvedRefs=False/InvalidRouteKinds Conflicted=False/NoConflicts kinds=HTTPRoute,GRPCRoute",
		},
		kindsMsg: []string{"gateway.networking.k8s.io/TCPRoute (supported: HTTPRoute, GRPCRoute)", "gateway.networking.k8s.io/TLSRoute (supported: HTTPRoute, GRPCRoute)"},
	}, {
		name: "a listener that allows only GRPCRoute", gw: gw(l("grpc", "HTTP", 80, kinds("GRPCRoute")), l("grpcs", "HTTPS", 443, kinds("GRPCRoute"))),
		accepted: "Accepted=True/Accepted", ports: []int32{80, 443}, service: true,
		listeners: []string{
			"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=GRPCRoute",
			"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=GRPCRoute",
		},
	}, {
		name: "a listener that allows only HTTPRoute", gw: gw(l("http", "HTTP", 80, kinds("HTTPRoute"))),
		accepted: "Accepted=True/Accepted", ports: []int32{80}, service: true,
		listeners: []string{"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=HTTPRoute"},
	}, {
		name: "kinds in the order listed, each once", gw: gw(l("http", "HTTP", 80, kinds("GRPCRoute", "HTTPRoute", "GRPCRoute"))),
		accepted: "Accepted=True/Accepted", ports: []int32{80}, service: true,
		listeners: []string{"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=GRPCRoute,HTTPRoute"},
	}, {
		name: "a route kind of the right name in another group", gw: gw(l("http", "HTTP", 80, func(l *gwv1.Listener) {
			l.AllowedRoutes = &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Group: ptr(gwv1.Group("example.com")), Kind: "GRPCRoute"}}}
		})),
		accepted: "Accepted=True/Accepted", ports: []int32{80}, service: true,
		listeners: []string{"Accepted=True/Accepted ResolvedRefs=False/InvalidRouteKinds Conflicted=False/NoConflicts kinds="},
		kindsMsg:  []string{"example.com/GRPCRoute"},
	}, {
		name: "certificate of another kind", gw: gw(l("s", "HTTPS", 443, certRef(gwv1.SecretObjectReference{Kind: ptr(gwv1.Kind("ConfigMap")), Name: "c"}))),
		accepted:  "Accepted=False/ListenersNotValid",
		listeners: []string{"Accepted=True/Accepted ResolvedRefs=False/InvalidCertificateRef Conflicted=False/NoConflicts kinds=HTTPRoute,GRPCRoute"},
	}, {
		name: "certificate in another namespace", gw: gw(l("s", "HTTPS", 443, certRef(gwv1.SecretObjectReference{Namespace: ptr(gwv1.Namespace("other")), Name: "c"}))),
		accepted:  "Accepted=False/ListenersNotValid",
		listeners: []string{"Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted Conflicted=False/NoConflicts kinds=HTTPRoute,GRPCRoute"},
	}, {
		name: "certificate in another namespace, grant for HTTPRoutes only", gw: gw(l("s", "HTTPS", 443, certRef(gwv1.SecretObjectReference{Namespace: ptr(gwv1.Namespace("other")), Name: "c"}))),
		grants:    []*gwv1beta1.ReferenceGrant{secretGrant("other", "HTTPRoute", "ns", nil)},
		accepted:  "Accepted=False/ListenersNotValid",
		listeners: []string{"Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted Conflicted=False/NoConflicts kinds=HTTPRoute,GRPCRoute"},
	}, {
		name: "certificate in another namespace, grant to another Secret", gw: gw(l("s", "HTTPS", 443, certRef(gwv1.SecretObjectReference{Namespace: ptr(gwv1.Namespace("other")), Name: "c"}))),
		grants:    []*gwv1beta1.ReferenceGrant{secretGrant("other", "Gateway", "ns", ptr(gwv1.ObjectName("d")))},
		accepted:  "Accepted=False/ListenersNotValid",
		listeners: []string{"Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted Conflicted=False/NoConflicts kinds=HTTPRoute,GRPCRoute"},
	}, {
		name: "certificate in another namespace, grant from Gateways of another namespace", gw: gw(l("s", "HTTPS", 443, certRef(gwv1.SecretObjectReference{Namespace: ptr(gwv1.Namespace("other")), Name: "c"}))),
		grants:    []*gwv1beta1.ReferenceGrant{secretGrant("other", "Gateway", "elsewhere", nil)},
		accepted:  "Accepted=False/ListenersNotValid",
		listeners: []string{"Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted Conflicted=False/NoConflicts kinds=HTTPRoute,GRPCRoute"},
	}, {
		name: "certificate in another namespace, granted to that Secret", gw: gw(l("s", "HTTPS", 443, certRef(gwv1.SecretObjectReference{Namespace: ptr(gwv1.Namespace("other")), Name: "c"}))),
		grants:   []*gwv1beta1.ReferenceGrant{secretGrant("other", "Gateway", "ns", ptr(gwv1.ObjectName("c")))},
		accepted: "Accepted=True/Accepted", ports: []int32{443}, service: true,
		listeners: []string{"Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts kinds=HTTPRoute,GRPCRoute"},
	}, {
		name: "certificate in the Gateway's namespace, named explicitly", gw: gw(l("s", "HTTPS", 443, certRef(gwv1.SecretObjectReference{Namespace: ptr(gwv1.Namespace("ns")), Kind: ptr(gwv1.Kind("Secret")), Group: ptr(gwv1.Group("")), Name: "c"}))),
		accepted: "Accepted=True/Accepted", ports: []int32{443}, service: true,
	}, {
		name: "static addresses, one per family", gw: gw(l("http", "HTTP", 80), addr("IPAddress", "100.64.0.9"), addr("IPAddress", "2001:db8::9")),
		accepted: "Accepted=True/Accepted", ports: []int32{80}, static: []string{"100.64.0.9", "2001:db8::9"}, service: true,
	}, {
		name: "two IPv4 addresses", gw: gw(l("http", "HTTP", 80), addr("IPAddress", "100.64.0.9"), addr("IPAddress", "100.64.0.10")),
		accepted: "Accepted=True/Accepted", ports: []int32{80}, problem: true, msg: "one IP family",
	}, {
		name: "address that does not parse", gw: gw(l("http", "HTTP", 80), addr("IPAddress", "100.64.0.300")),
		accepted: "Accepted=True/Accepted", ports: []int32{80}, problem: true, msg: "not an IP address",
	}, {
		name: "hostname address", gw: gw(l("http", "HTTP", 80), addr("Hostname", "gw.test")),
		accepted: "Accepted=False/UnsupportedAddress", msg: `"Hostname"`,
	}, {
		name: "no listeners", gw: gw(),
		accepted: "Accepted=False/ListenersNotValid",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanGateway(tc.gw, tc.grants)
			if got := summary([]metav1.Condition{p.Accepted}); got != tc.accepted {
				t.Errorf("accepted %s (%q), want %s", got, p.Accepted.Message, tc.accepted)
			}
			if tc.msg != "" && !strings.Contains(p.Accepted.Message+p.AddressProblem, tc.msg) {
				t.Errorf("message %q / problem %q lacks %q", p.Accepted.Message, p.AddressProblem, tc.msg)
			}
			if (p.AddressProblem != "") != tc.problem {
				t.Errorf("address problem %q, want one: %v", p.AddressProblem, tc.problem)
			}
			var ports []int32
			for _, sp := range p.Ports {
				ports = append(ports, sp.Port)
				if sp.TargetPort.IntVal != sp.Port || sp.Protocol != "TCP" {
					t.Errorf("port %+v", sp)
				}
			}
			if diff := cmp.Diff(tc.ports, ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			var static []string
			for _, a := range p.StaticIPs {
				static = append(static, a.String())
			}
			if diff := cmp.Diff(tc.static, static); diff != "" {
				t.Errorf("static addresses (-want +got):\n%s", diff)
			}
			if tc.listeners != nil {
				var got []string
				for _, ls := range p.Listeners {
					var ks []string
					for _, k := range ls.SupportedKinds {
						if k.Group == nil || *k.Group != gwv1.GroupName {
							t.Errorf("listener %s: supported kind %s without group %s", ls.Name, k.Kind, gwv1.GroupName)
						}
						ks = append(ks, string(k.Kind))
					}
					got = append(got, fmt.Sprintf("%s kinds=%s", summary(ls.Conditions), strings.Join(ks, ",")))
				}
				if diff := cmp.Diff(tc.listeners, got); diff != "" {
					t.Errorf("listeners (-want +got):\n%s", diff)
				}
			}
			for _, want := range tc.kindsMsg {
				if !slices.ContainsFunc(p.Listeners, func(ls gwv1.ListenerStatus) bool {
					return slices.ContainsFunc(ls.Conditions, func(c metav1.Condition) bool {
						return c.Reason == string(gwv1.ListenerReasonInvalidRouteKinds) && strings.Contains(c.Message, want)
					})
				}) {
					t.Errorf("no InvalidRouteKinds message contains %q: %+v", want, p.Listeners)
				}
			}
			if p.WantsService() != tc.service {
				t.Errorf("WantsService %v, want %v", p.WantsService(), tc.service)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	v4, v6 := netip.MustParseAddr("100.64.0.1"), netip.MustParseAddr("2001:db8::1")
	const svc = "metalgate-system/gw-ns-g-x"
	for _, tc := range []struct {
		name      string
		gw        *gwv1.Gateway
		obs       Observed
		addresses []string
		gateway   string // summary of the Gateway's conditions
		msg       string // in the Programmed message
		listener  string // summary of the first listener's conditions
	}{{
		name: "address assigned", gw: gw(l("http", "HTTP", 80)), obs: Observed{Service: svc, VIPs: []netip.Addr{v4}},
		addresses: []string{"100.64.0.1"}, gateway: "Accepted=True/Accepted Programmed=True/Programmed", msg: svc,
		listener: "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed",
	}, {
		name: "dual-stack", gw: gw(l("http", "HTTP", 80)), obs: Observed{Service: svc, VIPs: []netip.Addr{v4, v6}},
		addresses: []string{"100.64.0.1", "2001:db8::1"}, gateway: "Accepted=True/Accepted Programmed=True/Programmed",
	}, {
		name: "waiting for the allocator", gw: gw(l("http", "HTTP", 80)), obs: Observed{Service: svc},
		gateway: "Accepted=True/Accepted Programmed=False/AddressNotAssigned", msg: "waiting for the allocator",
		listener: "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Pending",
	}, {
		name: "pool exhausted", gw: gw(l("http", "HTTP", 80)), obs: Observed{Service: svc, Problem: "allocator: pool exhausted"},
		gateway: "Accepted=True/Accepted Programmed=False/AddressNotAssigned", msg: "pool exhausted",
	}, {
		name: "static address refused", gw: gw(l("http", "HTTP", 80), addr("IPAddress", "100.64.0.9")),
		obs:     Observed{Service: svc, Problem: "100.64.0.9 is already in use"},
		gateway: "Accepted=True/Accepted Programmed=False/AddressNotUsable", msg: "already in use",
	}, {
		name: "VIP is not yet the requested static address", gw: gw(l("http", "HTTP", 80), addr("IPAddress", "100.64.0.9")),
		obs:     Observed{Service: svc, VIPs: []netip.Addr{v4}},
		gateway: "Accepted=True/Accepted Programmed=False/AddressNotAssigned",
	}, {
		name: "static address assigned", gw: gw(l("http", "HTTP", 80), addr("IPAddress", "100.64.0.1")),
		obs: Observed{Service: svc, VIPs: []netip.Addr{v4}}, addresses: []string{"100.64.0.1"},
		gateway: "Accepted=True/Accepted Programmed=True/Programmed",
	}, {
		name: "unusable request", gw: gw(l("http", "HTTP", 80), addr("IPAddress", "100.64.0.9"), addr("IPAddress", "100.64.0.10")),
		gateway: "Accepted=True/Accepted Programmed=False/AddressNotUsable", msg: "one IP family",
	}, {
		name: "address assigned, proxy not available", gw: gw(l("http", "HTTP", 80)),
		obs:       Observed{Service: svc, VIPs: []netip.Addr{v4}, ProxyProblem: "proxy Deployment metalgate-system/gw-ns-g-x has no available replica"},
		addresses: []string{"100.64.0.1"}, gateway: "Accepted=True/Accepted Programmed=False/Pending", msg: "no available replica",
		listener: "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Pending",
	}, {
		name: "HTTPS listener whose Secret is missing", gw: gw(l("s", "HTTPS", 443, certRef(gwv1.SecretObjectReference{Name: "c"}))),
		obs:       Observed{Service: svc, VIPs: []netip.Addr{v4}, CertificateProblems: map[string]string{"s": "Secret ns/c not found"}},
		addresses: []string{"100.64.0.1"}, gateway: "Accepted=True/Accepted Programmed=True/Programmed",
		listener: "Accepted=True/Accepted ResolvedRefs=False/InvalidCertificateRef Conflicted=False/NoConflicts Programmed=False/Invalid",
	}, {
		name: "certificate problem of another listener", gw: gw(l("s", "HTTPS", 443, certRef(gwv1.SecretObjectReference{Name: "c"}))),
		obs:       Observed{Service: svc, VIPs: []netip.Addr{v4}, CertificateProblems: map[string]string{"other": "Secret ns/d not found"}},
		addresses: []string{"100.64.0.1"}, gateway: "Accepted=True/Accepted Programmed=True/Programmed",
		listener: "Accepted=True/Accepted ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=True/Programmed",
	}, {
		name: "not accepted", gw: gw(l("tcp", "TCP", 80)),
		gateway:  "Accepted=False/ListenersNotValid Programmed=False/Invalid",
		listener: "Accepted=False/UnsupportedProtocol ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts Programmed=False/Invalid",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			st := Status(tc.gw, PlanGateway(tc.gw, nil), tc.obs, gwv1.GatewayStatus{}, t0)
			var addrs []string
			for _, a := range st.Addresses {
				if a.Type == nil || *a.Type != gwv1.IPAddressType {
					t.Errorf("address %s has type %v", a.Value, a.Type)
				}
				addrs = append(addrs, a.Value)
			}
			if diff := cmp.Diff(tc.addresses, addrs); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
			if got := summary(st.Conditions); got != tc.gateway {
				t.Errorf("conditions %s, want %s (%+v)", got, tc.gateway, st.Conditions)
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != 3 || !c.LastTransitionTime.Equal(&t0) {
					t.Errorf("condition %s: observedGeneration %d, time %v", c.Type, c.ObservedGeneration, c.LastTransitionTime)
				}
			}
			if tc.msg != "" {
				if c := findCondition(st.Conditions, "Programmed"); c == nil || !strings.Contains(c.Message, tc.msg) {
					t.Errorf("Programmed message lacks %q: %+v", tc.msg, c)
				}
			}
			if tc.listener != "" {
				if got := summary(st.Listeners[0].Conditions); got != tc.listener {
					t.Errorf("listener conditions %s, want %s", got, tc.listener)
				}
				for _, c := range st.Listeners[0].Conditions {
					if c.ObservedGeneration != 3 {
						t.Errorf("listener condition %s: observedGeneration %d", c.Type, c.ObservedGeneration)
					}
				}
			}
		})
	}
}

// TestStatusKeepsTransitionTimes: a condition that did not change keeps its time (so an
// unchanged Gateway's status is not rewritten); one that changed gets the new time.
func TestStatusKeepsTransitionTimes(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	g := gw(l("http", "HTTP", 80))
	p := PlanGateway(g, nil)
	waiting := Status(g, p, Observed{Service: "s"}, gwv1.GatewayStatus{}, t0)
	if again := Status(g, p, Observed{Service: "s"}, waiting, t1); !cmp.Equal(waiting, again) {
		t.Errorf("unchanged status rewritten:\n%s", cmp.Diff(waiting, again))
	}
	done := Status(g, p, Observed{Service: "s", VIPs: []netip.Addr{netip.MustParseAddr("100.64.0.1")}}, waiting, t1)
	if c := findCondition(done.Conditions, "Accepted"); !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("Accepted did not change but its time did: %v", c.LastTransitionTime)
	}
	if c := findCondition(done.Conditions, "Programmed"); !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("Programmed changed but its time did not: %v", c.LastTransitionTime)
	}
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// secretGrant is a ReferenceGrant in namespace ns from the Gateway API kind fromKind of
// namespace from to core Secrets (to the one named name, when set).
func secretGrant(ns, fromKind, from string, name *gwv1.ObjectName) *gwv1beta1.ReferenceGrant {
	return &gwv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g"},
		Spec: gwv1beta1.ReferenceGrantSpec{
			From: []gwv1beta1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: gwv1.Kind(fromKind), Namespace: gwv1.Namespace(from)}},
			To:   []gwv1beta1.ReferenceGrantTo{{Group: "", Kind: "Secret", Name: name}}}}
}
