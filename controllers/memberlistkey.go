package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/metalgate/metalgate/internal/secretkey"
)

// MemberlistKeySecret is the Secret, in the operator's namespace, that holds the speakers'
// memberlist key (data key "key"; "key-*" for more keys during a rotation). The speaker
// DaemonSet mounts it (config/speaker); the controller creates it (EnsureMemberlistKey) so that
// no manifest ships a fixed key.
const MemberlistKeySecret = "metalgate-memberlist"

// memberlistKeySize is the size of a new key: AES-256 is derived from any size, 32 random bytes
// are as strong as it gets.
const memberlistKeySize = 32

// Create cannot be narrowed to one name by RBAC (the name is not known when the request is
// authorised); get can.
// +kubebuilder:rbac:groups="",namespace=metalgate-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=metalgate-system,resources=secrets,resourceNames=metalgate-memberlist,verbs=get

// EnsureMemberlistKey creates the Secret namespace/name with a random key when it does not exist
// (the API server is the lock: replicas starting together end up with one key) and leaves an
// existing one alone, whatever its keys: rotation is the operator's (docs/speaker.md). Every
// controller replica calls it at start, before leader election: the speakers wait for the
// Secret (their pods do not start without it).
func EnsureMemberlistKey(ctx context.Context, secrets corev1client.SecretsGetter, namespace, name string) error {
	_, err := secretkey.Ensure(ctx, secrets, types.NamespacedName{Namespace: namespace, Name: name}, memberlistKeySize,
		map[string]string{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "speaker"})
	if err != nil {
		return fmt.Errorf("memberlist key: %w", err)
	}
	return nil
}
