package dataplane

import (
	"bytes"
	"crypto/tls"
	"strings"
)

// TLS session tickets. Every ticket the proxy issues carries the server name (SNI) of the
// handshake that made it (and on a Gateway, the port: each listener port may be another
// tenant's, through a ListenerSet), and a ticket is resumed only by a handshake for that same
// name and port (RFC 6066, section 3): a session made for one tenant's host is never resumed
// at another's, so it carries neither that host's client certificate nor its handshake over.
// The tickets are encrypted with the keys of s.tickets, a tls.Config used for nothing else:
// this process's own (made and rotated by crypto/tls), or those every replica shares
// (SetSessionTicketKeys).

// sessionServerName prefixes the SessionState.Extra entry that holds the scope (the port on a
// Gateway, else empty), a slash and the server name in lower case.
var sessionServerName = []byte("metalgate/server-name=")

// Outcomes counted by metalgate_proxy_tls_session_tickets_total.
const (
	// ticketResumed: a ticket resumed a session.
	ticketResumed = "resumed"
	// ticketOtherServerName: an authentic ticket made for another server name (or another
	// Gateway port), refused: the handshake goes on in full.
	ticketOtherServerName = "other_server_name"
	// ticketUnknownKey: a ticket no key in use decrypts (made by a process with other keys,
	// or with a key since retired); the handshake goes on in full.
	ticketUnknownKey = "unknown_key"
)

// sessionTickets makes and opens the tickets of c: bound to scope and their server name,
// encrypted with s.tickets's keys.
func (s *Server) sessionTickets(c *tls.Config, scope string) {
	c.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		// crypto/tls makes a new SessionState for every ticket (Extra empty over TCP); were
		// an entry ever carried over, sessionFor's "exactly one" would refuse the ticket.
		ss.Extra = append(ss.Extra, []byte(string(sessionServerName)+scope+"/"+strings.ToLower(cs.ServerName)))
		return s.tickets.Load().EncryptTicket(cs, ss)
	}
	c.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		if len(identity) == 0 {
			return nil, nil // TLS 1.2 asks about every ClientHello, with a ticket or not
		}
		ss, err := s.tickets.Load().DecryptTicket(identity, cs)
		if err != nil || ss == nil {
			s.sessionTicket(ticketUnknownKey)
			return nil, nil // a full handshake, not a failed one
		}
		if !sessionFor(ss, scope, cs.ServerName) {
			s.sessionTicket(ticketOtherServerName)
			return nil, nil
		}
		return ss, nil
	}
}

// sessionFor reports whether ss was made for serverName in scope: it has exactly one
// server-name entry, of scope and equal to serverName but for case.
func sessionFor(ss *tls.SessionState, scope, serverName string) bool {
	found := 0
	ok := false
	for _, e := range ss.Extra {
		if v, has := bytes.CutPrefix(e, sessionServerName); has {
			found++
			sc, name, _ := bytes.Cut(v, []byte("/"))
			ok = string(sc) == scope && strings.EqualFold(string(name), serverName)
		}
	}
	return found == 1 && ok
}

// SetSessionTicketKeys has the proxy encrypt new session tickets with keys[0] and accept
// tickets encrypted with any of keys, in place of keys of its own; every replica given the
// same keys resumes the others' sessions. No keys: keys of its own again (new ones, so the
// tickets it issued before are not resumed).
func (s *Server) SetSessionTicketKeys(keys [][32]byte) {
	t := &tls.Config{}
	if len(keys) > 0 {
		t.SetSessionTicketKeys(keys)
	}
	s.tickets.Store(t)
}
