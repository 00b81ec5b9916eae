package leaserelease

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/metalgate/metalgate/internal/testenv"
)

// lateWriter is a Lease lock whose Updates find that someone wrote the Lease since it was
// read: before each of its first n Updates, holder (another lock on the same Lease) renews it,
// as a renewal the elector gave up on lands on the API server after the release's read.
type lateWriter struct {
	resourcelock.Interface
	holder   resourcelock.Interface
	n        int
	updates  int
	conflict int
	t        *testing.T
	// cancel, when set, is called at the conflict numbered cancelAt: the release's time runs
	// out there, whatever the machine's speed.
	cancel   func()
	cancelAt int
}

func (l *lateWriter) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.updates++
	if l.updates <= l.n {
		// Its own context: the release's may run out meanwhile.
		cur, _, err := l.holder.Get(context.Background())
		if err != nil {
			l.t.Fatalf("late writer: read: %v", err)
		}
		cur.RenewTime = metav1.NewTime(time.Now())
		if err := l.holder.Update(context.Background(), *cur); err != nil {
			l.t.Fatalf("late writer: renew as %s: %v", l.holder.Identity(), err)
		}
	}
	err := l.Interface.Update(ctx, rec)
	if apierrors.IsConflict(err) {
		l.conflict++
		if l.cancel != nil && l.conflict == l.cancelAt {
			l.cancel()
		}
	}
	return err
}

func TestRelease(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	lock := func(name, id string) *resourcelock.LeaseLock {
		return &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Client: cs.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: id}}
	}
	// hold creates the Lease name held by id.
	hold := func(t *testing.T, name, id string) {
		t.Helper()
		now := metav1.NewTime(time.Now())
		if err := lock(name, id).Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: id, LeaseDurationSeconds: 15,
			AcquireTime: now, RenewTime: now, LeaderTransitions: 3}); err != nil {
			t.Fatalf("create Lease %s held by %s: %v", name, id, err)
		}
	}
	lease := func(t *testing.T, name string) coordinationv1.LeaseSpec {
		t.Helper()
		l, err := cs.CoordinationV1().Leases("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get Lease %s: %v", name, err)
		}
		return l.Spec
	}
	holderOf := func(s coordinationv1.LeaseSpec) string {
		if s.HolderIdentity == nil {
			return ""
		}
		return *s.HolderIdentity
	}
	released := func(t *testing.T, name string) {
		t.Helper()
		s := lease(t, name)
		if h := holderOf(s); h != "" {
			t.Errorf("Lease %s held by %q after the release, want nobody", name, h)
		}
		if s.LeaseDurationSeconds == nil || *s.LeaseDurationSeconds != 1 {
			t.Errorf("Lease %s duration %v after the release, want 1 s", name, s.LeaseDurationSeconds)
		}
		if s.LeaseTransitions == nil || *s.LeaseTransitions != 3 {
			t.Errorf("Lease %s transitions %v after the release, want 3 (kept)", name, s.LeaseTransitions)
		}
	}

	t.Run("held by us", func(t *testing.T) {
		hold(t, "ours", "me")
		ok, err := Release(ctx, lock("ours", "me"))
		if !ok || err != nil {
			t.Fatalf("Release = %v, %v; want true, nil", ok, err)
		}
		released(t, "ours")
	})

	t.Run("held by another", func(t *testing.T) {
		hold(t, "theirs", "other")
		ok, err := Release(ctx, lock("theirs", "me"))
		if ok || err != nil {
			t.Fatalf("Release = %v, %v; want false, nil", ok, err)
		}
		if h := holderOf(lease(t, "theirs")); h != "other" {
			t.Errorf("Lease held by %q, want other (left alone)", h)
		}
	})

	t.Run("no Lease", func(t *testing.T) {
		ok, err := Release(ctx, lock("missing", "me"))
		if ok || err != nil {
			t.Fatalf("Release = %v, %v; want false, nil", ok, err)
		}
		if _, err := cs.CoordinationV1().Leases("default").Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Lease after releasing a missing one: err = %v, want NotFound (none made)", err)
		}
	})

	// The failure seen under load: our own renewal, given up on, lands between the read and
	// the write. client-go's release gives up there and the Lease stays ours until it expires.
	t.Run("our late renewal lands between read and write", func(t *testing.T) {
		hold(t, "late", "me")
		l := &lateWriter{Interface: lock("late", "me"), holder: lock("late", "me"), n: 2, t: t}
		ok, err := Release(ctx, l)
		if !ok || err != nil {
			t.Fatalf("Release = %v, %v; want true, nil", ok, err)
		}
		if l.conflict != 2 {
			t.Errorf("%d conflicts, want 2: the test did not make the race it is about", l.conflict)
		}
		released(t, "late")
	})

	t.Run("another replica takes the Lease between read and write", func(t *testing.T) {
		hold(t, "taken", "me")
		other := lock("taken", "other")
		l := &lateWriter{Interface: lock("taken", "me"), holder: &takeOver{Interface: other}, n: 1, t: t}
		ok, err := Release(ctx, l)
		if ok || err != nil {
			t.Fatalf("Release = %v, %v; want false, nil (not ours any more)", ok, err)
		}
		if h := holderOf(lease(t, "taken")); h != "other" {
			t.Errorf("Lease held by %q, want other (its new holder, left alone)", h)
		}
	})

	t.Run("conflicts until the time runs out", func(t *testing.T) {
		hold(t, "busy", "me")
		tctx, cancel := context.WithCancel(ctx)
		defer cancel()
		l := &lateWriter{Interface: lock("busy", "me"), holder: lock("busy", "me"), n: 1 << 30, t: t, cancel: cancel, cancelAt: 3}
		ok, err := Release(tctx, l)
		if ok || err == nil || !strings.Contains(err.Error(), "still conflicting when the time to release ran out") ||
			!strings.Contains(err.Error(), "default/busy") {
			t.Fatalf("Release = %v, %v; want false and an error naming the Lease and the conflict", ok, err)
		}
		if l.conflict != 3 {
			t.Errorf("%d conflicts, want 3: Release reads and writes again after each until its time runs out", l.conflict)
		}
		if h := holderOf(lease(t, "busy")); h != "me" {
			t.Errorf("Lease held by %q, want me (nothing written but renewals)", h)
		}
	})
}

// takeOver is a lock whose Update makes its identity the holder, as another replica's
// acquisition does.
type takeOver struct{ resourcelock.Interface }

func (o *takeOver) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	rec.HolderIdentity = o.Identity()
	return o.Interface.Update(ctx, rec)
}
