package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// TestSpeakerTokenChoice: the plugin reads the speakers with the debug reader's short-lived
// token whenever it can get one — the user's own credential stays home even when the
// kubeconfig has a bearer token — falls back to the kubeconfig's bearer token, and otherwise
// fails naming what is missing.
func TestSpeakerTokenChoice(t *testing.T) {
	sa := schema.GroupResource{Resource: "serviceaccounts"}
	notFound := apierrors.NewNotFound(sa, "metalgate-debug-reader")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "metalgate-debug-reader", errors.New(`User "jane" cannot create resource "serviceaccounts/token"`))
	tests := []struct {
		name        string
		reader      string // --debug-reader
		requestTok  string
		requestErr  error
		kubeconfig  string
		kubeErr     error
		want        string
		wantErrs    []string // substrings of the error
		wantAsked   string   // namespace/name the token was asked for
		wantSeconds int64
	}{
		{name: "the reader's token, not the user's", requestTok: "reader-tok", kubeconfig: "users-own", want: "reader-tok",
			wantAsked: "metalgate-system/metalgate-debug-reader", wantSeconds: 600},
		{name: "the reader's token without a kubeconfig token", requestTok: "reader-tok", want: "reader-tok",
			wantAsked: "metalgate-system/metalgate-debug-reader", wantSeconds: 600},
		{name: "another reader name", reader: "mg-debug-reader", requestTok: "reader-tok", want: "reader-tok",
			wantAsked: "metalgate-system/mg-debug-reader", wantSeconds: 600},
		{name: "no reader: the kubeconfig's token", requestErr: notFound, kubeconfig: "users-own", want: "users-own"},
		{name: "no right to the reader: the kubeconfig's token", requestErr: forbidden, kubeconfig: "users-own", want: "users-own"},
		{name: "an empty token is no token", kubeconfig: "users-own", want: "users-own"},
		{name: "no reader, no kubeconfig token", requestErr: notFound,
			wantErrs: []string{"bearer token", "ServiceAccount metalgate-system/metalgate-debug-reader not found", "config/speaker", "debugReader.create", "the kubeconfig has no bearer token"}},
		{name: "no right, no kubeconfig token", requestErr: forbidden,
			wantErrs: []string{"you may not create tokens for ServiceAccount metalgate-system/metalgate-debug-reader", "serviceaccounts/token", "the kubeconfig has no bearer token"}},
		{name: "API error, unreadable token file", requestErr: errors.New("connection refused"), kubeErr: errors.New("read the kubeconfig's tokenFile: permission denied"),
			wantErrs: []string{"no token for ServiceAccount metalgate-system/metalgate-debug-reader", "connection refused", "tokenFile: permission denied"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked string
			var seconds int64
			s := &speakerTokens{
				request: func(_ context.Context, namespace, name string, secs int64) (string, error) {
					asked, seconds = namespace+"/"+name, secs
					return tc.requestTok, tc.requestErr
				},
				kubeconfig: func() (string, error) { return tc.kubeconfig, tc.kubeErr },
				reader:     tc.reader,
			}
			got, err := s.token(context.Background(), "metalgate-system")
			if len(tc.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("token = %q, want an error", got)
				}
				for _, w := range tc.wantErrs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if tc.requestErr != nil && !errors.Is(err, tc.requestErr) {
					t.Errorf("error %q does not wrap %v", err, tc.requestErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("token = %q, %v; want %q", got, err, tc.want)
			}
			if tc.wantAsked != "" && (asked != tc.wantAsked || seconds != tc.wantSeconds) {
				t.Errorf("asked a token of %s for %d s, want %s for %d s", asked, seconds, tc.wantAsked, tc.wantSeconds)
			}
		})
	}
}

// TestSpeakerTokensOfConfig: newSpeakerTokens asks the TokenRequest API of the cluster for
// the reader with the lifetime asked, and reads the kubeconfig's token, inline or from its file.
func TestSpeakerTokensOfConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  rest.Config
		want string
	}{
		{"inline", rest.Config{BearerToken: "inline"}, "inline"},
		{"file", rest.Config{BearerTokenFile: file}, "from-file"},
		{"none", rest.Config{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newSpeakerTokens(&tc.cfg, nil, "").kubeconfig()
			if err != nil || got != tc.want {
				t.Errorf("kubeconfig token = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := newSpeakerTokens(&rest.Config{BearerTokenFile: filepath.Join(t.TempDir(), "absent")}, nil, "").kubeconfig(); err == nil || !strings.Contains(err.Error(), "tokenFile") {
		t.Errorf("absent token file: err = %v, want one naming the tokenFile", err)
	}
}
