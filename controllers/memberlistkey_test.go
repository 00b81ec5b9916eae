package controllers_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/internal/testenv"
)

// TestEnsureMemberlistKey runs as the controller's ServiceAccount with exactly the namespaced
// Role generated from the code's markers (config/rbac/controller/role.yaml): the first start
// creates the Secret with a random key, a second start keeps it, and the controller can read
// no other Secret.
func TestEnsureMemberlistKey(t *testing.T) {
	kube.Need(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(cfg)
	b, err := os.ReadFile(filepath.Join("..", "config", "rbac", "controller", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.Role
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var r rbacv1.Role
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "Role" {
			role = &r
		}
	}
	if role == nil {
		t.Fatal("no Role in config/rbac/controller/role.yaml")
	}
	ns := controllers.DefaultNamespace
	// What this test makes, it takes away: it runs again (-count) on the same API server.
	cleanup := func(what string, del func() error) {
		t.Cleanup(func() {
			if err := del(); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", what, err)
			}
		})
	}
	if _, err := admin.CoreV1().Secrets(ns).Get(ctx, controllers.MemberlistKeySecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Secret %s/%s before the first start: err = %v, want NotFound", ns, controllers.MemberlistKeySecret, err)
	}
	cleanup("the key Secret", func() error {
		return admin.CoreV1().Secrets(ns).Delete(ctx, controllers.MemberlistKeySecret, metav1.DeleteOptions{})
	})
	role.Name = "memberlist-key-test"
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cleanup("the Role", func() error { return admin.RbacV1().Roles(ns).Delete(ctx, role.Name, metav1.DeleteOptions{}) })
	sa := "memberlist-key-test"
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cleanup("the RoleBinding", func() error {
		return admin.RbacV1().RoleBindings(ns).Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	asController := rest.CopyConfig(cfg)
	asController.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	cs := kubernetes.NewForConfigOrDie(asController)

	// The authorizer sees a new Role within a moment.
	testenv.Eventually(t, 10*time.Second, "the controller may make its key once the authorizer sees its Role", func() error {
		err := controllers.EnsureMemberlistKey(ctx, cs.CoreV1(), ns, controllers.MemberlistKeySecret)
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatal(err)
		}
		return err
	})
	s, err := admin.CoreV1().Secrets(ns).Get(ctx, controllers.MemberlistKeySecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := s.Data["key"]
	if len(key) != 32 || bytes.Equal(key, make([]byte, 32)) {
		t.Fatalf("key %x: want 32 random bytes", key)
	}
	if err := controllers.EnsureMemberlistKey(ctx, cs.CoreV1(), ns, controllers.MemberlistKeySecret); err != nil {
		t.Fatal(err)
	}
	again, err := admin.CoreV1().Secrets(ns).Get(ctx, controllers.MemberlistKeySecret, metav1.GetOptions{})
	if err != nil || !bytes.Equal(again.Data["key"], key) {
		t.Fatalf("second start changed the key: %v", err)
	}

	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tor-md5", Namespace: ns}, StringData: map[string]string{"password": "x"}}
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cleanup("another Secret", func() error { return admin.CoreV1().Secrets(ns).Delete(ctx, other.Name, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, "tor-md5", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the controller read another Secret: err = %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the controller listed Secrets: err = %v, want Forbidden", err)
	}
}

// TestMemberlistKeyEnsurerWaitsForNamespace: a controller started before its namespace exists
// (kubectl apply of a kustomization in the "wrong" order, the CI's integration test) keeps
// running and creates the Secret as soon as the namespace is there, instead of exiting.
func TestMemberlistKeyEnsurerWaitsForNamespace(t *testing.T) {
	kube.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(cfg)
	ns := fmt.Sprintf("late-namespace-%d", time.Now().UnixNano()%100000)
	e := &controllers.MemberlistKeyEnsurer{Secrets: admin.CoreV1(), Namespace: ns, Name: controllers.MemberlistKeySecret,
		Log: testenv.Logger(t, "controller"), Backoff: 20 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()

	// It has tried (and failed) at least once: the namespace is not there.
	if _, err := admin.CoreV1().Secrets(ns).Get(ctx, controllers.MemberlistKeySecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Secret in a missing namespace: err = %v, want NotFound", err)
	}
	select {
	case err := <-done:
		t.Fatalf("ensurer returned before the namespace exists: %v", err)
	default:
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ensurer: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("no Secret a minute after the namespace was created")
	}
	s, err := admin.CoreV1().Secrets(ns).Get(ctx, controllers.MemberlistKeySecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Data["key"]) != 32 {
		t.Fatalf("key has %d bytes, want 32", len(s.Data["key"]))
	}

	// Stopped while still failing: Start returns nil (a missing namespace never stops the manager).
	stopCtx, stop := context.WithCancel(ctx)
	e2 := &controllers.MemberlistKeyEnsurer{Secrets: admin.CoreV1(), Namespace: ns + "-never", Name: controllers.MemberlistKeySecret,
		Log: testenv.Logger(t, "controller"), Backoff: 20 * time.Millisecond}
	go func() { done <- e2.Start(stopCtx) }()
	stop()
	if err := <-done; err != nil {
		t.Fatalf("stopped ensurer returned %v, want nil", err)
	}
}
