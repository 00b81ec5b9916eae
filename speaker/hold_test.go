package speaker_test

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/metalgate/metalgate/internal/testenv"
	"github.com/metalgate/metalgate/speaker/claims"
	"github.com/metalgate/metalgate/speaker/election"
)

// TestHoldThroughReplacement runs real speakers over real memberlists on loopback. The owner
// of layer-2 addresses leaves with a hold (its DaemonSet replaces it on the same node): the
// others keep its addresses with it and take none over, and the new speaker with the same
// node name resumes every one of them from the hold file — including those another node wins
// by rendezvous (it owns them because that node joined later), which would move without the
// hold file. An owner that leaves with a hold and
// does not come back loses its addresses when the hold ends, not before. Without a hold, the
// addresses fail over at once, as before holds.
func TestHoldThroughReplacement(t *testing.T) {
	c := &stickyCluster{t: t, hold: time.Second, names: []string{"n1", "n2", "n3"}, nodes: map[string]*realNode{},
		holdDirs: map[string]string{}}
	// n3 joins last and wins some of n1's addresses by rendezvous; n1 keeps them (sticky).
	const old = "n1"
	late := 0
	for v := netip.MustParseAddr("198.51.100.1"); len(c.vips) < 9; v = v.Next() {
		c.vips = append(c.vips, v)
		if election.Owner(v, c.names[:2]) == old && election.Owner(v, c.names) == "n3" {
			late++
		}
	}
	if late == 0 {
		t.Fatal("n3 wins none of n1's addresses; pick others")
	}
	c.start(0)
	c.start(1)
	c.settle("n1, n2")
	c.start(2)
	first := c.settle("n3 joined")
	var mine, wonByOthers []netip.Addr
	for _, v := range c.vips {
		if first[v] == old {
			mine = append(mine, v)
			if election.Owner(v, c.names) != old {
				wonByOthers = append(wonByOthers, v)
			}
		}
	}
	if len(wonByOthers) == 0 {
		t.Fatalf("%s owns no address that another node wins by rendezvous: %v", old, first)
	}

	// 1. Replaced with a hold: nothing moves, the new speaker resumes its addresses.
	const long = 30 * time.Second // far beyond what the replacement takes
	c.movedFrom(first)
	c.leaveHold.Store(int64(long))
	c.stop(old)
	testenv.Eventually(t, 10*time.Second, "the others hold "+old+"'s addresses", func() error {
		for _, n := range c.running() {
			hs := c.nodes[n].mem.Holds()
			if len(hs) != 1 || hs[0].Node != old || !slices.Equal(hs[0].VIPs, mine) {
				return fmt.Errorf("%s holds %+v, want %s's %v", n, hs, old, mine)
			}
		}
		return nil
	})
	c.leaveHold.Store(0)
	c.start(slices.Index(c.names, old))
	back := c.settle(old + " replaced")
	if !maps.Equal(first, back) {
		t.Errorf("addresses moved through %s's replacement: before %v, after %v", old, first, back)
	}
	if moved := c.movedFrom(first); len(moved) > 0 {
		t.Errorf("addresses moved through %s's replacement: %v", old, moved)
	}
	if _, err := claims.ReadHoldFile(c.holdDirs[old], old, time.Now(), claims.MaxHold); err == nil {
		t.Errorf("the hold file of %s is still there after its replacement resumed it", old)
	}

	// 2. Left with a hold and never back: the addresses fail over when the hold ends.
	const short = 3 * time.Second
	c.leaveHold.Store(int64(short))
	stopped := time.Now()
	c.stop(old)
	c.leaveHold.Store(0)
	var after map[netip.Addr]string
	testenv.Eventually(t, 20*time.Second, "failover after the hold", func() error {
		var err error
		after, err = c.owners()
		return err
	})
	if took := time.Since(stopped); took < short {
		t.Errorf("%s's addresses failed over %v after it left with a hold of %v", old, took, short)
	}
	for _, v := range mine {
		if after[v] == old {
			t.Errorf("%s still owned by %s, which left", v, old)
		}
	}

	// 3. A plain leave (not a rollout): failover at once.
	c.start(slices.Index(c.names, old))
	settled := c.settle(old + " returned")
	victim := settled[c.vips[0]]
	c.movedFrom(settled)
	c.stop(victim)
	stopped = time.Now()
	testenv.Eventually(t, 10*time.Second, "failover at once", func() error {
		_, err := c.owners()
		return err
	})
	if took := time.Since(stopped); took >= short {
		t.Errorf("plain leave: failover took %v", took)
	}
	for _, n := range c.running() {
		if hs := c.nodes[n].mem.Holds(); len(hs) > 0 {
			t.Errorf("%s holds %+v after a plain leave", n, hs)
		}
	}
}
