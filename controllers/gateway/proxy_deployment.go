package gateway

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/api/contract"
)

// ProxyOptions describe the proxy Deployment made for each Gateway. With no Image, no
// Deployment is made. cmd/metalgate fills them from the controller's own Pod by default
// (ProxyFromPod).
type ProxyOptions struct {
	// Image runs `metalgate proxy --gateway=<namespace>/<name>`.
	Image string
	// PullPolicy of Image; empty: the API server's default for its tag.
	PullPolicy corev1.PullPolicy
	// PullSecrets of the proxy pods.
	PullSecrets []corev1.LocalObjectReference
	// ServiceAccount of the proxy pods (bound to config/rbac/gateway-proxy). Defaults to
	// DefaultProxyServiceAccount.
	ServiceAccount string
}

// ComponentGatewayProxy is the app.kubernetes.io/component of the Gateways' proxies.
const ComponentGatewayProxy = "gateway-proxy"

// DesiredDeployment is the proxy Deployment of gw: in namespace, named and labelled like its
// Service (whose selector are those labels), one replica running
// `metalgate proxy --gateway=<namespace>/<name> --h2c`, listening on the listeners' ports as a
// non-root user (net.ipv4.ip_unprivileged_port_start=0, a namespaced safe sysctl, lets it bind
// ports below 1024 without a capability).
//
// A GatewayClass annotated metalgate.io/allow-unmanaged-endpointslices: "true" (the class is
// the cluster operator's) also passes --allow-unmanaged-endpointslices to its Gateways'
// proxies: they then route to hand-written EndpointSlices too (addresses still checked). The
// Gateway API's core conformance test HTTPRouteServiceTypes needs it; by default proxies trust
// only the endpoint-slice controller's slices (docs/gateway.md).
func DesiredDeployment(gw *gwv1.Gateway, gc *gwv1.GatewayClass, plan Plan, namespace string, p ProxyOptions) *appsv1.Deployment {
	if p.ServiceAccount == "" {
		p.ServiceAccount = DefaultProxyServiceAccount
	}
	selector := Labels(gw.Namespace, gw.Name)
	podLabels := Labels(gw.Namespace, gw.Name)
	podLabels["app.kubernetes.io/name"] = "metalgate"
	podLabels["app.kubernetes.io/component"] = ComponentGatewayProxy
	var ports []corev1.ContainerPort
	for _, sp := range plan.Ports {
		ports = append(ports, corev1.ContainerPort{Name: sp.Name, ContainerPort: sp.Port, Protocol: corev1.ProtocolTCP})
	}
	// Named as the chart names the Ingress proxy's, so one PodMonitor scrapes both (listener
	// ports are named port-<n>).
	ports = append(ports, corev1.ContainerPort{Name: "admin", ContainerPort: contract.ProxyAdminPort, Protocol: corev1.ProtocolTCP})
	// The admin port's open paths: ready once the first routing table is built and while the
	// watches are fresh, so the Gateway is Programmed only when its proxy serves its routes.
	admin := intstr.FromInt32(contract.ProxyAdminPort)
	probe := func(path string, period int32) *corev1.Probe {
		return &corev1.Probe{PeriodSeconds: period,
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: admin}}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ServiceName(gw.Namespace, gw.Name),
			Labels: podLabels, Annotations: map[string]string{contract.AnnotationGateway: gw.Namespace + "/" + gw.Name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: p.ServiceAccount,
					ImagePullSecrets:   p.PullSecrets,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(65532)), RunAsGroup: ptr(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
					},
					Containers: []corev1.Container{{
						Name:            "proxy",
						Image:           p.Image,
						ImagePullPolicy: p.PullPolicy,
						Args:            proxyArgs(gw, gc),
						Ports:           ports,
						ReadinessProbe:  probe("/readyz", 2),
						LivenessProbe:   probe("/healthz", 10),
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
}

// proxyArgs are the arguments of gw's proxy: the Gateway; --h2c, so that its plain HTTP
// listeners also take HTTP/2 with prior knowledge (gRPC clients without TLS speak nothing
// else, and a GRPCRoute may attach to an HTTP listener); and the class's trust in
// hand-written EndpointSlices.
func proxyArgs(gw *gwv1.Gateway, gc *gwv1.GatewayClass) []string {
	args := []string{"proxy", "--gateway=" + gw.Namespace + "/" + gw.Name, "--h2c"}
	if gc.Annotations[contract.AnnotationAllowUnmanagedEndpointSlices] == "true" {
		args = append(args, "--allow-unmanaged-endpointslices")
	}
	return args
}

// ensureDeployment creates gw's proxy Deployment or brings its labels, replicas and pod
// template back to what DesiredDeployment says (the API server's defaults on the template are
// kept by comparing only what is set here). It returns why the proxy does not serve yet
// (Observed.ProxyProblem), or "".
func (r *Reconciler) ensureDeployment(ctx context.Context, gw *gwv1.Gateway, gc *gwv1.GatewayClass, plan Plan) (string, error) {
	want := DesiredDeployment(gw, gc, plan, r.Namespace, r.Proxy)
	name := want.Namespace + "/" + want.Name
	var have appsv1.Deployment
	err := r.Deployments.Get(ctx, client.ObjectKeyFromObject(want), &have)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil {
			return "", fmt.Errorf("create Deployment %s: %w", name, err)
		}
		ctrl.LoggerFrom(ctx).Info("created proxy Deployment for Gateway", "deployment", name)
		return fmt.Sprintf("proxy Deployment %s created, no replica available yet", name), nil
	case err != nil:
		return "", fmt.Errorf("get Deployment %s: %w", name, err)
	}
	if owner := have.Annotations[contract.AnnotationGateway]; owner != want.Annotations[contract.AnnotationGateway] {
		return fmt.Sprintf("Deployment %s exists and belongs to %q, not to this Gateway", name, owner), nil
	}
	updated := have.DeepCopy()
	updated.Labels = want.Labels
	updated.Spec.Replicas = want.Spec.Replicas
	updated.Spec.Template.Labels = want.Spec.Template.Labels
	tmpl := &updated.Spec.Template.Spec
	tmpl.ServiceAccountName = want.Spec.Template.Spec.ServiceAccountName
	tmpl.ImagePullSecrets = want.Spec.Template.Spec.ImagePullSecrets
	tmpl.SecurityContext = want.Spec.Template.Spec.SecurityContext
	if len(tmpl.Containers) != 1 {
		tmpl.Containers = want.Spec.Template.Spec.Containers
	}
	c, w := &tmpl.Containers[0], want.Spec.Template.Spec.Containers[0]
	c.Name, c.Image, c.Args, c.Ports, c.SecurityContext = w.Name, w.Image, w.Args, w.Ports, w.SecurityContext
	if !equality.Semantic.DeepDerivative(w.ReadinessProbe, c.ReadinessProbe) || !equality.Semantic.DeepDerivative(w.LivenessProbe, c.LivenessProbe) {
		c.ReadinessProbe, c.LivenessProbe = w.ReadinessProbe, w.LivenessProbe
	}
	if w.ImagePullPolicy != "" {
		c.ImagePullPolicy = w.ImagePullPolicy
	}
	if !equality.Semantic.DeepEqual(updated, &have) {
		if err := r.Client.Update(ctx, updated); err != nil {
			return "", fmt.Errorf("update Deployment %s: %w", name, err)
		}
	}
	return proxyProblem(&have), nil
}

// proxyProblem says why Deployment d does not serve yet: no available replica (with its
// Available condition's message when it has one), or "".
func proxyProblem(d *appsv1.Deployment) string {
	if d.Status.AvailableReplicas > 0 {
		return ""
	}
	msg := fmt.Sprintf("proxy Deployment %s/%s has no available replica", d.Namespace, d.Name)
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status != corev1.ConditionTrue && c.Message != "" {
			msg += ": " + c.Message
		}
	}
	return msg
}

// cleanupDeployments deletes the proxy Deployments made for Gateway key.
func (r *Reconciler) cleanupDeployments(ctx context.Context, key types.NamespacedName) error {
	var list appsv1.DeploymentList
	if err := r.Deployments.List(ctx, &list, client.InNamespace(r.Namespace),
		client.MatchingLabels{contract.LabelGatewayNamespace: key.Namespace}); err != nil {
		return fmt.Errorf("list Deployments of Gateway %s: %w", key, err)
	}
	for i := range list.Items {
		d := &list.Items[i]
		if d.Annotations[contract.AnnotationGateway] != key.String() {
			continue
		}
		err := r.Client.Delete(ctx, d, client.Preconditions{UID: &d.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Deployment %s/%s of Gateway %s: %w", d.Namespace, d.Name, key, err)
		}
		ctrl.LoggerFrom(ctx).Info("deleted proxy Deployment of Gateway", "deployment", d.Namespace+"/"+d.Name)
	}
	return nil
}
