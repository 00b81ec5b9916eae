package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/controllers/gateway"
	"github.com/metalgate/metalgate/controllers/gateway/claim"
	"github.com/metalgate/metalgate/internal/testenv"
)

const wait = 30 * time.Second

// TestGatewayClassAccepted: metalgate accepts its own GatewayClasses (observedGeneration set,
// status.supportedFeatures exactly the features the conformance run claims, sorted), refuses one with a parametersRef, and never writes a
// GatewayClass of another controller.
func TestGatewayClassAccepted(t *testing.T) {
	needAPIServer(t)
	foreign := gatewayClass(t, "gc-foreign", "example.com/other-controller")
	startController(t, nil)
	ours := gatewayClass(t, "gc-ours", gateway.ControllerName)
	withParams := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gc-params"}, Spec: gwv1.GatewayClassSpec{
		ControllerName: gateway.ControllerName,
		ParametersRef:  &gwv1.ParametersReference{Group: "", Kind: "ConfigMap", Name: "x", Namespace: ptr(gwv1.Namespace("default"))}}}
	create(t, withParams)
	var claimed []string
	for _, f := range claim.Features() {
		claimed = append(claimed, string(f))
	}
	if len(claimed) == 0 || !slices.IsSorted(claimed) {
		t.Fatalf("claim.Features() = %v: want a non-empty list sorted by name (GatewayClass status keeps it sorted)", claimed)
	}
	check := func(gc *gwv1.GatewayClass, status metav1.ConditionStatus, reason, msg string) {
		t.Helper()
		eventually(t, wait, func() string {
			var got gwv1.GatewayClass
			if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(gc), &got); err != nil {
				return err.Error()
			}
			var names []string
			for _, f := range got.Status.SupportedFeatures {
				names = append(names, string(f.Name))
			}
			if !slices.Equal(names, claimed) {
				return fmt.Sprintf("supportedFeatures %v, want exactly the conformance claim %v", names, claimed)
			}
			return hasCondition(got.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted), status, reason, msg, got.Generation)
		})
	}
	check(ours, metav1.ConditionTrue, string(gwv1.GatewayClassReasonAccepted), "metalgate.io/gateway-controller")
	check(withParams, metav1.ConditionFalse, string(gwv1.GatewayClassReasonInvalidParameters), contract.AnnotationAddressPool)
	// The foreign class was created first and is still as the API server defaulted it.
	var got gwv1.GatewayClass
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(foreign), &got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("foreign GatewayClass was written: resourceVersion %s → %s, status %+v", foreign.ResourceVersion, got.ResourceVersion, got.Status)
	}
	// A spec edit is observed at the new generation.
	var o gwv1.GatewayClass
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(ours), &o); err != nil {
			return err
		}
		o.Spec.Description = ptr("edited")
		return k8sClient.Update(context.Background(), &o)
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Generation < 2 {
		t.Fatalf("generation %d after a spec edit", o.Generation)
	}
	check(&o, metav1.ConditionTrue, string(gwv1.GatewayClassReasonAccepted), "")
}

// TestGatewayGetsVIP: a Gateway of a metalgate class gets a LoadBalancer Service in
// metalgate-system (one port per listener port, selecting its proxy pods, no node ports), the
// allocator gives that Service an address from the pool named by the Gateway's annotation,
// and the Gateway's status shows exactly that address, Programmed, with its listeners.
func TestGatewayGetsVIP(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ns := namespace(t)
	gatewayClass(t, "gc-vip", gateway.ControllerName)
	pool(t, "gw-vip", "100.64.40.0/30")
	certSecret(t, ns, "cert") // the HTTPS listener's certificateRef
	newGateway(t, ns, "web", "gc-vip", poolAnnotation("gw-vip"),
		listener("http", gwv1.HTTPProtocolType, 80), listener("https", gwv1.HTTPSProtocolType, 443),
		listener("alt", gwv1.HTTPProtocolType, 8080))
	svcName := gateway.ServiceName(ns, "web")
	var svc corev1.Service
	eventually(t, wait, func() string {
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: controllers.DefaultNamespace, Name: svcName}, &svc); err != nil {
			return err.Error()
		}
		if len(svc.Status.LoadBalancer.Ingress) != 1 {
			return fmt.Sprintf("Service %s has %v", svcName, svc.Status.LoadBalancer.Ingress)
		}
		return ""
	})
	vip := svc.Status.LoadBalancer.Ingress[0].IP
	if !strings.HasPrefix(vip, "100.64.40.") {
		t.Errorf("VIP %s is not from pool gw-vip", vip)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s/%s:%d→%s", p.Name, p.Protocol, p.Port, p.TargetPort.String()))
		if p.NodePort != 0 {
			t.Errorf("port %d has node port %d", p.Port, p.NodePort)
		}
	}
	if want := "port-80/TCP:80→80 port-443/TCP:443→443 port-8080/TCP:8080→8080"; strings.Join(ports, " ") != want {
		t.Errorf("ports %q, want %q", strings.Join(ports, " "), want)
	}
	if want := gateway.Labels(ns, "web"); !mapsEqual(svc.Spec.Selector, want) || svc.Labels[contract.LabelGatewayName] != "web" {
		t.Errorf("selector %v labels %v, want %v", svc.Spec.Selector, svc.Labels, want)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Annotations[contract.AnnotationAddressPool] != "gw-vip" {
		t.Errorf("Service type %s annotations %v", svc.Spec.Type, svc.Annotations)
	}
	if _, err := proxyDeployment(t, ns, "web"); !apierrors.IsNotFound(err) {
		t.Errorf("a proxy Deployment without a proxy image: %v", err)
	}
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "web")
		if got := statusAddresses(g); got != vip {
			return fmt.Sprintf("status.addresses %q, want %q", got, vip)
		}
		if g.Status.Addresses[0].Type == nil || *g.Status.Addresses[0].Type != gwv1.IPAddressType {
			return fmt.Sprintf("address type %v", g.Status.Addresses[0].Type)
		}
		for _, c := range []struct{ typ, reason string }{{"Accepted", "Accepted"}, {"Programmed", "Programmed"}} {
			if why := hasCondition(g.Status.Conditions, c.typ, metav1.ConditionTrue, c.reason, "", g.Generation); why != "" {
				return why
			}
		}
		if len(g.Status.Listeners) != 3 {
			return fmt.Sprintf("%d listener statuses", len(g.Status.Listeners))
		}
		for _, l := range g.Status.Listeners {
			for _, c := range []struct {
				typ, reason string
				status      metav1.ConditionStatus
			}{{"Accepted", "Accepted", "True"}, {"Programmed", "Programmed", "True"}, {"ResolvedRefs", "ResolvedRefs", "True"}, {"Conflicted", "NoConflicts", "False"}} {
				if why := hasCondition(l.Conditions, c.typ, c.status, c.reason, "", g.Generation); why != "" {
					return fmt.Sprintf("listener %s: %s", l.Name, why)
				}
			}
			if l.AttachedRoutes != 0 || len(l.SupportedKinds) != 2 || l.SupportedKinds[0].Kind != "HTTPRoute" || l.SupportedKinds[1].Kind != "GRPCRoute" {
				return fmt.Sprintf("listener %s: attachedRoutes %d supportedKinds %v", l.Name, l.AttachedRoutes, l.SupportedKinds)
			}
		}
		return ""
	})

	// A listener edit changes the Service's ports and is observed at the new generation.
	if err := updateGateway(t, ns, "web", func(g *gwv1.Gateway) { g.Spec.Listeners = g.Spec.Listeners[:1] }); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		s := gatewayServices(t, ns, "web")
		if len(s) != 1 || len(s[0].Spec.Ports) != 1 || s[0].Spec.Ports[0].Port != 80 {
			return fmt.Sprintf("Services after the edit: %+v", s)
		}
		g := getGateway(t, ns, "web")
		if len(g.Status.Listeners) != 1 || statusAddresses(g) != vip {
			return fmt.Sprintf("status after the edit: %+v", g.Status)
		}
		return hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed", "", g.Generation)
	})
}

// TestGatewayStaticAddress: spec.addresses of type IPAddress (GatewayStaticAddresses) reach
// the allocator as the Service's loadBalancerIPs annotation; the Gateway reports exactly
// that address. Two addresses of one family are refused by the Gateway's conditions, and no
// Service is made; an address another Service holds leaves the Gateway Programmed=False
// AddressNotUsable with the allocator's reason.
func TestGatewayStaticAddress(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ns := namespace(t)
	gatewayClass(t, "gc-static", gateway.ControllerName)
	pool(t, "gw-static", "100.64.41.0/29", "2001:db8:41::/120")
	newGateway(t, ns, "static", "gc-static", address(gwv1.IPAddressType, "100.64.41.5"))
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "static")
		if got := statusAddresses(g); got != "100.64.41.5" {
			return fmt.Sprintf("status.addresses %q, want 100.64.41.5 (conditions %+v)", got, g.Status.Conditions)
		}
		return hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed", "", g.Generation)
	})
	if s := gatewayServices(t, ns, "static"); len(s) != 1 || s[0].Annotations[contract.AnnotationLoadBalancerIPs] != "100.64.41.5" {
		t.Fatalf("Services %+v", s)
	}

	// One address of each family: a dual-stack Service, both addresses reported.
	newGateway(t, ns, "dual", "gc-static", address(gwv1.IPAddressType, "2001:db8:41::6"), address(gwv1.IPAddressType, "100.64.41.6"))
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "dual")
		got := strings.Split(statusAddresses(g), ",")
		sort.Strings(got)
		if strings.Join(got, ",") != "100.64.41.6,2001:db8:41::6" {
			return fmt.Sprintf("status.addresses %v, want both requested (conditions %+v)", got, g.Status.Conditions)
		}
		return hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed", "", g.Generation)
	})

	newGateway(t, ns, "two-v4", "gc-static", address(gwv1.IPAddressType, "100.64.41.2"), address(gwv1.IPAddressType, "100.64.41.3"))
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "two-v4")
		return hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionFalse, "AddressNotUsable", "at most one address per family", g.Generation)
	})
	if s := gatewayServices(t, ns, "two-v4"); len(s) != 0 {
		t.Errorf("a Service was made for an unusable request: %+v", s)
	}

	// The same address as the first Gateway: the allocator refuses it (no sharing key).
	newGateway(t, ns, "taken", "gc-static", address(gwv1.IPAddressType, "100.64.41.5"))
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "taken")
		if statusAddresses(g) != "" {
			return fmt.Sprintf("a taken address was reported: %v", g.Status.Addresses)
		}
		return hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionFalse, "AddressNotUsable", "100.64.41.5", g.Generation)
	})
}

// TestGatewayPoolExhausted: with its pool full, the Gateway says so (Programmed=False,
// AddressNotAssigned, the allocator's reason), reports no address — never a node or cluster
// IP — and gets the address as soon as one is free.
func TestGatewayPoolExhausted(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ns := namespace(t)
	gatewayClass(t, "gc-full", gateway.ControllerName)
	pool(t, "gw-full", "100.64.42.7/32")
	blocker := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blocker",
		Annotations: map[string]string{contract.AnnotationAddressPool: "gw-full"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	create(t, blocker)
	eventually(t, wait, func() string {
		var s corev1.Service
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(blocker), &s); err != nil {
			return err.Error()
		}
		if len(s.Status.LoadBalancer.Ingress) != 1 {
			return "blocker has no address yet"
		}
		return ""
	})
	newGateway(t, ns, "starved", "gc-full", poolAnnotation("gw-full"))
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "starved")
		if len(g.Status.Addresses) != 0 {
			return fmt.Sprintf("addresses %v while the pool is full", g.Status.Addresses)
		}
		if why := hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionFalse, "AddressNotAssigned", "exhausted", g.Generation); why != "" {
			return why
		}
		return hasCondition(g.Status.Listeners[0].Conditions, "Programmed", metav1.ConditionFalse, "Pending", "", g.Generation)
	})
	if err := k8sClient.Delete(context.Background(), blocker); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "starved")
		if got := statusAddresses(g); got != "100.64.42.7" {
			return fmt.Sprintf("addresses %q after the pool freed up", got)
		}
		return hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed", "", g.Generation)
	})
}

// TestGatewayInvalid: input metalgate cannot serve gets the spec's conditions and no Service.
func TestGatewayInvalid(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ns := namespace(t)
	gatewayClass(t, "gc-invalid", gateway.ControllerName)
	pool(t, "gw-invalid", "100.64.43.0/30")
	newGateway(t, ns, "tcp-only", "gc-invalid", listener("tcp", gwv1.TCPProtocolType, 5432))
	newGateway(t, ns, "hostname", "gc-invalid", address(gwv1.HostnameAddressType, "gw.example.com"))
	newGateway(t, ns, "mixed", "gc-invalid", poolAnnotation("gw-invalid"),
		listener("http", gwv1.HTTPProtocolType, 80), listener("udp", gwv1.UDPProtocolType, 53))
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "tcp-only")
		if why := hasCondition(g.Status.Conditions, "Accepted", metav1.ConditionFalse, "ListenersNotValid", "tcp", g.Generation); why != "" {
			return why
		}
		if why := hasCondition(g.Status.Conditions, "Programmed", metav1.ConditionFalse, "Invalid", "", g.Generation); why != "" {
			return why
		}
		if len(g.Status.Listeners) != 1 {
			return "no listener status"
		}
		return hasCondition(g.Status.Listeners[0].Conditions, "Accepted", metav1.ConditionFalse, "UnsupportedProtocol", "TCP", g.Generation)
	})
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "hostname")
		return hasCondition(g.Status.Conditions, "Accepted", metav1.ConditionFalse, "UnsupportedAddress", "Hostname", g.Generation)
	})
	eventually(t, wait, func() string {
		g := getGateway(t, ns, "mixed")
		if why := hasCondition(g.Status.Conditions, "Accepted", metav1.ConditionTrue, "ListenersNotValid", "udp", g.Generation); why != "" {
			return why
		}
		if statusAddresses(g) == "" {
			return "the valid listener got no address"
		}
		return ""
	})
	for _, name := range []string{"tcp-only", "hostname"} {
		if s := gatewayServices(t, ns, name); len(s) != 0 {
			t.Errorf("Gateway %s got Services %+v", name, s)
		}
	}
	if s := gatewayServices(t, ns, "mixed"); len(s) != 1 || len(s[0].Spec.Ports) != 1 || s[0].Spec.Ports[0].Port != 80 {
		t.Errorf("Gateway mixed: Services %+v, want one with port 80 only", s)
	}
}

// TestGatewayForeignClass: a Gateway of another controller's class (and of a class that does
// not exist) gets no Service and its status is never written; a Gateway that moves to a
// foreign class loses its Service.
func TestGatewayForeignClass(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ns := namespace(t)
	gatewayClass(t, "gc-other", "example.com/other-controller")
	gatewayClass(t, "gc-mine", gateway.ControllerName)
	pool(t, "gw-foreign", "100.64.44.0/30")
	foreign := newGateway(t, ns, "foreign", "gc-other", poolAnnotation("gw-foreign"))
	noClass := newGateway(t, ns, "no-class", "gc-missing", poolAnnotation("gw-foreign"))
	// A Gateway of ours created after them, processed by the same controller: once it is
	// programmed, the others have been seen.
	newGateway(t, ns, "mine", "gc-mine", poolAnnotation("gw-foreign"))
	eventually(t, wait, func() string {
		if statusAddresses(getGateway(t, ns, "mine")) == "" {
			return "mine has no address"
		}
		return ""
	})
	for _, g := range []*gwv1.Gateway{foreign, noClass} {
		got := getGateway(t, ns, g.Name)
		if got.ResourceVersion != g.ResourceVersion {
			t.Errorf("Gateway %s of a foreign class was written: %+v", g.Name, got.Status)
		}
		if s := gatewayServices(t, ns, g.Name); len(s) != 0 {
			t.Errorf("Gateway %s of a foreign class got Services %+v", g.Name, s)
		}
	}
	err := updateGateway(t, ns, "mine", func(g *gwv1.Gateway) { g.Spec.GatewayClassName = "gc-other" })
	if apierrors.IsInvalid(err) {
		t.Skipf("gatewayClassName is immutable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		if s := gatewayServices(t, ns, "mine"); len(s) != 0 {
			return fmt.Sprintf("the Gateway moved to a foreign class and still has Services %v", s[0].Name)
		}
		return ""
	})
}

// TestGatewayDeleteCleansUp: deleting a Gateway deletes its Service (and so frees the
// address), also when the Gateway went while no controller ran.
func TestGatewayDeleteCleansUp(t *testing.T) {
	needAPIServer(t)
	stop := startController(t, nil)
	ns := namespace(t)
	gatewayClass(t, "gc-delete", gateway.ControllerName)
	pool(t, "gw-delete", "100.64.45.0/30")
	a := newGateway(t, ns, "a", "gc-delete", poolAnnotation("gw-delete"))
	b := newGateway(t, ns, "b", "gc-delete", poolAnnotation("gw-delete"))
	for _, name := range []string{"a", "b"} {
		eventually(t, wait, func() string {
			if statusAddresses(getGateway(t, ns, name)) == "" {
				return name + " has no address"
			}
			return ""
		})
	}
	if err := k8sClient.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		if s := gatewayServices(t, ns, "a"); len(s) != 0 {
			return fmt.Sprintf("Service %s of deleted Gateway a still there", s[0].Name)
		}
		return ""
	})
	if s := gatewayServices(t, ns, "b"); len(s) != 1 {
		t.Fatalf("Gateway b's Service went too: %+v", s)
	}
	stop()
	if err := k8sClient.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	startController(t, nil)
	eventually(t, wait, func() string {
		if s := gatewayServices(t, ns, "b"); len(s) != 0 {
			return fmt.Sprintf("Service %s of Gateway b, deleted while no controller ran, still there", s[0].Name)
		}
		return ""
	})
}

// TestGatewayStatusOnlyByLeader: a controller that does not hold the lease writes nothing:
// no Service, no Gateway or GatewayClass status, for as long as another holder renews it;
// once the lease is free it leads and programs the Gateway.
func TestGatewayStatusOnlyByLeader(t *testing.T) {
	needAPIServer(t)
	ns := namespace(t)
	leaseNS := controllers.DefaultNamespace
	leaseName := "gw-leader-test"
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: leaseName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("someone-else"), LeaseDurationSeconds: ptr(int32(3600)),
			AcquireTime: &now, RenewTime: &now}}
	create(t, lease)
	gc := gatewayClass(t, "gc-leader", gateway.ControllerName)
	pool(t, "gw-leader", "100.64.46.0/30")
	g := newGateway(t, ns, "led", "gc-leader", poolAnnotation("gw-leader"))
	startController(t, func(o *ctrl.Options) {
		o.LeaderElection, o.LeaderElectionID, o.LeaderElectionNamespace = true, leaseName, leaseNS
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr(3*time.Second), ptr(2*time.Second), ptr(200*time.Millisecond)
		o.LeaderElectionReleaseOnCancel = true
	})
	// Not leading: for a few seconds (many retry periods) nothing is written.
	testenv.Holds(t, 3*time.Second, "a controller that is not the leader writes nothing", func() error {
		got := getGateway(t, ns, "led")
		var gotClass gwv1.GatewayClass
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(gc), &gotClass); err != nil {
			return err
		}
		if got.ResourceVersion != g.ResourceVersion || gotClass.ResourceVersion != gc.ResourceVersion || len(gatewayServices(t, ns, "led")) != 0 {
			return fmt.Errorf("it wrote: Gateway %+v, class %+v", got.Status, gotClass.Status)
		}
		return nil
	})
	// The other holder goes away: the controller leads and programs the Gateway.
	if err := k8sClient.Delete(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() string {
		got := getGateway(t, ns, "led")
		if statusAddresses(got) == "" {
			return "the leader has not programmed the Gateway"
		}
		return hasCondition(got.Status.Conditions, "Programmed", metav1.ConditionTrue, "Programmed", "", got.Generation)
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }

// TestGatewayNameTakenByForeignService: a Service that already has the Gateway's Service name
// but is not this Gateway's (made by someone else) is neither adopted, changed nor deleted;
// the Gateway says why it has no address.
func TestGatewayNameTakenByForeignService(t *testing.T) {
	needAPIServer(t)
	startController(t, nil)
	ns := namespace(t)
	gatewayClass(t, "gc-squat", gateway.ControllerName)
	pool(t, "gw-squat", "100.64.48.0/30")
	squatter := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: controllers.DefaultNamespace,
		Name: gateway.ServiceName(ns, "squatted"), Labels: map[string]string{"owner": "someone-else"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 9, TargetPort: intstr.FromInt32(9)}}}}
	create(t, squatter)
	g := newGateway(t, ns, "squatted", "gc-squat", poolAnnotation("gw-squat"))
	eventually(t, wait, func() string {
		got := getGateway(t, ns, "squatted")
		if len(got.Status.Addresses) != 0 {
			return fmt.Sprintf("addresses %v from a Service that is not the Gateway's", got.Status.Addresses)
		}
		return hasCondition(got.Status.Conditions, "Programmed", metav1.ConditionFalse, "AddressNotAssigned", "belongs to", got.Generation)
	})
	if err := k8sClient.Delete(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	// The controller has seen the deletion once the Gateway is gone from its cache; give the
	// cleanup a reconcile to (wrongly) act, by waiting for a Gateway created after it.
	newGateway(t, ns, "after", "gc-squat", poolAnnotation("gw-squat"))
	eventually(t, wait, func() string {
		if statusAddresses(getGateway(t, ns, "after")) == "" {
			return "the later Gateway has no address yet"
		}
		return ""
	})
	var got corev1.Service
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(squatter), &got); err != nil {
		t.Fatalf("the foreign Service is gone: %v", err)
	}
	if got.ResourceVersion != squatter.ResourceVersion {
		t.Errorf("the foreign Service was changed: %+v", got)
	}
}
