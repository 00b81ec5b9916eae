package speaker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/speaker/claims"
	"github.com/metalgate/metalgate/speaker/membership"
)

// Membership is what the Speaker needs from speaker/membership.
type Membership interface {
	// Live returns the members alive or suspected: the election's candidates.
	Live() map[string]bool
	// Reachable returns the members that answered this node directly and recently: the quorum
	// count (membership.Membership.Reachable).
	Reachable() map[string]bool
	Join(peers []string) (int, error)
	Leave(timeout time.Duration) error
	// Admit sets who may be a member: node name → the node's addresses (World.SpeakerAddrs).
	Admit(nodes map[string][]netip.Addr)
}

// Claims gossips the layer-2 addresses each speaker announces (*membership.Membership
// implements it over speaker/claims).
type Claims interface {
	// Claims returns the addresses each other live member announces, by node; a member has an
	// entry (maybe empty) once its claims arrived (Input.Claims).
	Claims() map[string][]netip.Addr
	// SetClaims publishes the addresses this node announces at layer 2.
	SetClaims(vips []netip.Addr) error
	// Holds returns the valid holds of members that left with one (Input.Holds).
	Holds() []claims.Held
	// LeaveWithHold leaves (Membership.Leave) after telling the others that this node's
	// claims stay valid for hold; it returns the hold sent.
	LeaveWithHold(hold, timeout time.Duration) (claims.Message, error)
}

// Takeover describes an address this node started announcing.
type Takeover struct {
	VIP VIP
	// Previous is the owner in this node's view before, "" if none.
	Previous string
	// Where is where the address is announced (Announcer.Where: the interfaces).
	Where []string
}

// Options configure a Speaker.
type Options struct {
	// Node is this node's name. Required.
	Node string
	// Membership reports live speakers. Required.
	Membership Membership
	// Claims, if set, makes layer-2 ownership sticky: the node announcing an address keeps it
	// while it is a candidate (Decide). Nil: plain rendezvous, an address moves whenever the
	// candidates change.
	Claims Claims
	// Announcers by mode; a mode without one is not announced.
	Announcers map[Mode]Announcer
	// OnTakeover, if set, is called after Announce for each layer-2 address this node took
	// (events on the Service). It must not block for long.
	OnTakeover func(Takeover)
	// Resync is the period of a full sync even without changes. Defaults to 5s.
	Resync time.Duration
	// LeaveTimeout bounds the memberlist leave broadcast on stop. Defaults to 500ms.
	LeaveTimeout time.Duration
	// HoldDown is how long an address must stay elected to this node before it starts
	// announcing it, unless it takes the address from a node that is no longer live (failover,
	// immediate). It covers rebalancing (a node joins or a partition heals): the old owner
	// releases as soon as it sees the new one, and HoldDown gives its view time to converge so
	// that two nodes never answer at once. Defaults to 1s.
	HoldDown time.Duration
	// JoinInterval is how often the speaker re-joins the peers while some expected speaker is
	// not live; memberlist never probes dead members again, so a healed partition only merges
	// through a join. Defaults to 1s.
	JoinInterval time.Duration
	// HoldOnStop, if set (and Claims is), is asked when Run's context ends how long this
	// node's layer-2 addresses stay its own after it leaves: positive only when this speaker
	// is being replaced on the same node (its DaemonSet's rollout), at most claims.MaxHold;
	// 0 leaves as without it (the others take the addresses over at once). It must return
	// within a short deadline of its own.
	HoldOnStop func(ctx context.Context) time.Duration
	// HoldDir, if set, is a directory on the node that outlives the speaker: a speaker leaving
	// with a hold writes it there (claims.WriteHoldFile), and Run resumes a valid hold found
	// there at start (Input.Resume; claims.ReadHoldFile). "": no hold file.
	HoldDir string
	// Logger defaults to logr.Discard().
	Logger logr.Logger
	// Metrics defaults to unregistered metrics.
	Metrics *Metrics
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Speaker turns the World and the membership into announcements. Create it with New, feed it
// with SetWorld and MembershipChanged, and Run it.
type Speaker struct {
	opts    Options
	log     logr.Logger
	m       *Metrics
	trigger chan struct{}
	joinNow chan struct{}

	now func() time.Time

	mu    sync.Mutex
	world *World

	snapshot atomic.Pointer[[]contract.AnnouncementStatus] // what the last sync announced (Announcements)

	// Owned by the goroutine calling sync.
	resume    claims.Held     // this node's previous speaker's hold (Options.HoldDir)
	state     State           // the last decision's (Decide)
	announced map[string]bool // label sets of Announced set last time ("svc|vip|if|mode")
	hadQuorum bool
}

// New returns a Speaker; it announces nothing until Run and the first SetWorld.
func New(opts Options) (*Speaker, error) {
	if opts.Node == "" || opts.Membership == nil {
		return nil, errors.New("speaker: Node and Membership are required")
	}
	if opts.Resync == 0 {
		opts.Resync = 5 * time.Second
	}
	if opts.LeaveTimeout == 0 {
		opts.LeaveTimeout = 500 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HoldDown == 0 {
		opts.HoldDown = time.Second
	}
	if opts.JoinInterval == 0 {
		opts.JoinInterval = time.Second
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	return &Speaker{
		opts: opts, log: opts.Logger, m: opts.Metrics, trigger: make(chan struct{}, 1), joinNow: make(chan struct{}, 1), now: opts.Now,
		announced: map[string]bool{},
	}, nil
}

// SetWorld replaces the cluster view and schedules a sync. The membership admits the
// speakers it lists (World.SpeakerAddrs) from now on.
func (s *Speaker) SetWorld(w World) {
	s.opts.Membership.Admit(w.SpeakerAddrs)
	s.mu.Lock()
	s.world = &w
	s.mu.Unlock()
	s.kick()
	select { // the first World brings the peers: join without waiting for the ticker
	case s.joinNow <- struct{}{}:
	default:
	}
}

// MembershipChanged schedules a sync; wire it to membership.Options.OnChange. It never blocks.
func (s *Speaker) MembershipChanged() { s.kick() }

func (s *Speaker) kick() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Run syncs on every change until ctx ends, then hands over: it leaves the membership (peers
// take the addresses over at once), and only then stops announcing and closes the announcers.
func (s *Speaker) Run(ctx context.Context) error {
	s.resumeHold()
	t := time.NewTicker(s.opts.Resync)
	defer t.Stop()
	joinCtx, stopJoin := context.WithCancel(ctx)
	joined := make(chan struct{})
	go func() {
		defer close(joined)
		s.joinLoop(joinCtx)
	}()
	for {
		select {
		case <-ctx.Done():
			// Leave first: a join blocked on an unreachable peer must not delay the handover.
			stopJoin()
			err := s.stop(ctx)
			<-joined
			return err
		case <-s.trigger:
		case <-t.C:
		}
		if err := s.sync(ctx); err != nil {
			s.m.Syncs.WithLabelValues("error").Inc()
			s.log.Error(err, "Sync failed")
			continue
		}
		s.m.Syncs.WithLabelValues("ok").Inc()
	}
}

// joinLoop joins the peers at start and then whenever an expected speaker is missing from the
// live set. Join blocks on unreachable peers (TCP timeout), hence its own goroutine.
func (s *Speaker) joinLoop(ctx context.Context) {
	t := time.NewTicker(s.opts.JoinInterval)
	defer t.Stop()
	for {
		s.mu.Lock()
		w := s.world
		s.mu.Unlock()
		if w != nil && len(w.Peers) > 0 {
			live := s.opts.Membership.Live()
			missing := slices.ContainsFunc(w.Speakers, func(n string) bool { return !live[n] })
			if missing {
				if n, err := s.opts.Membership.Join(w.Peers); err != nil {
					s.log.V(1).Info("join peers", "reached", n, "error", err.Error())
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.joinNow:
		}
	}
}

// resumeHold reads the hold the previous speaker on this node left (Options.HoldDir), and
// claims its addresses before this speaker joins, so that the others see them claimed from
// its first push/pull; each decision checks them again (Input.Resume).
func (s *Speaker) resumeHold() {
	if s.opts.HoldDir == "" || s.opts.Claims == nil {
		return
	}
	h, err := claims.ReadHoldFile(s.opts.HoldDir, s.opts.Node, s.now(), claims.MaxHold)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		s.m.Holds.WithLabelValues(HoldRefused).Inc()
		s.log.Error(err, "Ignoring the hold file of the previous speaker")
		return
	}
	s.resume = h
	s.m.Holds.WithLabelValues(HoldResumed).Inc()
	s.log.Info("resuming the previous speaker's layer-2 addresses", "vips", len(h.VIPs), "until", h.Until())
	if len(h.VIPs) > claims.MaxVIPs {
		h.VIPs = h.VIPs[:claims.MaxVIPs]
	}
	if err := s.opts.Claims.SetClaims(h.VIPs); err != nil {
		s.log.Error(err, "Claiming the resumed addresses failed")
	}
}

// leave leaves the membership, with a hold when Options.HoldOnStop asks for one (written to
// Options.HoldDir for the next speaker on this node too).
func (s *Speaker) leave(ctx context.Context) error {
	var hold time.Duration
	if s.opts.HoldOnStop != nil && s.opts.Claims != nil {
		hold = min(s.opts.HoldOnStop(context.WithoutCancel(ctx)), claims.MaxHold).Truncate(time.Millisecond)
	}
	if hold <= 0 {
		s.m.Holds.WithLabelValues(HoldNone).Inc()
		s.log.Info("leaving the speaker cluster")
		return s.opts.Membership.Leave(s.opts.LeaveTimeout)
	}
	s.m.Holds.WithLabelValues(HoldGiven).Inc()
	s.log.Info("leaving the speaker cluster with a hold: replaced on this node", "hold", hold.String())
	msg, err := s.opts.Claims.LeaveWithHold(hold, s.opts.LeaveTimeout)
	if s.opts.HoldDir != "" && msg.Hold > 0 && len(msg.VIPs) > 0 { // nothing to resume: no file
		if werr := claims.WriteHoldFile(s.opts.HoldDir, msg, s.now()); werr != nil {
			err = errors.Join(err, fmt.Errorf("write the hold for the next speaker: %w", werr))
		}
	}
	return err
}

func (s *Speaker) stop(ctx context.Context) error {
	err := s.leave(ctx)
	for _, mode := range slices.Sorted(maps.Keys(s.opts.Announcers)) {
		err = errors.Join(err, s.opts.Announcers[mode].Close())
	}
	s.m.Announced.Reset()
	s.snapshot.Store(nil)
	return err
}

// MayAnnounce reports whether this speaker has quorum right now (membership.Quorum over
// Membership.Reachable, which is time-based). Layer 2 checks it before every answer
// (layer2.Options.Gate), closing the window between losing quorum and the next sync.
func (s *Speaker) MayAnnounce() bool {
	s.mu.Lock()
	w := s.world
	s.mu.Unlock()
	if w == nil {
		return false
	}
	return membership.Quorum(s.opts.Node, s.opts.Membership.Reachable(), w.Speakers)
}

// sync decides what this node announces now (Decide, pure) and applies it: hands each mode's
// set to its Announcer, records takeovers and metrics. Run calls it (tests through
// export_test.go). Calls must not overlap.
func (s *Speaker) sync(ctx context.Context) error {
	s.mu.Lock()
	w := s.world
	s.mu.Unlock()
	if w == nil {
		return nil // no view of the cluster yet: announce nothing
	}
	live := s.opts.Membership.Live()
	quorum := membership.Quorum(s.opts.Node, s.opts.Membership.Reachable(), w.Speakers)
	s.m.Members.Set(float64(len(live)))
	s.m.Expected.Set(float64(len(w.Speakers)))
	s.m.Quorum.Set(b2f(quorum))
	if quorum != s.hadQuorum {
		s.log.Info("quorum changed", "quorum", quorum, "live", len(live), "expected", len(w.Speakers))
		s.hadQuorum = quorum
	}
	in := Input{Node: s.opts.Node, World: w, Live: live, Quorum: quorum, Previous: s.state, Now: s.now(), HoldDown: s.opts.HoldDown, Resume: s.resume}
	if s.opts.Claims != nil {
		in.Claims = s.opts.Claims.Claims()
		in.Holds = s.opts.Claims.Holds()
	}
	d := Decide(in)
	if d.Wake > 0 {
		time.AfterFunc(d.Wake, s.kick)
	}
	for _, mode := range []Mode{ModeLayer2, ModeBGP} {
		s.m.WithoutAnnouncer.WithLabelValues(string(mode)).Set(float64(d.WithoutAnnouncer[mode]))
	}

	var errs []error
	for _, mode := range slices.Sorted(maps.Keys(s.opts.Announcers)) {
		if err := s.opts.Announcers[mode].Announce(ctx, w.Modes[mode], d.Desired[mode]); err != nil {
			errs = append(errs, fmt.Errorf("announce %s: %w", mode, err))
		}
	}

	s.m.Held.Set(float64(d.Held))
	if s.opts.Claims != nil {
		own := d.Claims
		if len(own) > claims.MaxVIPs {
			own = own[:claims.MaxVIPs] // the rest falls back to plain rendezvous (docs/speaker.md)
		}
		if err := s.opts.Claims.SetClaims(own); err != nil {
			errs = append(errs, fmt.Errorf("publish layer-2 claims: %w", err))
		}
	}

	l2 := s.opts.Announcers[ModeLayer2]
	for _, st := range d.Started {
		var where []string
		if l2 != nil {
			where = l2.Where(st.VIP.VIP)
		}
		s.m.Takeovers.WithLabelValues(st.VIP.VIP.String()).Inc()
		if st.Previous != "" {
			s.m.Failovers.Inc()
		}
		s.log.Info("announcing", "vip", st.VIP.VIP.String(), "service", st.VIP.Service, "interfaces", where, "previousOwner", st.Previous)
		if s.opts.OnTakeover != nil {
			s.opts.OnTakeover(Takeover{VIP: st.VIP, Previous: st.Previous, Where: where})
		}
	}
	for _, st := range d.Stopped {
		s.log.Info("stopped announcing", "vip", st.VIP.String(), "newOwner", st.Owner, "quorum", quorum)
	}
	s.state = d.Next
	s.updateAnnounced(d.Desired)
	s.updateSnapshot(d.Desired)
	return errors.Join(errs...)
}

// updateAnnounced sets the announced metric: one series per layer-2 address and interface, and
// one per BGP address (interface "").
func (s *Speaker) updateAnnounced(desired map[Mode][]Announcement) {
	next := map[string]bool{}
	for mode, as := range desired {
		ann := s.opts.Announcers[mode]
		for _, a := range as {
			ifaces := []string{""}
			if mode == ModeLayer2 && ann != nil {
				ifaces = ann.Where(a.VIP)
			}
			for _, i := range ifaces {
				next[a.Service+"|"+a.VIP.String()+"|"+i+"|"+string(mode)] = true
			}
		}
	}
	for k := range s.announced {
		if !next[k] {
			s.m.Announced.DeleteLabelValues(splitKey(k)...)
		}
	}
	for k := range next {
		if !s.announced[k] {
			s.m.Announced.WithLabelValues(splitKey(k)...).Set(1)
		}
	}
	s.announced = next
}

func splitKey(k string) []string {
	out := make([]string, 0, 4)
	start := 0
	for i := 0; i < len(k); i++ {
		if k[i] == '|' {
			out = append(out, k[start:i])
			start = i + 1
		}
	}
	return append(out, k[start:])
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
