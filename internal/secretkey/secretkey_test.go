package secretkey

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/metalgate/metalgate/internal/testenv"
)

// TestEnsure runs against a real API server: the first call creates the Secret, replicas
// starting together all get the one key, and a short key that a person put there is an
// error naming the field, not silently replaced.
func TestEnsure(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(testenv.Start(t, testenv.Options{}).Config)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	id := types.NamespacedName{Namespace: "ns", Name: "shared"}
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := Ensure(ctx, cs.CoreV1(), id, 32, map[string]string{"app": "test"})
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	for i, k := range keys {
		if len(k) != 32 || string(k) != string(keys[0]) {
			t.Fatalf("replica %d got key %x, replica 0 %x", i, k, keys[0])
		}
	}
	s, err := cs.CoreV1().Secrets("ns").Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || s.Labels["app"] != "test" {
		t.Fatalf("secret: %v, labels %v", err, s.Labels)
	}

	short := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "short"}, Data: map[string][]byte{DataKey: []byte("abc")}}
	if _, err := cs.CoreV1().Secrets("ns").Create(ctx, short, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = Ensure(ctx, cs.CoreV1(), types.NamespacedName{Namespace: "ns", Name: "short"}, 32, nil)
	if err == nil || !strings.Contains(err.Error(), "data.key has 3 bytes") {
		t.Errorf("short key: %v, want an error naming data.key", err)
	}
	if _, err := Ensure(ctx, cs.CoreV1(), id, 8, nil); err == nil {
		t.Error("size 8 accepted")
	}
}
