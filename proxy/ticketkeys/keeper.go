package ticketkeys

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Keeper reads the shared keys from a Secret, rotates them when due, and hands the keys in
// use to Set.
type Keeper struct {
	Secrets corev1client.SecretsGetter
	Secret  types.NamespacedName
	Policy  Policy
	// Poll is how often the Secret is read; Policy.Promote should be at least twice that.
	Poll time.Duration
	// Set receives the keys in use, the encrypting one first, whenever they change: after a
	// read, and as time promotes or expires the keys last read (also while the Secret
	// cannot be read). nil: no shared key is live, use keys of the process's own.
	Set func(keys [][Size]byte)
	// Labels go on a Secret the Keeper creates.
	Labels  map[string]string
	Metrics *Metrics
	Log     logr.Logger
	// Now and Rand: time.Now and crypto/rand when nil (tests set them).
	Now  func() time.Time
	Rand io.Reader

	problems string       // the last problems logged, so that each set is logged once
	known    []Key        // the keys last read
	inUse    [][Size]byte // what Set was last given
	applied  bool         // Set has been called
}

// Metrics are the Keeper's: reads of the Secret by result, and the encrypting key's age.
type Metrics struct {
	Syncs    *prometheus.CounterVec
	KeyMade  prometheus.Gauge
	Rotation prometheus.Counter
}

// NewMetrics registers the Keeper's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalgate_proxy_tls_ticket_key_syncs_total",
			Help: "Reads of the shared TLS session ticket key Secret, by result (ok, error: the keys in use stay as they were).",
		}, []string{"result"}),
		KeyMade: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metalgate_proxy_tls_ticket_key_created_timestamp_seconds",
			Help: "When the TLS session ticket key that encrypts new tickets was made (Unix seconds); 0 until the shared keys are read.",
		}),
		Rotation: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metalgate_proxy_tls_ticket_key_rotations_total",
			Help: "TLS session ticket keys this replica made (rotations it won).",
		}),
	}
	m.Syncs.WithLabelValues("ok")
	m.Syncs.WithLabelValues("error")
	reg.MustRegister(m.Syncs, m.KeyMade, m.Rotation)
	return m
}

func (k *Keeper) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

func (k *Keeper) random() io.Reader {
	if k.Rand != nil {
		return k.Rand
	}
	return rand.Reader
}

// Run syncs at once and then every Poll until ctx ends. A failed sync is counted, and logged
// as an error when its error differs from the last one (the same one again at V(1), so that a
// lasting failure is not a line every Poll); the keys in use stay as they were.
func (k *Keeper) Run(ctx context.Context) {
	t := time.NewTicker(k.Poll)
	defer t.Stop()
	last := ""
	for {
		err := k.Sync(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil && err.Error() != last:
			k.Log.Error(err, "TLS session ticket keys not read; the keys in use stay", "secret", k.Secret)
			last = err.Error()
		case err != nil:
			k.Log.V(1).Info("TLS session ticket keys still not read", "secret", k.Secret, "error", err.Error())
		case last != "":
			k.Log.Info("TLS session ticket keys read again", "secret", k.Secret)
			last = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync reads the Secret (creating it when missing), rotates its keys when due and hands the
// keys in use to Set.
func (k *Keeper) Sync(ctx context.Context) error {
	err := k.sync(ctx)
	k.apply(k.now())
	if k.Metrics != nil {
		result := "ok"
		if err != nil {
			result = "error"
		}
		k.Metrics.Syncs.WithLabelValues(result).Inc()
	}
	return err
}

func (k *Keeper) sync(ctx context.Context) error {
	api := k.Secrets.Secrets(k.Secret.Namespace)
	for try := 0; try < 3; try++ {
		now := k.now()
		s, err := api.Get(ctx, k.Secret.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			s, err = k.create(ctx, now)
			if apierrors.IsAlreadyExists(err) {
				continue // another replica made it first: read it
			}
		}
		if err != nil {
			return fmt.Errorf("secret %s: %w", k.Secret, err)
		}
		keys, problems := Parse(s.Data, now)
		k.report(problems)
		if k.Policy.Due(keys, now) {
			updated, err := k.rotate(ctx, s, now)
			if apierrors.IsConflict(err) {
				continue // another replica rotated (or someone edited it): read it again
			}
			if err != nil {
				return fmt.Errorf("rotate the keys in Secret %s: %w", k.Secret, err)
			}
			keys, _ = Parse(updated.Data, now)
		}
		k.known = keys
		return nil
	}
	return fmt.Errorf("secret %s: changed by others on each of 3 tries", k.Secret)
}

func (k *Keeper) create(ctx context.Context, now time.Time) (*corev1.Secret, error) {
	data, added, _, err := k.Policy.Rotate(nil, now, k.random())
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.Secret.Namespace, Name: k.Secret.Name, Labels: k.Labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	created, err := k.Secrets.Secrets(k.Secret.Namespace).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	k.Log.Info("created the TLS session ticket key Secret", "secret", k.Secret, "key", added.Name())
	if k.Metrics != nil {
		k.Metrics.Rotation.Inc()
	}
	return created, nil
}

func (k *Keeper) rotate(ctx context.Context, s *corev1.Secret, now time.Time) (*corev1.Secret, error) {
	data, added, dropped, err := k.Policy.Rotate(s.Data, now, k.random())
	if err != nil {
		return nil, err
	}
	s = s.DeepCopy()
	s.Data = data
	updated, err := k.Secrets.Secrets(k.Secret.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	k.Log.Info("rotated the TLS session ticket keys", "secret", k.Secret, "added", added.Name(), "dropped", dropped)
	if k.Metrics != nil {
		k.Metrics.Rotation.Inc()
	}
	return updated, nil
}

// apply hands Set the keys in use at now among those last read, when they changed: a read
// changed them, a new key was promoted, or keys expired (nil when none is live).
func (k *Keeper) apply(now time.Time) {
	ordered, enc := k.Policy.InUse(k.known, now)
	if k.applied && slices.Equal(ordered, k.inUse) {
		return
	}
	if len(ordered) == 0 && !k.applied {
		return // nothing read yet: the process's own keys are in use already
	}
	k.Set(ordered)
	k.inUse, k.applied = ordered, true
	if len(ordered) == 0 {
		k.Log.Info("no shared TLS session ticket key is live (the Secret could not be read or rotated): keys of this process's own until it can", "secret", k.Secret)
	}
	if k.Metrics != nil {
		made := 0.0
		if len(ordered) > 0 {
			made = float64(enc.Created.Unix())
		}
		k.Metrics.KeyMade.Set(made)
	}
}

// report logs the Secret's problems when they differ from the last ones logged.
func (k *Keeper) report(problems []string) {
	joined := strings.Join(problems, "; ")
	if joined == k.problems {
		return
	}
	k.problems = joined
	if len(problems) > 0 {
		k.Log.Error(errors.New(joined), "entries of the TLS session ticket key Secret are not used (fix or delete them)", "secret", k.Secret, "entries", slices.Clip(problems))
	}
}
