package main

import (
	"fmt"
	"net/netip"
	"strings"
)

// kindPoolSize is how many addresses at the top of the kind network the pool takes.
const kindPoolSize = 32

// kindPool returns the manifests of the IPAddressPool "default" and its L2Advertisement for a
// kind cluster: the top kindPoolSize addresses (below broadcast) of the first IPv4 network
// among cidrs (docker network inspect kind lists IPv4 and IPv6 subnets). Docker hands out
// container addresses from the bottom of the range, so the top is free.
func kindPool(cidrs []string) (string, error) {
	var v4 netip.Prefix
	for _, c := range cidrs {
		for _, f := range strings.Fields(c) {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return "", fmt.Errorf("%q: %w", f, err)
			}
			if p.Addr().Is4() && !v4.IsValid() {
				v4 = p.Masked()
			}
		}
	}
	if !v4.IsValid() {
		return "", fmt.Errorf("no IPv4 network among %q (docker network inspect kind)", cidrs)
	}
	if v4.Bits() > 24 {
		return "", fmt.Errorf("network %s is too small: want /24 or larger", v4)
	}
	first, last := poolRange(v4, kindPoolSize)
	return fmt.Sprintf(`# Written by make cluster from the kind Docker network %s: the top of its range, which
# Docker does not hand out to containers, answered by ARP from one node.
apiVersion: metalgate.io/v1alpha1
kind: IPAddressPool
metadata:
  name: default
  namespace: metalgate-system
spec:
  addresses:
    - %s-%s
---
apiVersion: metalgate.io/v1alpha1
kind: L2Advertisement
metadata:
  name: default
  namespace: metalgate-system
spec:
  ipAddressPools:
    - default
`, v4, first, last), nil
}

// poolRange returns the n addresses just below the broadcast address of p (IPv4).
func poolRange(p netip.Prefix, n int) (netip.Addr, netip.Addr) {
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	lastU := (base | host) - 1 // below broadcast
	firstU := lastU - uint32(n) + 1
	conv := func(u uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
	}
	return conv(firstU), conv(lastU)
}
