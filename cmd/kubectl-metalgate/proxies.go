package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/proxy/ingress"
)

// proxyLabels select metalgate ingress proxy pods (config/proxy/base), in any namespace.
func proxyLabels() client.MatchingLabels {
	return client.MatchingLabels{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "proxy"}
}

// proxyPod is one metalgate proxy pod and what its flags make it serve.
type proxyPod struct {
	pod        *corev1.Pod
	controller string   // --controller-name
	namespaces []string // --watch-namespace; empty: all
	classless  bool     // --watch-ingress-without-class
	publish    string   // --publish-service namespace/name; "" : the Service selecting the pod
	gateway    string   // --gateway namespace/name: a Gateway's proxy; "" : an Ingress proxy
	adminPort  int
}

// ready reports whether the pod is running and ready (it serves traffic).
func (p proxyPod) ready() bool {
	if p.pod.DeletionTimestamp != nil || p.pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// serves reports whether the proxy takes Ingresses of controller in namespace.
func (p proxyPod) serves(controller, namespace string) bool {
	return p.controller == controller && (len(p.namespaces) == 0 || slices.Contains(p.namespaces, namespace))
}

func (p proxyPod) String() string { return p.pod.Namespace + "/" + p.pod.Name }

// listProxies lists the metalgate proxy pods of every namespace, sorted by namespace/name.
func listProxies(ctx context.Context, c client.Reader) ([]proxyPod, error) {
	return listProxyPods(ctx, c, proxyLabels())
}

// listProxyPods lists the pods with labels in every namespace that run `metalgate proxy`,
// sorted by namespace/name.
func listProxyPods(ctx context.Context, c client.Reader, sel client.MatchingLabels) ([]proxyPod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, sel); err != nil {
		return nil, fmt.Errorf("list proxy pods: %w", err)
	}
	var out []proxyPod
	for i := range pods.Items {
		if p, ok := parseProxyPod(&pods.Items[i]); ok {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b proxyPod) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// parseProxyPod reads the flags of the pod's `metalgate proxy` container; ok is false when no
// container runs it.
func parseProxyPod(pod *corev1.Pod) (proxyPod, bool) {
	for _, c := range pod.Spec.Containers {
		args := append(slices.Clone(c.Command), c.Args...)
		i := slices.Index(args, "proxy")
		if i < 0 {
			continue
		}
		p := proxyPod{pod: pod, controller: ingress.ControllerName, adminPort: contract.ProxyAdminPort}
		flags := args[i+1:]
		for j := 0; j < len(flags); j++ {
			name, value, hasValue := strings.Cut(strings.TrimLeft(flags[j], "-"), "=")
			if !strings.HasPrefix(flags[j], "-") {
				continue
			}
			if !hasValue && name != "watch-ingress-without-class" && j+1 < len(flags) {
				j++
				value = flags[j]
			}
			value = expandEnv(value, pod, c.Env)
			switch name {
			case "controller-name":
				p.controller = value
			case "watch-namespace":
				for _, ns := range strings.Split(value, ",") {
					if ns = strings.TrimSpace(ns); ns != "" {
						p.namespaces = append(p.namespaces, ns)
					}
				}
			case "watch-ingress-without-class":
				p.classless = !hasValue || value == "true"
			case "publish-service":
				p.publish = value
			case "gateway":
				p.gateway = value
			case "admin-bind-address":
				if k := strings.LastIndexByte(value, ':'); k >= 0 {
					var port int
					if _, err := fmt.Sscanf(value[k+1:], "%d", &port); err == nil && port > 0 {
						p.adminPort = port
					}
				}
			}
		}
		return p, true
	}
	return proxyPod{}, false
}

// expandEnv replaces $(VAR) references as the kubelet does, for variables with a literal
// value or the pod's name or namespace from the downward API.
func expandEnv(s string, pod *corev1.Pod, vars []corev1.EnvVar) string {
	if !strings.Contains(s, "$(") {
		return s
	}
	for _, v := range vars {
		val, ok := v.Value, v.ValueFrom == nil
		if f := v.ValueFrom; f != nil && f.FieldRef != nil {
			switch f.FieldRef.FieldPath {
			case "metadata.namespace":
				val, ok = pod.Namespace, true
			case "metadata.name":
				val, ok = pod.Name, true
			}
		}
		if ok {
			s = strings.ReplaceAll(s, "$("+v.Name+")", val)
		}
	}
	return s
}

// proxyVIPs returns the load-balancer addresses of the proxies' own Services: those named by
// --publish-service, else those whose selector matches a proxy pod (what the proxy publishes
// into Ingress status).
func proxyVIPs(proxies []proxyPod, services []corev1.Service) map[string]bool {
	out := map[string]bool{}
	for _, s := range services {
		own := false
		for _, p := range proxies {
			if p.publish != "" {
				own = own || p.publish == s.Namespace+"/"+s.Name
				continue
			}
			own = own || (s.Namespace == p.pod.Namespace && len(s.Spec.Selector) > 0 &&
				labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.pod.Labels)))
		}
		if !own {
			continue
		}
		for _, ip := range ingressIPs(&s) {
			out[canonicalIP(ip)] = true
		}
	}
	return out
}
