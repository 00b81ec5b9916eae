// Package leaserelease gives a leader-election Lease up on the way out, so that another replica
// takes it at once instead of when it expires.
//
// client-go's ReleaseOnCancel reads the Lease and writes it back once: when a renewal the
// elector gave up on (its context ended while the request was on the wire) still lands on the
// API server between that read and that write, the write conflicts and the Lease stays held
// until it expires. Release reads again after a conflict, and writes only while the Lease still
// names this identity: a late renewal of our own is overtaken, another holder is left alone.
package leaserelease

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// retryPause is the pause between a conflict and the next read.
const retryPause = 50 * time.Millisecond

// Release writes lock's record holder-less, expiring in a second (what client-go's
// ReleaseOnCancel writes), if the Lease is held by lock's identity. It reads the Lease again
// after each conflict until ctx ends. It reports whether it released the Lease; false with a
// nil error means there was nothing of ours to release (no Lease, or another holder).
func Release(ctx context.Context, lock resourcelock.Interface) (bool, error) {
	for {
		rec, _, err := lock.Get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("read Lease %s: %w", lock.Describe(), err)
		case rec.HolderIdentity != lock.Identity():
			return false, nil
		}
		now := metav1.NewTime(time.Now())
		err = lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
			LeaderTransitions: rec.LeaderTransitions})
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, fmt.Errorf("release Lease %s: %w", lock.Describe(), err)
		}
		t := time.NewTimer(retryPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("release Lease %s: still conflicting when the time to release ran out: %w", lock.Describe(), err)
		case <-t.C:
		}
	}
}
