package membership

import (
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
)

// Options configure a Membership.
type Options struct {
	// Name is this speaker's name in the cluster: the node name. Required.
	Name string
	// BindAddr is the address memberlist listens on (UDP and TCP): the node IP. Required.
	BindAddr string
	// BindPort defaults to 7946; 0 after defaulting is not possible, use -1 for a random port
	// (tests).
	BindPort int
	// Logger receives memberlist's own log at V(1). Defaults to logr.Discard().
	Logger logr.Logger
	// OnChange is called, on memberlist's goroutine, whenever a member joins, leaves, dies or
	// changes. It must not block.
	OnChange func()
	// Tune, if set, may change the memberlist configuration after the defaults of Config.
	Tune func(*memberlist.Config)
	// PingInterval is how often every member is pinged directly for Reachable. Defaults to 50ms.
	PingInterval time.Duration
	// FenceWindow is how recent a member's last ping answer must be for Reachable. Defaults to
	// 250ms: shorter than the quickest possible failure declaration by the others
	// (ProbeInterval + suspicion = 450ms), so a cut-off speaker fences first.
	FenceWindow time.Duration
}

// Config returns the memberlist configuration used by New, tuned for sub-second failure
// detection on a LAN (docs/speaker.md derives the worst case):
//
//	ProbeInterval           150ms  each member probes one other member per interval
//	ProbeTimeout            100ms  wait for a direct ack before asking others to probe
//	IndirectChecks          2      members asked to probe indirectly
//	SuspicionMult           2      suspect → dead after 2 × max(1, log10(n)) × ProbeInterval = 300ms (n < 10)
//	SuspicionMaxTimeoutMult 2      (no effect while SuspicionMult-2 < 1 confirmation is needed)
//	AwarenessMaxMultiplier  2      a slow (overloaded) member stretches its probes at most 2×
//	GossipInterval          50ms   suspect/dead/alive messages spread within ~2 rounds
//	GossipToTheDeadTime     2s
//	PushPullInterval        10s    full state sync (anti-entropy)
//	TCPTimeout              1s
func Config(name string) *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.Name = name
	c.ProbeInterval = 150 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.IndirectChecks = 2
	c.SuspicionMult = 2
	c.SuspicionMaxTimeoutMult = 2
	c.AwarenessMaxMultiplier = 2
	c.GossipInterval = 50 * time.Millisecond
	c.GossipToTheDeadTime = 2 * time.Second
	c.PushPullInterval = 10 * time.Second
	c.TCPTimeout = time.Second
	return c
}

// Membership is this speaker's view of the live speakers.
type Membership struct {
	name     string
	ml       *memberlist.Memberlist
	onChange func()
	every    time.Duration
	window   time.Duration
	stop     chan struct{}
	done     chan struct{}

	mu        sync.Mutex
	left      bool
	lastAck   map[string]time.Time
	inflight  map[string]bool
	reachable map[string]bool // last computed, for change detection
}

// New starts memberlist on opts.BindAddr:opts.BindPort. It knows only itself until Join.
func New(opts Options) (*Membership, error) {
	if opts.Name == "" || opts.BindAddr == "" {
		return nil, errors.New("membership: Name and BindAddr are required")
	}
	c := Config(opts.Name)
	c.BindAddr, c.AdvertiseAddr = opts.BindAddr, opts.BindAddr
	switch {
	case opts.BindPort == 0:
		c.BindPort = 7946
	case opts.BindPort < 0:
		c.BindPort = 0
	default:
		c.BindPort = opts.BindPort
	}
	c.AdvertisePort = c.BindPort
	lg := opts.Logger
	if lg.GetSink() == nil {
		lg = logr.Discard()
	}
	c.Logger = log.New(logWriter{lg.V(1)}, "", 0)
	if opts.OnChange != nil {
		c.Events = events(opts.OnChange)
	}
	if opts.Tune != nil {
		opts.Tune(c)
	}
	ml, err := memberlist.Create(c)
	if err != nil {
		return nil, fmt.Errorf("start memberlist on %s:%d: %w", opts.BindAddr, c.BindPort, err)
	}
	m := &Membership{
		name: opts.Name, ml: ml, onChange: opts.OnChange, every: opts.PingInterval, window: opts.FenceWindow,
		stop: make(chan struct{}), done: make(chan struct{}),
		lastAck: map[string]time.Time{}, inflight: map[string]bool{}, reachable: map[string]bool{},
	}
	if m.every == 0 {
		m.every = 50 * time.Millisecond
	}
	if m.window == 0 {
		m.window = 250 * time.Millisecond
	}
	go m.pingLoop()
	return m, nil
}

// pingLoop pings every known member each interval and calls onChange when Reachable changes.
// memberlist itself probes one member per ProbeInterval and slows down when it is the one in
// trouble (Lifeguard), which is right for failure detection but too slow for fencing: a
// cut-off node would notice its isolation after the others have declared it dead.
func (m *Membership) pingLoop() {
	defer close(m.done)
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		for _, n := range m.ml.Members() {
			if n.Name == m.name {
				continue
			}
			m.mu.Lock()
			busy := m.inflight[n.Name]
			m.inflight[n.Name] = true
			m.mu.Unlock()
			if busy {
				continue
			}
			addr := &net.UDPAddr{IP: n.Addr, Port: int(n.Port)}
			go func(name string) {
				_, err := m.ml.Ping(name, addr)
				m.mu.Lock()
				defer m.mu.Unlock()
				delete(m.inflight, name)
				if err == nil {
					m.lastAck[name] = time.Now()
				}
			}(n.Name)
		}
		r := m.Reachable()
		m.mu.Lock()
		changed := !maps.Equal(r, m.reachable)
		m.reachable = r
		m.mu.Unlock()
		if changed && m.onChange != nil {
			m.onChange()
		}
	}
}

// Reachable returns the members that answered a direct ping within FenceWindow, and this one.
// Quorum counts these: a speaker that cannot reach a majority fences itself within
// FenceWindow + PingInterval, before the others can declare it dead and take its addresses.
func (m *Membership) Reachable() map[string]bool {
	now := time.Now()
	out := map[string]bool{m.name: true}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, at := range m.lastAck {
		if now.Sub(at) <= m.window {
			out[name] = true
		}
	}
	return out
}

// Name is this speaker's name.
func (m *Membership) Name() string { return m.name }

// Port is the port memberlist listens on.
func (m *Membership) Port() int { return int(m.ml.LocalNode().Port) }

// Join contacts the given peers ("host:port") and returns how many answered. Peers already known
// are skipped cheaply by memberlist's push/pull.
func (m *Membership) Join(peers []string) (int, error) {
	if len(peers) == 0 {
		return 0, nil
	}
	return m.ml.Join(peers)
}

// Live returns the names of the members that are alive or only suspected, including this one.
func (m *Membership) Live() map[string]bool {
	out := map[string]bool{m.name: true}
	for _, n := range m.ml.Members() {
		out[n.Name] = true
	}
	return out
}

// Leave tells the others that this speaker goes away, so they take over at once instead of
// after failure detection, then stops memberlist. It waits at most timeout for the broadcast.
func (m *Membership) Leave(timeout time.Duration) error {
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return nil
	}
	m.left = true
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	err := m.ml.Leave(timeout)
	if serr := m.ml.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// Shutdown stops memberlist without telling anyone, as a crash would (tests).
func (m *Membership) Shutdown() error {
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return nil
	}
	m.left = true
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	return m.ml.Shutdown()
}

// events adapts a callback to memberlist.EventDelegate.
type events func()

func (f events) NotifyJoin(*memberlist.Node)   { f() }
func (f events) NotifyLeave(*memberlist.Node)  { f() }
func (f events) NotifyUpdate(*memberlist.Node) { f() }

// logWriter turns memberlist's log lines into logr entries.
type logWriter struct{ l logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.l.Info(strings.TrimSpace(string(p)), "component", "memberlist")
	return len(p), nil
}

var _ io.Writer = logWriter{}
