package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The speakers run on the host network, where loopback is every process on the node, so their
// metrics port serves no caller without a bearer token the API server authorises for the path
// (docs/speaker.md, "Metrics and debug port") — the plugin, arriving from loopback through
// pods/portforward, included.
const (
	// debugReaderName is the ServiceAccount the plugin asks a token for (config/rbac/debug-reader,
	// the chart's <fullname>-debug-reader): it may get /metrics and /debug/announcements only.
	debugReaderName = "metalgate-debug-reader"
	// debugReaderTokenSeconds is the lifetime asked for: the API server's minimum (10 minutes),
	// as the token lives only as long as the command.
	debugReaderTokenSeconds = 600
)

// speakerTokens chooses the bearer token the plugin reads the speakers with: first a
// short-lived token of the debug reader ServiceAccount, which may read those two paths and
// nothing else; only when that cannot be had, the kubeconfig's own bearer token — which then
// reaches the speaker pods, so it is the fallback, not the default.
type speakerTokens struct {
	// request creates a token of ServiceAccount namespace/name lasting seconds (TokenRequest).
	request func(ctx context.Context, namespace, name string, seconds int64) (string, error)
	// kubeconfig returns the kubeconfig's bearer token, "" when it has none (client
	// certificates, exec plugins).
	kubeconfig func() (string, error)
	// reader is the ServiceAccount's name (default debugReaderName).
	reader string
}

// newSpeakerTokens returns the speakerTokens of the cluster of cfg.
func newSpeakerTokens(cfg *rest.Config, cs kubernetes.Interface, reader string) *speakerTokens {
	return &speakerTokens{
		request: func(ctx context.Context, namespace, name string, seconds int64) (string, error) {
			tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
				&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
			if err != nil {
				return "", err
			}
			return tr.Status.Token, nil
		},
		kubeconfig: func() (string, error) {
			if cfg.BearerToken != "" || cfg.BearerTokenFile == "" {
				return cfg.BearerToken, nil
			}
			b, err := os.ReadFile(cfg.BearerTokenFile)
			if err != nil {
				return "", fmt.Errorf("read the kubeconfig's tokenFile: %w", err)
			}
			return strings.TrimSpace(string(b)), nil
		},
		reader: reader,
	}
}

// token returns the bearer token to send to the speakers of namespace, or an error that names
// what is missing.
func (s *speakerTokens) token(ctx context.Context, namespace string) (string, error) {
	reader := s.reader
	if reader == "" {
		reader = debugReaderName
	}
	tok, rerr := s.request(ctx, namespace, reader, debugReaderTokenSeconds)
	if rerr == nil && tok != "" {
		return tok, nil
	}
	if rerr == nil {
		rerr = errors.New("the API server returned an empty token")
	}
	own, kerr := s.kubeconfig()
	if kerr == nil && own != "" {
		return own, nil
	}
	why := fmt.Sprintf("no token for ServiceAccount %s/%s", namespace, reader)
	switch {
	case apierrors.IsNotFound(rerr):
		why = fmt.Sprintf("ServiceAccount %s/%s not found (install it: config/speaker, or the chart with debugReader.create=true; another name: --debug-reader)", namespace, reader)
	case apierrors.IsForbidden(rerr):
		why = fmt.Sprintf("you may not create tokens for ServiceAccount %s/%s (grant create on serviceaccounts/token for it)", namespace, reader)
	}
	own = "the kubeconfig has no bearer token"
	if kerr != nil {
		own = kerr.Error()
	}
	return "", fmt.Errorf("the speakers' metrics port needs a bearer token (it is on the host network, where loopback counts for nothing): %s, and %s (%w)", why, own, rerr)
}
