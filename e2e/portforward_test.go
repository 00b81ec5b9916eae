//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// portForwardGet GETs path from port of a pod through the API server's pods/portforward, as
// kubectl port-forward does (a listener on 127.0.0.1 of this process, closed on return), with
// token as a bearer token when not empty: the way to read an admin port that answers loopback
// callers and authorised tokens only (the proxy's), or authorised tokens only (the speaker's,
// on the host network: debugReaderToken).
func portForwardGet(ctx context.Context, cfg *rest.Config, namespace, pod string, port int, path, token string) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		return nil, fmt.Errorf("port-forward to %s/%s: %w", namespace, pod, err)
	case <-ctx.Done():
		close(stop)
		<-done
		return nil, ctx.Err()
	}
	defer func() {
		close(stop)
		<-done
	}()
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		return nil, fmt.Errorf("port-forward to %s/%s: ports %v: %v", namespace, pod, ports, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", ports[0].Local, path), nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s from %s/%s port %d: HTTP %d: %s", path, namespace, pod, port, resp.StatusCode, body)
	}
	return body, nil
}

// debugReaderToken returns a 10-minute token of the ServiceAccount metalgate-debug-reader that
// config/speaker installs (get /metrics and /debug/announcements), as kubectl metalgate asks
// for one: the speakers' metrics port is on the host network and serves no caller without a
// token, loopback included.
func debugReaderToken(ctx context.Context, cs kubernetes.Interface) (string, error) {
	secs := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(operatorNamespace).CreateToken(ctx, "metalgate-debug-reader",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest for %s/metalgate-debug-reader: %w", operatorNamespace, err)
	}
	return tr.Status.Token, nil
}
