package controlplane_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/proxy/controlplane"
)

// TestBasicAuthSecret: through the API server, an Opaque htpasswd Secret protects an
// Ingress (401 without credentials, 200 with), a changed Secret takes effect without a
// restart, and an Ingress naming a Secret that does not exist, or one with a bcrypt cost over
// the cap, refuses everyone and gets a Warning event naming the Secret.
func TestBasicAuthSecret(t *testing.T) {
	kube.Need(t)
	ns := namespace(t)
	create(t, service(ns, "web", corev1.ServiceTypeClusterIP))
	setSlice(t, ns, "web", startBackend(t, "web"))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"auth": []byte("alice:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/\n")}} // myPassword
	create(t, secret)
	ing := ingress(ns, "web", "metalgate", "auth.test", "web")
	ing.Annotations = map[string]string{"nginx.ingress.kubernetes.io/auth-type": "basic", "nginx.ingress.kubernetes.io/auth-secret": "users"}
	create(t, ing)
	gone := ingress(ns, "gone", "metalgate", "gone.test", "web")
	gone.Annotations = map[string]string{"metalgate.io/auth-type": "basic", "metalgate.io/auth-secret": "nope"}
	create(t, gone)
	// bcrypt cost 13 (over the cap): refused, with the Secret named.
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"auth": []byte("hal:$2y$13$Zg3l8ADPLYr4Dt5trgM4UeoI11CxhpcyGM3f0gpaDsKAD.SkmE6Tm\n")}})
	costly := ingress(ns, "costly", "metalgate", "costly.test", "web")
	costly.Annotations = map[string]string{"metalgate.io/auth-type": "basic", "metalgate.io/auth-secret": "slow"}
	create(t, costly)
	p := startProxy(t, ns, func(o *controlplane.Options) { o.NginxAnnotations = true })

	as := func(host, user, pass string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+"/", nil)
		req.Host = host
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testenv.Eventually(t, 10*time.Second, "alice gets in", func() error {
		if code := as("auth.test", "alice", "myPassword"); code != 200 {
			return fmt.Errorf("alice: %d, want 200", code)
		}
		return nil
	})
	if code := as("auth.test", "", ""); code != 401 {
		t.Errorf("no credentials: %d, want 401", code)
	}
	if code := as("gone.test", "alice", "myPassword"); code != 401 {
		t.Errorf("missing Secret: %d, want 401", code)
	}
	warning(t, ns, "gone", "InvalidAnnotation", fmt.Sprintf("Secret %s/nope not found", ns))
	if code := as("costly.test", "hal", "secret1"); code != 401 {
		t.Errorf("Secret over the bcrypt cost cap: %d, want 401", code)
	}
	warning(t, ns, "costly", "InvalidAnnotation", fmt.Sprintf(`Secret %s/slow key auth: line 1, user "hal": bcrypt cost 13 is over 12`, ns))

	// A new password: the old one stops working, the new one works.
	secret.Data["auth"] = []byte("alice:{SHA}xjbo4jj9evl+LlAPjG8PTAvtr7A=\n") // secret2
	if err := k8sClient.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the new password works", func() error {
		if code := as("auth.test", "alice", "secret2"); code != 200 {
			return fmt.Errorf("new password: %d, want 200", code)
		}
		return nil
	})
	if code := as("auth.test", "alice", "myPassword"); code != 401 {
		t.Errorf("old password after the change: %d, want 401", code)
	}
}
