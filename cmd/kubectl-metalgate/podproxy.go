package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// CoreV1().Pods(ns).ProxyGet("http", pod, port, path, params) sends, sent with the REST
// client's own HTTP client so that the pod's status and body come back as they are (client-go's
// Result turns a non-2xx answer into an error without them).
type apiPodProxy struct{ rest *rest.RESTClient }

func (p apiPodProxy) Get(ctx context.Context, namespace, pod string, port int, path string, query url.Values) (int, []byte, error) {
	req := p.rest.Get().Namespace(namespace).Resource("pods").SubResource("proxy").
		Name(utilnet.JoinSchemeNamePort("http", pod, strconv.Itoa(port))).Suffix(path)
	for k, vs := range query {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	fail := func(err error) (int, []byte, error) {
		return 0, nil, fmt.Errorf("GET %s from pod %s/%s port %d: %w", path, namespace, pod, port, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL().String(), nil)
	if err != nil {
		return fail(err)
	}
	resp, err := p.rest.Client.Do(hreq)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusOK && isAPIServerError(body) {
		// The API server's own error (a Status object): the pod could not be reached, or RBAC
		// forbids pods/proxy — not the pod's answer.
		var s metav1.Status
		_ = json.Unmarshal(body, &s)
		return fail(fmt.Errorf("HTTP %d from the API server: %s", resp.StatusCode, s.Message))
	}
	return resp.StatusCode, body, nil
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
