package controllers

import (
	"encoding/hex"
	"net/netip"
	"strings"
)

// ClaimName is the name of the IPAddressClaim for addr: "v4-100-64-0-1" for IPv4 and "v6-"
// followed by the 32 hex digits of the address for IPv6. Names are a bijection with
// addresses, which is what makes the API server's name uniqueness a lock on the address.
func ClaimName(addr netip.Addr) string {
	addr = addr.Unmap()
	if addr.Is4() {
		return "v4-" + strings.ReplaceAll(addr.String(), ".", "-")
	}
	b := addr.As16()
	return "v6-" + hex.EncodeToString(b[:])
}
