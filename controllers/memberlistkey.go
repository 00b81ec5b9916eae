package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"

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

// MemberlistKeyEnsurer runs EnsureMemberlistKey in every controller replica (not only the
// leader) until it succeeds. A failure — the namespace not created yet, RBAC not applied yet,
// an API server that is restarting — is logged and retried with a back-off up to a minute;
// the controller goes on allocating addresses meanwhile (the speakers wait for the Secret).
type MemberlistKeyEnsurer struct {
	Secrets   corev1client.SecretsGetter
	Namespace string
	Name      string
	// Log receives one line per failed try (and one when it succeeds after a failure).
	Log logr.Logger
	// Backoff is the first wait after a failure (default 1s); each failure doubles it, up to
	// a minute.
	Backoff time.Duration
}

// NeedLeaderElection is false: every replica makes sure the key exists.
func (e *MemberlistKeyEnsurer) NeedLeaderElection() bool { return false }

// Start tries until the Secret exists or ctx ends; it returns nil in both cases, so that a
// missing namespace never stops the manager.
func (e *MemberlistKeyEnsurer) Start(ctx context.Context) error {
	wait := e.Backoff
	if wait <= 0 {
		wait = time.Second
	}
	failed := false
	for {
		err := EnsureMemberlistKey(ctx, e.Secrets, e.Namespace, e.Name)
		if err == nil {
			if failed {
				e.Log.Info("memberlist key Secret ready", "secret", e.Namespace+"/"+e.Name)
			}
			return nil
		}
		failed = true
		e.Log.Error(err, "cannot make sure the speakers' memberlist key exists; retrying (speakers do not start without it)",
			"secret", e.Namespace+"/"+e.Name, "retryIn", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, time.Minute)
	}
}
