package layer2

import (
	"errors"
	"net"
)

// errNotOpen is returned when a gratuitous send finds the responder's socket still (re)opening.
var errNotOpen = errors.New("socket not open")

// socketFailed tells a socket error (reopen) from a bad packet (skip it): mdlayher/arp and
// mdlayher/ndp return both from Read, and a stray malformed frame must not make a responder
// deaf while it reopens.
func socketFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, net.ErrClosed)
}
