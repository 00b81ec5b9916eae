//go:build !linux

package dataplane

import "net"

// quickAckListener returns ln: TCP_QUICKACK is Linux's (quickack_linux.go).
func quickAckListener(ln net.Listener) net.Listener { return ln }
