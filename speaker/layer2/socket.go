package layer2

import (
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// reopenDelay is how long a responder waits before reopening a socket that failed.
const reopenDelay = 200 * time.Millisecond

// responderSocket is the life of one responder's socket, the same for ARP and NDP: opened once
// at once (so that a gratuitous burst right after the responder is created has a socket), then
// served until it fails and reopened after reopenDelay — a packet socket returns "network is
// down" once its link goes down and never recovers — until close. Each family gives its hooks.
type responderSocket[C io.Closer] struct {
	family string // "arp" or "ndp": the metric label, upper-cased in logs
	ifi    *net.Interface
	log    logr.Logger
	m      *Metrics
	open   func() (C, error)
	// opened runs with mu held after each successful open, before the socket is served (NDP
	// joins its solicited-node groups on the new socket). Nil: nothing to do.
	opened func(C)
	// serve answers on the socket until it fails, and returns why.
	serve func(C) error

	mu      sync.Mutex // guards conn, live and closed, and the family's state opened touches
	conn    C
	live    bool // conn is open; false while (re)opening
	closed  bool
	closing chan struct{} // closed by close: ends a reopen wait at once
	done    chan struct{} // closed when run has returned
}

// start opens the socket once and serves it, and reopens it, on a goroutine of its own.
func (s *responderSocket[C]) start() {
	s.closing, s.done = make(chan struct{}), make(chan struct{})
	name := strings.ToUpper(s.family)
	c, err := s.open()
	if err != nil {
		s.m.Errors.WithLabelValues(s.family, "open").Inc()
		s.log.Info("open "+name+" socket failed; retrying", "interface", s.ifi.Name, "error", err.Error())
	} else {
		s.use(c)
	}
	go s.run(c, err == nil)
}

// use makes c the current socket; it reports false (and closes c) when the responder was
// closed meanwhile.
func (s *responderSocket[C]) use(c C) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return false
	}
	s.conn, s.live = c, true
	if s.opened != nil {
		s.opened(c)
	}
	return true
}

// run serves c (when live) and every socket after it until close.
func (s *responderSocket[C]) run(c C, live bool) {
	defer close(s.done)
	name := strings.ToUpper(s.family)
	for {
		if !live {
			var err error
			if c, err = s.open(); err != nil {
				s.m.Errors.WithLabelValues(s.family, "open").Inc()
				s.log.V(1).Info("open "+name+" socket failed; retrying", "interface", s.ifi.Name, "error", err.Error())
				if s.wait(reopenDelay) {
					return
				}
				continue
			}
			if !s.use(c) {
				return
			}
		}
		err := s.serve(c)
		s.mu.Lock()
		var none C
		s.conn, s.live = none, false
		closed := s.closed
		s.mu.Unlock()
		_ = c.Close()
		live = false
		if closed {
			return
		}
		s.m.Errors.WithLabelValues(s.family, "read").Inc()
		s.log.Info(name+" socket failed; reopening", "interface", s.ifi.Name, "error", err.Error())
		if s.wait(reopenDelay) {
			return
		}
	}
}

// wait waits d and reports whether the responder was closed meanwhile.
func (s *responderSocket[C]) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.closing:
		return true
	case <-t.C:
		return false
	}
}

// current returns the open socket, or false while it is (re)opening.
func (s *responderSocket[C]) current() (C, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn, s.live
}

// close stops the responder and waits for its goroutine.
func (s *responderSocket[C]) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	if s.live {
		_ = s.conn.Close() // unblocks a read
	}
	s.mu.Unlock()
	<-s.done
}
