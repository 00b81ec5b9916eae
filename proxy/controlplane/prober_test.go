package controlplane

import (
	"context"
	"errors"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/internal/testenv"
)

// hangingReader answers List for Ingresses only when ctx ends (an API server that accepts the
// request and never answers), and fails every other List at once, telling failed which kind.
type hangingReader struct {
	failed chan string
}

func (r *hangingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("not used")
}

func (r *hangingReader) List(ctx context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if _, ok := list.(*networkingv1.IngressList); ok {
		<-ctx.Done()
		return ctx.Err()
	}
	select {
	case r.failed <- typeName(list):
	default:
	}
	return errors.New("connection refused")
}

func typeName(l client.ObjectList) string {
	switch l.(type) {
	case *networkingv1.IngressClassList:
		return KindIngressClass
	}
	return "other"
}

// TestProberKindsAtOnce: a kind whose probe hangs does not hold back the others' probes. The
// Ingress probe (the first kind) hangs for its whole timeout, a minute here; the IngressClass
// probe must fail, and be recorded as failing, while it still hangs. Probed one after
// another, IngressClass would be asked only after the Ingress probe gave up.
func TestProberKindsAtOnce(t *testing.T) {
	r := &hangingReader{failed: make(chan string, 16)}
	fresh := NewFreshness(time.Hour, KindIngress, KindIngressClass)
	p := &prober{reader: r, fresh: fresh, opts: Options{ProbeInterval: 10 * time.Millisecond}, timeout: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Start(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	deadline := time.After(20 * time.Second)
	for {
		select {
		case k := <-r.failed:
			if k != KindIngressClass {
				continue
			}
		case <-deadline:
			t.Fatal("no IngressClass probe within 20 s while the Ingress probe hangs: the kinds are probed one after another")
		}
		break
	}
	// Failed is recorded right after List returns.
	testenv.Eventually(t, 10*time.Second, "the failed IngressClass probe recorded", func() error {
		for _, k := range fresh.Snapshot() {
			if k.Kind == KindIngressClass && k.Broken {
				return nil
			}
		}
		return errors.New("IngressClass not reported broken")
	})
}
