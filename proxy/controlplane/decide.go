package controlplane

import (
	"fmt"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// action is what the status publisher does with one Ingress's status.
type action int

const (
	// actNothing leaves the status as it is (already right, or our last write is not in the
	// cache yet).
	actNothing action = iota
	// actWrite writes statusDecision.Addrs, the own Service's addresses.
	actWrite
	// actClear clears status.loadBalancer, which this proxy wrote.
	actClear
	// actYield leaves the status to another writer (statusDecision.Yield).
	actYield
	// actWait writes nothing now: backing off, or waiting for a foreign writer we stopped
	// fighting to be quiet. statusDecision.Until says when to look again (zero: only when
	// something changes).
	actWait
	// actRecheck asks for the arbitration on the live Services of the Ingress's namespace
	// before another writer's value is replaced; decide again with decideInput.Live set.
	actRecheck
)

func (a action) String() string {
	switch a {
	case actNothing:
		return "nothing"
	case actWrite:
		return "write"
	case actClear:
		return "clear"
	case actYield:
		return "yield"
	case actWait:
		return "wait"
	case actRecheck:
		return "recheck"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// rival is the arbitration's verdict on one Ingress: Lost when another metalgate proxy,
// Winner, publishes its status.
type rival struct {
	Lost   bool
	Winner Candidate
}

// statusPolicy is how the publisher treats a writer that keeps replacing its value
// (Options.ConflictWindow, MaxConflicts, BackoffBase, BackoffMax, ForeignQuiet).
type statusPolicy struct {
	ConflictWindow time.Duration
	MaxConflicts   int
	BackoffBase    time.Duration
	BackoffMax     time.Duration
	ForeignQuiet   time.Duration
}

func (o Options) statusPolicy() statusPolicy {
	return statusPolicy{ConflictWindow: o.ConflictWindow, MaxConflicts: o.MaxConflicts,
		BackoffBase: o.BackoffBase, BackoffMax: o.BackoffMax, ForeignQuiet: o.ForeignQuiet}
}

// maxQuietStops is the stop after which only the annotation, or the other writer letting go
// of the status, brings a stopped proxy back: a writer that keeps taking the status back is
// given it for good, so the status changes a bounded number of times in all.
const maxQuietStops = 3

// quietNeeded is how long the status must stay unchanged before a stopped proxy writes
// again: ForeignQuiet after the first stop, twice that after the second, never (0) after the
// third.
func (p statusPolicy) quietNeeded(stops int) time.Duration {
	if stops >= maxQuietStops {
		return 0
	}
	return p.ForeignQuiet << max(stops-1, 0)
}

// decideInput is what the publisher knows about one Ingress when it decides its status.
type decideInput struct {
	Now    time.Time
	Policy statusPolicy
	// Self is this proxy: its publish Service and its field manager.
	Self         types.NamespacedName
	FieldManager string
	// Owned: the Ingress is of a class this proxy serves (ingress.Owns).
	Owned bool
	// ResourceVersion of the Ingress as cached.
	ResourceVersion string
	// Current is status.loadBalancer.ingress now; Mine whether our field manager owns it
	// (managedFields); OtherWriter the other field manager that last wrote it ("" if none).
	Current     []networkingv1.IngressLoadBalancerIngress
	Mine        bool
	OtherWriter string
	// StatusOwner is the Ingress's metalgate.io/status-owner annotation ("" if none).
	StatusOwner string
	// Want are the own Service's addresses; NoAddress says why there are none ("" when
	// there are).
	Want      []networkingv1.IngressLoadBalancerIngress
	NoAddress string
	// Cached is the arbitration on the cached Services; Live on the API server's, nil until
	// asked for (actRecheck).
	Cached rival
	Live   *rival
	// State is what the publisher remembers about the Ingress (zero value: nothing yet).
	State statusState
}

// yieldTo is to whom and why the publisher leaves an Ingress's status.
type yieldTo struct {
	// Why is yieldProxy, yieldAnnotation or yieldForeign.
	Why string
	// To names the writer: the winning proxy's Service, the annotation's value, the foreign
	// field manager.
	To string
	// Winner is the proxy that wins (yieldProxy).
	Winner Candidate
}

// statusDecision is what to do with one Ingress's status, why, and what to remember.
type statusDecision struct {
	Action action
	// Reason says why, for logs and tests.
	Reason string
	// Addrs to write (actWrite).
	Addrs []networkingv1.IngressLoadBalancerIngress
	// Yield: to whom the status is left (actYield).
	Yield yieldTo
	// Until is when to look again without a change (zero: no need).
	Until time.Time
	// Next is the state to remember; Forget: drop it (the Ingress is no longer ours). After
	// a successful write the publisher records it in Next (wrote, basedOn).
	Next   statusState
	Forget bool

	// What the publisher reports besides the action:
	//
	// NoAddressEvent: a Warning NoAddress for NoAddress (once per reason and Ingress).
	NoAddressEvent bool
	// ReportYield: the yield is new (an Event and a log line); each yield is reported once
	// per Ingress and writer, each stop for a foreign writer every time.
	ReportYield bool
	// Conflict: another writer replaced our value again; the rewrite backs off
	// (Next.backoff). A Warning StatusConflict and a count.
	Conflict bool
	// Stopped: we stop writing for the foreign writer (yieldForeign) after Overwrites
	// overwrites within ConflictWindow. A count; the yield's Event says so.
	Stopped    bool
	Overwrites int
	// ResumedFrom: we write again after having yielded for this reason (a log line).
	ResumedFrom string
	// ResumedForeign: we write again after stopping for this foreign writer, which let go of
	// the status (LetGo) or was quiet long enough (a log line).
	ResumedForeign string
	LetGo          bool
}

// decide is the status publisher's policy for one Ingress, without effects:
//
//	our write not cached yet ─► nothing        not ours (any more) ─► clear what we wrote
//	no address ─► report, clear what we wrote (never a foreign status)
//	the annotation names another writer, another proxy wins ─► yield
//	foreign writer stopped ─► wait for it to let go or be quiet
//	already right ─► nothing
//	our value replaced ─► a proxy that wins live: yield; else count: back off, then stop (yield foreign)
//	backing off ─► wait      another writer's value ─► recheck live; lose ─► yield      else ─► write
//
// Before it replaces a value another writer put there (and is not forced by the annotation),
// it decides on the live Services (actRecheck), since the proxy that wrote it may be newer
// than the cache.
func decide(in decideInput) statusDecision {
	st := in.State
	st.overwrites = slices.Clone(st.overwrites) // never touch the caller's state
	d := statusDecision{}
	if st.basedOn != "" && st.basedOn == in.ResourceVersion {
		d.Reason = "our last write is not in the cache yet"
		d.Next = st
		return d
	}
	st.basedOn = ""
	cur := in.Current
	if !in.Owned {
		d.Forget, d.Reason = true, "not an Ingress of our classes"
		if in.Mine && len(cur) > 0 {
			d.Action = actClear
			d.Reason += "; clearing what we wrote"
		}
		return d
	}
	if in.NoAddress != "" {
		st.yielded, st.reported = "", ""
		d.NoAddressEvent = st.noAddrWhy != in.NoAddress
		st.noAddrWhy = in.NoAddress
		d.Reason = "no address: " + in.NoAddress
		if in.Mine && len(cur) > 0 {
			d.Action = actClear
			d.Reason += "; clearing what we wrote"
		}
		d.Next = st
		return d
	}
	st.noAddrWhy = ""
	want, now := in.Want, in.Now

	// Who writes: the writer the annotation names (forced when that is us), else the winner
	// of the arbitration between metalgate proxies.
	forced := false
	if owner := in.StatusOwner; owner != "" {
		if owner != in.FieldManager && owner != in.Self.String() {
			return d.yield(st, yieldTo{Why: yieldAnnotation, To: owner}, "the status-owner annotation names "+owner)
		}
		forced = true
	} else if in.Cached.Lost {
		return d.yield(st, yieldTo{Why: yieldProxy, To: in.Cached.Winner.Service.String(), Winner: in.Cached.Winner},
			"metalgate proxy "+in.Cached.Winner.Service.String()+" wins the arbitration")
	}
	if st.yielded == yieldProxy || st.yielded == yieldAnnotation || forced && st.yielded != "" {
		d.ResumedFrom = st.yielded
		st.yielded, st.reported, st.stoppedBy = "", "", ""
	}

	// A foreign writer we stopped fighting: wait until it lets go of the status or has been
	// quiet long enough (not after the third stop). When we resume, the conflict history
	// starts afresh.
	if st.stoppedBy != "" {
		if v := formatAddresses(cur); v != st.lastSeen {
			st.lastSeen, st.quietSince = v, now
		}
		letGo := len(cur) == 0 || in.OtherWriter != st.stoppedBy
		quiet := in.Policy.quietNeeded(st.stops)
		if !letGo && (quiet == 0 || now.Before(st.quietSince.Add(quiet))) {
			d.Action, d.Next = actWait, st
			d.Reason = "stopped for foreign writer " + st.stoppedBy + "; waiting for it to let go of the status"
			if quiet > 0 {
				d.Until = st.quietSince.Add(quiet)
				d.Reason += fmt.Sprintf(" or be quiet for %s", quiet)
			}
			return d
		}
		d.ResumedForeign, d.LetGo = st.stoppedBy, letGo
		st.stoppedBy, st.yielded, st.reported = "", "", ""
		st.overwrites, st.backoff, st.notBefore = nil, 0, time.Time{}
	}

	if sameAddresses(cur, want) {
		d.Reason, d.Next = "already right", st
		return d
	}
	if st.wrote != nil && !in.Mine && sameAddresses(st.wrote, want) {
		// We wrote this value and someone replaced it: a proxy that outranks us (newer than
		// our cache), or a conflict.
		if !forced {
			if in.Live == nil {
				return d.recheck(st)
			}
			if in.Live.Lost {
				return d.yield(st, yieldTo{Why: yieldProxy, To: in.Live.Winner.Service.String(), Winner: in.Live.Winner},
					"our value was replaced and metalgate proxy "+in.Live.Winner.Service.String()+" wins on the live Services")
			}
		}
		n := st.countOverwrite(now, in.Policy.ConflictWindow)
		st.wrote = nil // counted; the next rewrite sets it again
		if !forced && (n >= in.Policy.MaxConflicts || st.stops > 0) {
			// Stop writing it for the foreign writer.
			st.stops++
			st.stoppedBy, st.lastSeen, st.quietSince = in.OtherWriter, formatAddresses(cur), now
			d.Stopped, d.Overwrites = true, len(st.overwrites)
			st.reported = "" // each stop is reported
			d = d.yield(st, yieldTo{Why: yieldForeign, To: in.OtherWriter},
				fmt.Sprintf("replaced %d time(s) by foreign writer %q; stop %d", n, in.OtherWriter, st.stops))
			d.Next.stoppedBy = in.OtherWriter
			if q := in.Policy.quietNeeded(st.stops); q > 0 {
				d.Until = d.Next.quietSince.Add(q)
			}
			return d
		}
		if n >= 2 {
			st.backOff(now, in.Policy.BackoffBase, in.Policy.BackoffMax)
			d.Conflict = true
		}
	}
	if now.Before(st.notBefore) {
		d.Action, d.Until, d.Next = actWait, st.notBefore, st
		d.Reason = fmt.Sprintf("backing off %s after another writer replaced our value", st.backoff)
		return d
	}
	if !forced && len(cur) > 0 && !in.Mine {
		// About to replace another writer's value: decide again on the live Services of
		// the Ingress's namespace; the proxy that wrote it may be newer than our cache.
		if in.Live == nil {
			return d.recheck(st)
		}
		if in.Live.Lost {
			return d.yield(st, yieldTo{Why: yieldProxy, To: in.Live.Winner.Service.String(), Winner: in.Live.Winner},
				"metalgate proxy "+in.Live.Winner.Service.String()+" wins on the live Services")
		}
	}
	d.Action, d.Addrs, d.Next = actWrite, want, st
	d.Reason = "publishing " + formatAddresses(want)
	return d
}

// yield leaves the status to another writer: it forgets our value and conflict history and
// reports the yield unless it was reported to the same writer for the same reason before.
func (d statusDecision) yield(st statusState, y yieldTo, reason string) statusDecision {
	st.yielded = y.Why
	st.wrote, st.overwrites, st.backoff, st.notBefore = nil, nil, 0, time.Time{}
	if key := y.Why + ":" + y.To; st.reported != key {
		st.reported, d.ReportYield = key, true
	}
	d.Action, d.Yield, d.Reason, d.Next = actYield, y, reason, st
	return d
}

// recheck asks for the live arbitration; nothing of this pass is remembered.
func (d statusDecision) recheck(st statusState) statusDecision {
	d.Action, d.Next = actRecheck, st
	d.Reason = "about to replace another writer's value: deciding again on the live Services"
	return d
}

// countOverwrite records an overwrite of our value at now and returns how many happened
// within window up to now (older ones are forgotten).
func (st *statusState) countOverwrite(now time.Time, window time.Duration) int {
	cutoff := now.Add(-window)
	kept := st.overwrites[:0]
	for _, t := range st.overwrites {
		if t.After(cutoff) {
			kept = append(kept, t)
		}
	}
	st.overwrites = append(kept, now)
	return len(st.overwrites)
}

// backOff delays the next rewrite: base the first time, then doubling up to most.
func (st *statusState) backOff(now time.Time, base, most time.Duration) {
	if st.backoff == 0 {
		st.backoff = base
	} else {
		st.backoff = min(st.backoff*2, most)
	}
	st.notBefore = now.Add(st.backoff)
}
