//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/controllers/gateway"
	"github.com/metalgate/metalgate/e2e/lab"
)

// gatewayPool is on the lab segment, clear of the hosts and of the other tests' pools.
const gatewayPool = "198.51.100.208/29"

// TestGateway: kubectl apply of a GatewayClass, a Gateway and an HTTPRoute is all it takes.
// The controller (config/lab, its defaults) gives the Gateway a VIP from a pool, a
// LoadBalancer Service and a proxy Deployment running its own image as the
// metalgate-gateway-proxy ServiceAccount (config/rbac/gateway-proxy: nothing else is granted);
// the speakers announce the VIP; from the client's network namespace, curl to the VIP is
// routed by the HTTPRoute's matches to two echo backends, with its header filter applied, and
// a host the route does not name gets 404; over HTTPS the listener's own certificate (a TLS
// Secret of the Gateway's namespace) verifies against the test CA, and a server name no HTTPS
// listener covers gets no handshake. The Gateway is Programmed with exactly that VIP
// only once the proxy is available. Deleting the Gateway removes its Service and Deployment.
func TestGateway(t *testing.T) {
	start := time.Now()
	ctx := context.Background()
	l := openLab(t)
	cs := clientset(t, l)
	cl := labClient(t, l)

	deploySpeaker(t, l, cs)
	pool := manualPool(t, cl, "e2e-gateway-", gatewayPool)
	l2Advertisement(t, cl, "e2e-gateway-", pool.Name)
	ns := testNamespace(t, cs, "e2e-gateway")
	for _, name := range []string{"alpha", "beta"} {
		echoBackend(t, cl, ns, name)
	}

	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: gwv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}
	if err := cl.Create(ctx, class); err != nil {
		t.Fatalf("create GatewayClass: %v", err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), class) })
	host := "web." + ns + ".test"
	caPEM := gatewayCertificate(t, cl, ns, "web-tls", host)
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: map[string]string{contract.AnnotationAddressPool: pool.Name}},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class.Name),
			Listeners: []gwv1.Listener{
				{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80},
				{Name: "https", Protocol: gwv1.HTTPSProtocolType, Port: 443, Hostname: ptrTo(gwv1.Hostname(host)),
					TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "web-tls"}}}},
			}},
	}
	if err := cl.Create(ctx, gw); err != nil {
		t.Fatalf("create Gateway: %v", err)
	}
	if err := cl.Create(ctx, gatewayRoute(ns, host)); err != nil {
		t.Fatalf("create HTTPRoute: %v", err)
	}

	// Programmed=True with one address, from the pool, only with the proxy available.
	var vip netip.Addr
	eventually(t, 3*time.Minute, "Gateway "+ns+"/web Programmed with an address of "+gatewayPool, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(gw), gw); err != nil {
			return err
		}
		c := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != gw.Generation {
			return fmt.Errorf("Programmed: %+v", c)
		}
		if len(gw.Status.Addresses) != 1 {
			return fmt.Errorf("status.addresses %+v", gw.Status.Addresses)
		}
		var err error
		vip, err = netip.ParseAddr(gw.Status.Addresses[0].Value)
		return err
	})
	if !netip.MustParsePrefix(gatewayPool).Contains(vip) {
		t.Fatalf("Gateway address %s is not from pool %s (never a node or cluster address)", vip, gatewayPool)
	}
	svcName := gateway.ServiceName(ns, "web")
	var dep appsv1.Deployment
	if err := cl.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: svcName}, &dep); err != nil {
		t.Fatalf("the Gateway's proxy Deployment: %v", err)
	}
	if dep.Status.AvailableReplicas < 1 {
		t.Errorf("Gateway Programmed while its proxy Deployment has %d available replicas", dep.Status.AvailableReplicas)
	}
	spec := dep.Spec.Template.Spec
	if spec.ServiceAccountName != gateway.DefaultProxyServiceAccount || spec.Containers[0].Image != lab.MetalgateImage.Ref {
		t.Errorf("proxy runs %s as %s, want the controller's image %s as %s",
			spec.Containers[0].Image, spec.ServiceAccountName, lab.MetalgateImage.Ref, gateway.DefaultProxyServiceAccount)
	}
	t.Logf("Gateway %s/web has VIP %s, served by %s/%s (setup %s)", ns, vip, operatorNamespace, svcName, time.Since(start).Round(time.Millisecond))

	// The controller wrote the route's status and the listener's count.
	eventually(t, 30*time.Second, "HTTPRoute web Accepted and ResolvedRefs by metalgate; listeners http and https attachedRoutes 1", func() error {
		var hr gwv1.HTTPRoute
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &hr); err != nil {
			return err
		}
		if len(hr.Status.Parents) != 1 || hr.Status.Parents[0].ControllerName != gateway.ControllerName {
			return fmt.Errorf("status.parents %+v", hr.Status.Parents)
		}
		for _, typ := range []string{"Accepted", "ResolvedRefs"} {
			if !meta.IsStatusConditionTrue(hr.Status.Parents[0].Conditions, typ) {
				return fmt.Errorf("%s not true: %+v", typ, hr.Status.Parents[0].Conditions)
			}
		}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(gw), gw); err != nil {
			return err
		}
		if len(gw.Status.Listeners) != 2 || gw.Status.Listeners[0].AttachedRoutes != 1 || gw.Status.Listeners[1].AttachedRoutes != 1 {
			return fmt.Errorf("listeners %+v", gw.Status.Listeners)
		}
		return nil
	})

	p := &proxyLab{l: l, ns: ns, vip: vip}
	url := "http://" + vip.String()
	for _, c := range []struct {
		name, path, backend string
		headers             []string
	}{
		{"PathPrefix", "/alpha/x", "alpha", nil},
		{"Exact", "/beta", "beta", nil},
		{"header match wins over the path", "/alpha/x", "beta", []string{"-H", "X-Canary: yes"}},
	} {
		eventually(t, 60*time.Second, c.name+": "+c.path+" reaches "+c.backend, func() error {
			body, info, err := p.curl(ctx, append([]string{"-H", "Host: " + host, url + c.path}, c.headers...)...)
			if err != nil {
				return err
			}
			r, err := p.expectEcho(body, info, c.backend, host, c.path)
			if err != nil {
				return err
			}
			if got := r.Headers.Get("X-Gateway"); got != "metalgate" {
				return fmt.Errorf("X-Gateway %q: the route's RequestHeaderModifier was not applied", got)
			}
			return nil
		})
	}
	for _, c := range []struct{ what, host, path string }{
		{"a host the route does not name", "other." + ns + ".test", "/alpha/x"},
		{"/beta/x (Exact /beta only)", host, "/beta/x"},
	} {
		body, info, err := p.curl(ctx, "-H", "Host: "+c.host, url+c.path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(info, "404 ") {
			t.Errorf("%s: %q, want 404 from the proxy: %s", c.what, info, shortErr(body))
		}
	}

	// The redirect: built from the request, the matched prefix replaced, no port for https.
	out, err := l.Exec(ctx, "client", "curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}",
		"-H", "Host: "+host, url+"/old/page?x=1")
	if want := "301 https://" + host + "/alpha/page?x=1"; err != nil || strings.TrimSpace(out) != want {
		t.Errorf("GET /old/page?x=1: %q %v, want %q", out, err, want)
	}

	// HTTPS: the listener's own certificate (chain verified against the test CA), the same
	// routes; a server name no HTTPS listener covers gets no handshake at all.
	eventually(t, 30*time.Second, "curl --cacert <test CA> https://"+host+"/alpha/x reaches alpha", func() error {
		body, info, err := p.curl(ctx, "--cacert", caPEM, "--resolve", host+":443:"+vip.String(), "https://"+host+"/alpha/x")
		if err != nil {
			return err
		}
		_, err = p.expectEcho(body, info, "alpha", host, "/alpha/x")
		return err
	})
	other := "other." + ns + ".test"
	if _, _, err := p.curl(ctx, "-k", "--resolve", other+":443:"+vip.String(), "https://"+other+"/alpha/x"); err == nil ||
		!strings.Contains(err.Error(), "exit status 35") {
		t.Errorf("TLS to %s (no listener for it): %v, want curl exit 35 (handshake refused)", other, err)
	}

	// Deleting the Gateway takes its Service (and so its VIP) and its proxy with it.
	if err := cl.Delete(ctx, gw); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the deleted Gateway's Service and proxy Deployment are gone", func() error {
		for _, o := range []client.Object{&corev1.Service{}, &appsv1.Deployment{}} {
			err := cl.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: svcName}, o)
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s: %v", o, svcName, err)
			}
		}
		return nil
	})
}

// gatewayRoute: host, /alpha (PathPrefix) → alpha unless X-Canary: yes (→ beta), /beta
// (Exact) → beta; every request gets X-Gateway: metalgate; /old/… is redirected (301) to
// https://host/alpha/….
func gatewayRoute(ns, host string) *gwv1.HTTPRoute {
	prefix, exact := gwv1.PathMatchPathPrefix, gwv1.PathMatchExact
	backend := func(name string) []gwv1.HTTPBackendRef {
		return []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
			Name: gwv1.ObjectName(name), Port: ptrTo(gwv1.PortNumber(80))}}}}
	}
	path := func(typ gwv1.PathMatchType, v string) *gwv1.HTTPPathMatch {
		return &gwv1.HTTPPathMatch{Type: &typ, Value: &v}
	}
	filter := []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestHeaderModifier,
		RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "X-Gateway", Value: "metalgate"}}}}}
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "web"}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)},
			Rules: []gwv1.HTTPRouteRule{
				{Matches: []gwv1.HTTPRouteMatch{{Path: path(prefix, "/alpha")}}, Filters: filter, BackendRefs: backend("alpha")},
				{Matches: []gwv1.HTTPRouteMatch{{Path: path(prefix, "/alpha"), Headers: []gwv1.HTTPHeaderMatch{{Name: "X-Canary", Value: "yes"}}}},
					Filters: filter, BackendRefs: backend("beta")},
				{Matches: []gwv1.HTTPRouteMatch{{Path: path(exact, "/beta")}}, Filters: filter, BackendRefs: backend("beta")},
				{Matches: []gwv1.HTTPRouteMatch{{Path: path(prefix, "/old")}}, Filters: []gwv1.HTTPRouteFilter{{
					Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{
						Scheme: ptrTo("https"), StatusCode: ptrTo(301),
						Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptrTo("/alpha")}}}}},
			},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// gatewayCertificate makes a test CA, a TLS Secret name in ns with its certificate for host,
// and returns the path of the CA's PEM file (for curl --cacert).
func gatewayCertificate(t *testing.T, cl client.Client, ns, name, host string) string {
	t.Helper()
	ca, err := newPEMCA("metalgate e2e gateway CA " + ns)
	if err != nil {
		t.Fatal(err)
	}
	caPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caPEM, ca.certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, _, err := ca.issue(host)
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
	if err := cl.Create(context.Background(), sec); err != nil {
		t.Fatalf("create Secret: %v", err)
	}
	return caPEM
}
