package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// podProxy reads an HTTP path from a port of a pod. The plugin reaches the speakers and the
// ingress proxies only through the API server (pods/proxy), so it needs no route to the pod
// network; tests serve it with httptest.
type podProxy interface {
	// Get returns the HTTP status and body of GET path?query on the pod's port. err is set when
	// no answer came back (the API server could not reach the pod, or the pod is gone).
	Get(ctx context.Context, namespace, pod string, port int, path string, query url.Values) (status int, body []byte, err error)
}

// apiPodProxy is podProxy through the API server's pods/proxy subresource: the request
// CoreV1().Pods(ns).ProxyGet("http", pod, port, path, params) sends, with the status kept.
type apiPodProxy struct{ rest rest.Interface }

func (p apiPodProxy) Get(ctx context.Context, namespace, pod string, port int, path string, query url.Values) (int, []byte, error) {
	req := p.rest.Get().Namespace(namespace).Resource("pods").SubResource("proxy").
		Name(utilnet.JoinSchemeNamePort("http", pod, strconv.Itoa(port))).Suffix(path)
	for k, vs := range query {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	res := req.Do(ctx)
	var code int
	res.StatusCode(&code)
	body, err := res.Raw()
	if code == 0 || isAPIServerError(body) {
		// No status (transport error), or the API server's own error (a Status object: the
		// pod could not be reached, or RBAC forbids pods/proxy) — not the pod's answer.
		if err == nil {
			err = fmt.Errorf("HTTP %d", code)
		}
		return code, nil, fmt.Errorf("GET %s from pod %s/%s port %d: %w", path, namespace, pod, port, err)
	}
	return code, body, nil
}

// isAPIServerError reports whether body is a metav1.Status the API server wrote (the speaker
// and proxy never answer with one).
func isAPIServerError(body []byte) bool {
	var s struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	return json.Unmarshal(body, &s) == nil && s.Kind == "Status" && s.APIVersion == "v1"
}

// shortBody trims an answer for a message.
func shortBody(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
