package table

import (
	"fmt"
	"net/netip"
	"strings"
)

// OutsideAuth is an authentication service outside the cluster: an auth-url whose host the
// install lists (--external-auth-hosts). The data plane dials Name (resolved at dial time;
// an address that is loopback, link-local, unspecified or multicast is refused then, so a
// name that changes what it resolves to gains nothing) at Port, over TLS (verified against
// Name) when Scheme is https. Namespace is the Ingress's: connections to the service are
// pooled per namespace.
type OutsideAuth struct {
	Scheme    string // "http" or "https"
	Name      string // lower case, no trailing dot; never an address
	Port      int
	Namespace string
}

// Addr is the service's host:port, as dialled.
func (o *OutsideAuth) Addr() string { return fmt.Sprintf("%s:%d", o.Name, o.Port) }

// HostList is the list of outside host names auth-url may name (--external-auth-hosts):
// exact names, and "*.suffix" for any name ending in ".suffix" (one label or more before it;
// never the suffix itself). The zero value lists none.
type HostList struct {
	exact    map[string]bool
	suffixes []string // ".example.org"
}

// ParseHostList parses a comma-separated host list. An entry must be a DNS name (letters,
// digits, '-', dot-separated labels), optionally "*." and such a name; an address, a port,
// a scheme or a wildcard anywhere else is an error naming the entry.
func ParseHostList(s string) (HostList, error) {
	var l HostList
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(e)), ".")
		if e == "" {
			continue
		}
		name, wild := strings.CutPrefix(e, "*.")
		if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
			return HostList{}, fmt.Errorf("external auth host %q: an address, not a host name (addresses are never asked)", e)
		}
		if !ValidDNSName(name) {
			return HostList{}, fmt.Errorf("external auth host %q: not a host name or *.name (letters, digits and '-' in dot-separated labels)", e)
		}
		if wild {
			l.suffixes = append(l.suffixes, "."+name)
			continue
		}
		if l.exact == nil {
			l.exact = map[string]bool{}
		}
		l.exact[name] = true
	}
	return l, nil
}

// Allows reports whether name (any case, with or without a trailing dot) is listed. An
// address never is.
func (l HostList) Allows(name string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if !ValidDNSName(name) {
		return false
	}
	if l.exact[name] {
		return true
	}
	for _, s := range l.suffixes {
		if len(name) > len(s) && strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// Empty reports whether the list allows no host.
func (l HostList) Empty() bool { return len(l.exact) == 0 && len(l.suffixes) == 0 }

// ValidDNSName reports whether s is a host name of dot-separated labels of letters, digits and
// '-' (not at a label's ends), with at least one letter in its last label: never an address
// in any of the spellings a resolver accepts ("127.1", "0x7f.1", "2130706433").
func ValidDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return strings.Trim(labels[len(labels)-1], "0123456789") != "" && !strings.HasPrefix(labels[len(labels)-1], "0x")
}
