package secretkey

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// DataKey is the key of the Secret's data that holds the key.
const DataKey = "key"

// MinSize is the shortest key accepted from an existing Secret.
const MinSize = 16

// Ensure returns the key in Secret id (data key DataKey), creating the Secret with size
// random bytes when it does not exist. An existing Secret whose key is shorter than MinSize
// is an error, not replaced: a person put it there. labels go on a Secret it creates.
func Ensure(ctx context.Context, secrets corev1client.SecretsGetter, id types.NamespacedName, size int, labels map[string]string) ([]byte, error) {
	if size < MinSize {
		return nil, fmt.Errorf("key size %d: want at least %d bytes", size, MinSize)
	}
	api := secrets.Secrets(id.Namespace)
	for try := 0; try < 3; try++ {
		s, err := api.Get(ctx, id.Name, metav1.GetOptions{})
		if err == nil {
			return keyOf(s, id)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get Secret %s: %w", id, err)
		}
		key := make([]byte, size)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generate key: %w", err)
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.Name, Labels: labels},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{DataKey: key},
		}
		created, err := api.Create(ctx, s, metav1.CreateOptions{})
		if err == nil {
			return keyOf(created, id)
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create Secret %s: %w", id, err)
		}
		// Another replica created it first: read its key.
	}
	return nil, fmt.Errorf("secret %s: created and deleted again while reading it", id)
}

func keyOf(s *corev1.Secret, id types.NamespacedName) ([]byte, error) {
	key := s.Data[DataKey]
	if len(key) < MinSize {
		return nil, fmt.Errorf("secret %s: data.%s has %d bytes, want at least %d (delete the Secret to have a new key made)", id, DataKey, len(key), MinSize)
	}
	return key, nil
}
