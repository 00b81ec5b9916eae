package allocator

import (
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func ips(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = ip(s)
	}
	return out
}

func asg(pool string, addrs ...string) Assignment {
	return Assignment{Pool: pool, Addresses: ips(addrs...)}
}

// svc returns a request for Service ns/name with an IPv4 SingleStack default.
func svc(key string) Request {
	ns, _, _ := strings.Cut(key, "/")
	return Request{Key: key, Namespace: ns}
}

func matchLabel(k, v string) LabelMatcher {
	return func(l map[string]string) bool { return l[k] == v }
}

func tcp(ports ...int32) []Port {
	out := make([]Port, len(ports))
	for i, p := range ports {
		out[i] = Port{Protocol: "TCP", Port: p}
	}
	return out
}

// step is one operation on the scenario's allocator. do returns the operation's result,
// compared with want unless wantErr is set; wantMsg, when set, must appear in the error.
type step struct {
	desc    string
	do      func(a *Allocator) (any, error)
	want    any
	wantErr error
	wantMsg string
}

func setPools(pools ...Pool) func(*Allocator) (any, error) {
	return func(a *Allocator) (any, error) { r, err := a.SetPools(pools); return r, err }
}

func assign(r Request) func(*Allocator) (any, error) {
	return func(a *Allocator) (any, error) { return a.Assign(r) }
}

func restore(r Request, addrs ...string) func(*Allocator) (any, error) {
	return func(a *Allocator) (any, error) { return a.Restore(r, ips(addrs...)) }
}

func release(key string) func(*Allocator) (any, error) {
	return func(a *Allocator) (any, error) { a.Release(key); return nil, nil }
}

// held returns the key's Assignment, or nil when it holds nothing.
func held(key string) func(*Allocator) (any, error) {
	return func(a *Allocator) (any, error) {
		if h, ok := a.Holding(key); ok {
			return h, nil
		}
		return nil, nil
	}
}

func holders(addr string) func(*Allocator) (any, error) {
	return func(a *Allocator) (any, error) { return a.HoldersOf(ip(addr)), nil }
}

// poolOf returns the covering pool name, or "" when none.
func poolOf(addr string) func(*Allocator) (any, error) {
	return func(a *Allocator) (any, error) { p, _ := a.PoolOf(ip(addr)); return p, nil }
}

// stats returns the pool's stats, or nil for an unknown pool.
func stats(pool string) func(*Allocator) (any, error) {
	return func(a *Allocator) (any, error) {
		if s, ok := a.Stats(pool); ok {
			return s, nil
		}
		return nil, nil
	}
}

func overlaps() func(*Allocator) (any, error) {
	return func(a *Allocator) (any, error) { return a.Overlaps(), nil }
}

var (
	v6only   = []Family{IPv6}
	v4first  = []Family{IPv4, IPv6}
	v6first  = []Family{IPv6, IPv4}
	noStrs   []string
	addrCmp  = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	emptyCmp = cmpopts.EquateEmpty()
)

func with(r Request, edit func(*Request)) Request { edit(&r); return r }

// sharingConflict asks whether Services x and y (sharing key "s", ports 80 and 443) may hold
// addr of pool together; the result is "<nil>" or the error's sentinel.
func sharingConflict(addr, pool, x, y string) func(*Allocator) (any, error) {
	return func(a *Allocator) (any, error) {
		rx := with(svc(x), func(r *Request) { r.SharingKey = "s"; r.Ports = tcp(80) })
		ry := with(svc(y), func(r *Request) { r.SharingKey = "s"; r.Ports = tcp(443) })
		switch err := a.SharingConflict(netip.MustParseAddr(addr), pool, rx, ry); {
		case err == nil:
			return "<nil>", nil
		case errors.Is(err, ErrSharingRefused):
			return "sharing refused", nil
		default:
			return err.Error(), nil
		}
	}
}

func TestAllocatorSteps(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "first free, exhaustion of a /30, release and reuse",
			steps: []step{
				{desc: "one /30 pool", do: setPools(Pool{Name: "web", Addresses: []string{"10.0.0.0/30"}, AutoAssign: true}), want: noStrs},
				{desc: "a gets the lowest", do: assign(svc("ns/a")), want: asg("web", "10.0.0.0")},
				{desc: "b next", do: assign(svc("ns/b")), want: asg("web", "10.0.0.1")},
				{desc: "c next", do: assign(svc("ns/c")), want: asg("web", "10.0.0.2")},
				{desc: "d takes the last", do: assign(svc("ns/d")), want: asg("web", "10.0.0.3")},
				{desc: "e: pool exhausted", do: assign(svc("ns/e")), wantErr: ErrPoolExhausted, wantMsg: `pool "web": no free IPv4 address: allocator: pool exhausted`},
				{desc: "e holds nothing after the failure", do: held("ns/e"), want: nil},
				{desc: "a again: idempotent", do: assign(svc("ns/a")), want: asg("web", "10.0.0.0")},
				{desc: "stats full", do: stats("web"), want: PoolStats{AssignedV4: 4}},
				{desc: "release b", do: release("ns/b")},
				{desc: "release of an unknown key is a no-op", do: release("ns/nobody")},
				{desc: "b holds nothing", do: held("ns/b"), want: nil},
				{desc: "e reuses the lowest free (b's)", do: assign(svc("ns/e")), want: asg("web", "10.0.0.1")},
				{desc: "holders of .1", do: holders("10.0.0.1"), want: []string{"ns/e"}},
				{desc: "holders of a free address", do: holders("10.0.0.9"), want: noStrs},
				{desc: "holders via an IPv4-mapped address", do: holders("::ffff:10.0.0.1"), want: []string{"ns/e"}},
				{desc: "stats", do: stats("web"), want: PoolStats{AssignedV4: 4, AvailableV4: 0}},
				{desc: "unknown pool stats", do: stats("nope"), want: nil},
				{desc: "release d, c", do: release("ns/d")},
				{desc: "release c", do: release("ns/c")},
				{desc: "f gets .2, the lowest", do: assign(svc("ns/f")), want: asg("web", "10.0.0.2")},
				{desc: "stats after releases", do: stats("web"), want: PoolStats{AssignedV4: 3, AvailableV4: 1}},
			},
		},
		{
			name: "/32, /128 and range pools",
			steps: []step{
				{desc: "pools", do: setPools(
					Pool{Name: "one", Addresses: []string{"192.0.2.1/32"}, AutoAssign: true},
					Pool{Name: "six", Addresses: []string{"2001:db8::7/128"}, AutoAssign: true},
					Pool{Name: "range", Addresses: []string{"198.51.100.10 - 198.51.100.11", "198.51.100.12-198.51.100.12"}, AutoAssign: true},
				), want: noStrs},
				{desc: "the /32 first (name order: one < range)", do: assign(svc("ns/a")), want: asg("one", "192.0.2.1")},
				{desc: "then the range", do: assign(svc("ns/b")), want: asg("range", "198.51.100.10")},
				{desc: "SingleStack IPv6 from the /128", do: assign(with(svc("ns/v6"), func(r *Request) { r.Families = v6only })), want: asg("six", "2001:db8::7")},
				{desc: "second IPv6: exhausted", do: assign(with(svc("ns/v6b"), func(r *Request) { r.Families = v6only })), wantErr: ErrPoolExhausted, wantMsg: `pool "six": no free IPv6 address`},
				{desc: "range continues", do: assign(svc("ns/c")), want: asg("range", "198.51.100.11")},
				{desc: "adjacent entries are merged", do: assign(svc("ns/d")), want: asg("range", "198.51.100.12")},
				{desc: "both v4 pools exhausted", do: assign(svc("ns/e")), wantErr: ErrPoolExhausted, wantMsg: `pools "one", "range": no free IPv4 address`},
				{desc: "stats /128", do: stats("six"), want: PoolStats{AssignedV6: 1}},
				{desc: "stats range", do: stats("range"), want: PoolStats{AssignedV4: 3}},
			},
		},
		{
			name: "avoidBuggyIPs",
			steps: []step{
				{desc: "pool across a /24 boundary", do: setPools(
					Pool{Name: "b", Addresses: []string{"10.0.0.254-10.0.1.1", "10.0.2.0/32"}, AutoAssign: true, AvoidBuggyIPs: true},
				), want: noStrs},
				{desc: "stats count only usable addresses", do: stats("b"), want: PoolStats{AvailableV4: 2}},
				{desc: ".254 first", do: assign(svc("ns/a")), want: asg("b", "10.0.0.254")},
				{desc: ".255 and .0 skipped", do: assign(svc("ns/b")), want: asg("b", "10.0.1.1")},
				{desc: "exhausted", do: assign(svc("ns/c")), wantErr: ErrPoolExhausted},
				{desc: "requesting a .0 address", do: assign(with(svc("ns/c"), func(r *Request) { r.Addresses = ips("10.0.1.0") })), wantErr: ErrNotInPool, wantMsg: "avoidBuggyIPs"},
				{desc: "restoring a .255 address", do: restore(svc("ns/c"), "10.0.0.255"), wantErr: ErrNotInPool, wantMsg: "avoidBuggyIPs"},
				{desc: "PoolOf a .0 address", do: poolOf("10.0.1.0"), want: ""},
				{desc: "PoolOf a usable address", do: poolOf("10.0.1.1"), want: "b"},
				{desc: "stats", do: stats("b"), want: PoolStats{AssignedV4: 2}},
				{desc: "avoidBuggyIPs does not apply to IPv6", do: setPools(
					Pool{Name: "b6", Addresses: []string{"2001:db8::ff-2001:db8::100"}, AutoAssign: true, AvoidBuggyIPs: true},
				), want: []string{"ns/a", "ns/b"}},
				{desc: "::ff is usable", do: assign(with(svc("ns/c"), func(r *Request) { r.Families = v6only })), want: asg("b6", "2001:db8::ff")},
				{desc: "::100 is usable", do: assign(with(svc("ns/d"), func(r *Request) { r.Families = v6only })), want: asg("b6", "2001:db8::100")},
			},
		},
		{
			name: "autoAssign=false pools only by name or requested address",
			steps: []step{
				{desc: "pools", do: setPools(
					Pool{Name: "manual", Addresses: []string{"10.1.0.0/30"}},
					Pool{Name: "auto", Addresses: []string{"10.2.0.0/30"}, AutoAssign: true},
				), want: noStrs},
				{desc: "no pool requested: the auto pool", do: assign(svc("ns/a")), want: asg("auto", "10.2.0.0")},
				{desc: "by pool name", do: assign(with(svc("ns/b"), func(r *Request) { r.Pool = "manual" })), want: asg("manual", "10.1.0.0")},
				{desc: "by requested address", do: assign(with(svc("ns/c"), func(r *Request) { r.Addresses = ips("10.1.0.2") })), want: asg("manual", "10.1.0.2")},
				{desc: "requested address and matching pool", do: assign(with(svc("ns/d"), func(r *Request) { r.Addresses = ips("10.1.0.3"); r.Pool = "manual" })), want: asg("manual", "10.1.0.3")},
				{desc: "requested address outside the requested pool", do: assign(with(svc("ns/e"), func(r *Request) { r.Addresses = ips("10.2.0.3"); r.Pool = "manual" })), wantErr: ErrNotInPool, wantMsg: `not in the requested pool "manual" (it is in "auto")`},
				{desc: "unknown pool", do: assign(with(svc("ns/e"), func(r *Request) { r.Pool = "gold" })), wantErr: ErrNoSuchPool, wantMsg: `pool "gold"`},
				{desc: "b stays in the manual pool without naming it (autoAssign not re-checked)", do: assign(svc("ns/b")), want: asg("manual", "10.1.0.0")},
				{desc: "only the manual pool left", do: setPools(Pool{Name: "manual", Addresses: []string{"10.1.0.0/30"}}), want: []string{"ns/a"}},
				{desc: "no auto-assign pool", do: assign(svc("ns/f")), wantErr: ErrFamilyUnavailable, wantMsg: "no eligible auto-assign pool has IPv4 addresses"},
			},
		},
		{
			name: "requested addresses",
			steps: []step{
				{desc: "pools", do: setPools(Pool{Name: "p", Addresses: []string{"10.0.0.0/29", "2001:db8::/125"}, AutoAssign: true}), want: noStrs},
				{desc: "a requests .5", do: assign(with(svc("ns/a"), func(r *Request) { r.Addresses = ips("10.0.0.5") })), want: asg("p", "10.0.0.5")},
				{desc: "b requests the same", do: assign(with(svc("ns/b"), func(r *Request) { r.Addresses = ips("10.0.0.5") })), wantErr: ErrInUse, wantMsg: "address 10.0.0.5 is already used by Service ns/a"},
				{desc: "requested as IPv4-mapped IPv6", do: assign(with(svc("ns/b"), func(r *Request) { r.Addresses = ips("::ffff:10.0.0.6") })), want: asg("p", "10.0.0.6")},
				{desc: "address in no pool", do: assign(with(svc("ns/c"), func(r *Request) { r.Addresses = ips("192.0.2.1") })), wantErr: ErrNotInPool, wantMsg: "192.0.2.1 of ns/c is not in any address pool"},
				{desc: "zone rejected", do: assign(with(svc("ns/c"), func(r *Request) { r.Families = v6only; r.Addresses = []netip.Addr{ip("2001:db8::1").WithZone("eth0")} })), wantErr: ErrInvalidAddress},
				{desc: "v6 address for a v4 SingleStack Service", do: assign(with(svc("ns/c"), func(r *Request) { r.Addresses = ips("2001:db8::1") })), wantErr: ErrInvalidAddress, wantMsg: "must request exactly one IPv4 address"},
				{desc: "two v4 addresses", do: assign(with(svc("ns/c"), func(r *Request) { r.Policy = PreferDualStack; r.Addresses = ips("10.0.0.1", "10.0.0.2") })), wantErr: ErrInvalidAddress, wantMsg: "more than one IPv4"},
				{desc: "dual-stack requested, listed v4 first for a v6-first Service", do: assign(with(svc("ns/c"), func(r *Request) {
					r.Policy = RequireDualStack
					r.Families = v6first
					r.Addresses = ips("10.0.0.1", "2001:db8::3")
				})), want: asg("p", "2001:db8::3", "10.0.0.1")},
				{desc: "a moves when its requested address changes", do: assign(with(svc("ns/a"), func(r *Request) { r.Addresses = ips("10.0.0.7") })), want: asg("p", "10.0.0.7")},
				{desc: ".5 is free again", do: holders("10.0.0.5"), want: noStrs},
				{desc: "a keeps .7 when it stops requesting it", do: assign(svc("ns/a")), want: asg("p", "10.0.0.7")},
				{desc: "auto allocation skips held addresses", do: assign(svc("ns/d")), want: asg("p", "10.0.0.0")},
				{desc: "and the next", do: assign(svc("ns/e")), want: asg("p", "10.0.0.2")},
				{desc: "bad request: no key", do: assign(Request{}), wantErr: ErrInvalidRequest},
				{desc: "bad request: unknown family", do: assign(with(svc("ns/z"), func(r *Request) { r.Families = []Family{5} })), wantErr: ErrInvalidRequest},
				{desc: "bad request: unknown policy", do: assign(with(svc("ns/z"), func(r *Request) { r.Policy = 7 })), wantErr: ErrInvalidRequest},
			},
		},
		{
			name: "priority ordering, 0 after positive priorities",
			steps: []step{
				{desc: "pools", do: setPools(
					Pool{Name: "alpha", Addresses: []string{"10.0.0.1/32"}, AutoAssign: true},
					Pool{Name: "zeta", Addresses: []string{"10.0.0.2/32"}, AutoAssign: true, Priority: 1},
					Pool{Name: "beta", Addresses: []string{"10.0.0.3/32"}, AutoAssign: true, Priority: 2},
					Pool{Name: "gamma", Addresses: []string{"10.0.0.4/32"}, AutoAssign: true, Priority: 1},
				), want: noStrs},
				{desc: "priority 1, name gamma < zeta", do: assign(svc("ns/a")), want: asg("gamma", "10.0.0.4")},
				{desc: "priority 1 zeta", do: assign(svc("ns/b")), want: asg("zeta", "10.0.0.2")},
				{desc: "priority 2", do: assign(svc("ns/c")), want: asg("beta", "10.0.0.3")},
				{desc: "priority 0 last", do: assign(svc("ns/d")), want: asg("alpha", "10.0.0.1")},
				{desc: "all full", do: assign(svc("ns/e")), wantErr: ErrPoolExhausted},
			},
		},
		{
			name: "serviceAllocation eligibility",
			steps: []step{
				{desc: "pools", do: setPools(
					Pool{Name: "ns-list", Addresses: []string{"10.1.0.0/30"}, AutoAssign: true, Priority: 1, Namespaces: []string{"team-a"}},
					Pool{Name: "ns-sel", Addresses: []string{"10.2.0.0/30"}, AutoAssign: true, Priority: 2, NamespaceSelectors: []LabelMatcher{matchLabel("env", "prod")}},
					Pool{Name: "svc-sel", Addresses: []string{"10.3.0.0/30"}, AutoAssign: true, Priority: 3, ServiceSelectors: []LabelMatcher{matchLabel("app", "web")}},
					Pool{Name: "both", Addresses: []string{"10.4.0.0/30"}, AutoAssign: true, Priority: 4,
						Namespaces: []string{"team-b"}, NamespaceSelectors: []LabelMatcher{matchLabel("env", "stage")}, ServiceSelectors: []LabelMatcher{matchLabel("tier", "edge")}},
				), want: noStrs},
				{desc: "namespace in the list", do: assign(svc("team-a/x")), want: asg("ns-list", "10.1.0.0")},
				{desc: "namespace matching the selector", do: assign(with(svc("other/x"), func(r *Request) { r.NamespaceLabels = map[string]string{"env": "prod"} })), want: asg("ns-sel", "10.2.0.0")},
				{desc: "service matching the service selector", do: assign(with(svc("other/y"), func(r *Request) { r.ServiceLabels = map[string]string{"app": "web"} })), want: asg("svc-sel", "10.3.0.0")},
				{desc: "team-b without the service label: no pool", do: assign(svc("team-b/x")), wantErr: ErrFamilyUnavailable},
				{desc: "team-b with the service label", do: assign(with(svc("team-b/x"), func(r *Request) { r.ServiceLabels = map[string]string{"tier": "edge"} })), want: asg("both", "10.4.0.0")},
				{desc: "namespace selector OR list, AND service selector", do: assign(with(svc("st/x"), func(r *Request) {
					r.NamespaceLabels = map[string]string{"env": "stage"}
					r.ServiceLabels = map[string]string{"tier": "edge"}
				})), want: asg("both", "10.4.0.1")},
				{desc: "requesting an ineligible pool", do: assign(with(svc("team-c/x"), func(r *Request) { r.Pool = "ns-list" })), wantErr: ErrPoolNotEligible, wantMsg: `pool "ns-list"`},
				{desc: "requesting an address of an ineligible pool", do: assign(with(svc("team-c/x"), func(r *Request) { r.Addresses = ips("10.1.0.3") })), wantErr: ErrNotInPool, wantMsg: `only in pool "ns-list"`},
				{desc: "service label removed: moves to an eligible pool", do: assign(svc("other/y")), wantErr: ErrFamilyUnavailable},
				{desc: "label back: reallocated", do: assign(with(svc("other/y"), func(r *Request) { r.ServiceLabels = map[string]string{"app": "web"} })), want: asg("svc-sel", "10.3.0.0")},
				{desc: "namespace label changed: moves from ns-sel to svc-sel", do: assign(with(svc("other/x"), func(r *Request) {
					r.NamespaceLabels = map[string]string{"env": "dev"}
					r.ServiceLabels = map[string]string{"app": "web"}
				})), want: asg("svc-sel", "10.3.0.1")},
				{desc: "ns-sel is empty again", do: stats("ns-sel"), want: PoolStats{AvailableV4: 4}},
			},
		},
		{
			name: "families and dual stack",
			steps: []step{
				{desc: "a v4 pool and a v6 pool", do: setPools(
					Pool{Name: "v4", Addresses: []string{"10.0.0.0/30"}, AutoAssign: true},
					Pool{Name: "v6", Addresses: []string{"2001:db8:6::/120"}, AutoAssign: true},
				), want: noStrs},
				{desc: "SingleStack IPv6", do: assign(with(svc("ns/s6"), func(r *Request) { r.Families = v6only })), want: asg("v6", "2001:db8:6::")},
				{desc: "PreferDualStack without a dual pool falls back to the primary family", do: assign(with(svc("ns/p"), func(r *Request) {
					r.Policy = PreferDualStack
					r.Families = v6first
				})), want: asg("v6", "2001:db8:6::1")},
				{desc: "RequireDualStack without a dual pool", do: assign(with(svc("ns/r"), func(r *Request) {
					r.Policy = RequireDualStack
					r.Families = v4first
				})), wantErr: ErrFamilyUnavailable, wantMsg: "both IPv4 and IPv6"},
				{desc: "add a dual pool", do: setPools(
					Pool{Name: "v4", Addresses: []string{"10.0.0.0/30"}, AutoAssign: true},
					Pool{Name: "v6", Addresses: []string{"2001:db8:6::/120"}, AutoAssign: true},
					Pool{Name: "dual", Addresses: []string{"2001:db8:d::/120", "10.9.0.0/30"}, AutoAssign: true, Priority: 5},
				), want: noStrs},
				{desc: "PreferDualStack with a dual pool", do: assign(with(svc("ns/pd"), func(r *Request) {
					r.Policy = PreferDualStack
					r.Families = v4first
				})), want: asg("dual", "10.9.0.0", "2001:db8:d::")},
				{desc: "RequireDualStack, v6 primary", do: assign(with(svc("ns/r"), func(r *Request) {
					r.Policy = RequireDualStack
					r.Families = v6first
				})), want: asg("dual", "2001:db8:d::1", "10.9.0.1")},
				{desc: "RequireDualStack with one family listed uses both", do: assign(with(svc("ns/r1"), func(r *Request) {
					r.Policy = RequireDualStack
					r.Families = v6only
				})), want: asg("dual", "2001:db8:d::2", "10.9.0.2")},
				{desc: "the earlier PreferDualStack holding is kept (same policy and families)", do: assign(with(svc("ns/p"), func(r *Request) {
					r.Policy = PreferDualStack
					r.Families = v6first
				})), want: asg("v6", "2001:db8:6::1")},
				{desc: "policy change reallocates", do: assign(with(svc("ns/p"), func(r *Request) {
					r.Policy = RequireDualStack
					r.Families = v6first
				})), want: asg("dual", "2001:db8:d::3", "10.9.0.3")},
				{desc: "dual pool's IPv4 exhausted: RequireDualStack fails", do: assign(with(svc("ns/r2"), func(r *Request) {
					r.Policy = RequireDualStack
				})), wantErr: ErrPoolExhausted, wantMsg: `pool "dual": no free IPv4 address`},
				{desc: "PreferDualStack falls back to single stack", do: assign(with(svc("ns/p2"), func(r *Request) {
					r.Policy = PreferDualStack
				})), want: asg("v4", "10.0.0.0")},
				{desc: "v4-primary PreferDualStack falls back to v6 when v4 is gone", do: setPools(
					Pool{Name: "dual", Addresses: []string{"2001:db8:d::/120", "10.9.0.0/30"}, AutoAssign: true, Priority: 5},
				), want: []string{"ns/p2", "ns/s6"}},
				{desc: "secondary family used", do: assign(with(svc("ns/p3"), func(r *Request) {
					r.Policy = PreferDualStack
				})), want: asg("dual", "2001:db8:d::4")},
				{desc: "SingleStack IPv6 with no v6 left anywhere eligible", do: assign(with(svc("ns/s7"), func(r *Request) {
					r.Families = v6only
					r.Pool = "nope"
				})), wantErr: ErrNoSuchPool},
				{desc: "stats dual", do: stats("dual"), want: PoolStats{AssignedV4: 4, AssignedV6: 5, AvailableV6: 251}},
			},
		},
		{
			name: "sharing",
			steps: []step{
				{desc: "pool", do: setPools(Pool{Name: "p", Addresses: []string{"10.0.0.0/30"}, AutoAssign: true}), want: noStrs},
				{desc: "a: TCP/80 with key s", do: assign(with(svc("ns/a"), func(r *Request) { r.SharingKey = "s"; r.Ports = tcp(80) })), want: asg("p", "10.0.0.0")},
				{desc: "b: same key, disjoint ports shares a's address", do: assign(with(svc("ns/b"), func(r *Request) { r.SharingKey = "s"; r.Ports = tcp(443) })), want: asg("p", "10.0.0.0")},
				{desc: "holders", do: holders("10.0.0.0"), want: []string{"ns/a", "ns/b"}},
				{desc: "c requests it with the same port", do: assign(with(svc("ns/c"), func(r *Request) {
					r.SharingKey = "s"
					r.Ports = []Port{{Protocol: "tcp", Port: 80}}
					r.Addresses = ips("10.0.0.0")
				})), wantErr: ErrSharingRefused, wantMsg: "port TCP/80 of ns/c is already used by Service ns/a"},
				{desc: "c with the same port, automatic: gets a free address", do: assign(with(svc("ns/c"), func(r *Request) { r.SharingKey = "s"; r.Ports = tcp(80) })), want: asg("p", "10.0.0.1")},
				{desc: "UDP/80 does not clash with TCP/80: d shares the lowest compatible", do: assign(with(svc("ns/d"), func(r *Request) {
					r.SharingKey = "s"
					r.Ports = []Port{{Protocol: "UDP", Port: 80}}
				})), want: asg("p", "10.0.0.0")},
				{desc: "different sharing key refused", do: assign(with(svc("ns/e"), func(r *Request) {
					r.SharingKey = "t"
					r.Ports = tcp(8080)
					r.Addresses = ips("10.0.0.0")
				})), wantErr: ErrSharingRefused, wantMsg: `sharing key "s", but ns/e has sharing key "t"`},
				{desc: "no sharing key: in use", do: assign(with(svc("ns/e"), func(r *Request) { r.Addresses = ips("10.0.0.1") })), wantErr: ErrInUse, wantMsg: "Service ns/c"},
				{desc: "ETP Local, different backend key refused", do: assign(with(svc("ns/f"), func(r *Request) {
					r.SharingKey = "s"
					r.Ports = tcp(9000)
					r.BackendKey = "app=f"
					r.Addresses = ips("10.0.0.0")
				})), wantErr: ErrSharingRefused, wantMsg: "externalTrafficPolicy Local"},
				{desc: "ETP Local services with equal backend keys share", do: assign(with(svc("ns/g"), func(r *Request) {
					r.SharingKey = "l"
					r.Ports = tcp(1)
					r.BackendKey = "app=g"
				})), want: asg("p", "10.0.0.2")},
				{desc: "h shares g's address", do: assign(with(svc("ns/h"), func(r *Request) {
					r.SharingKey = "l"
					r.Ports = tcp(2)
					r.BackendKey = "app=g"
				})), want: asg("p", "10.0.0.2")},
				{desc: "shared addresses count once", do: stats("p"), want: PoolStats{AssignedV4: 3, AvailableV4: 1}},
				{desc: "release a: b and d keep .0", do: release("ns/a")},
				{desc: "holders after release", do: holders("10.0.0.0"), want: []string{"ns/b", "ns/d"}},
				{desc: "b changes its port to clash with d: it moves", do: assign(with(svc("ns/b"), func(r *Request) {
					r.SharingKey = "s"
					r.Ports = []Port{{Protocol: "UDP", Port: 80}}
				})), want: asg("p", "10.0.0.1")},
				{desc: "idempotent with compatible new ports", do: assign(with(svc("ns/b"), func(r *Request) {
					r.SharingKey = "s"
					r.Ports = []Port{{Protocol: "UDP", Port: 80}, {Protocol: "TCP", Port: 81}}
				})), want: asg("p", "10.0.0.1")},
				{desc: "the new ports are recorded: c clashes on TCP/81 when requesting .1", do: assign(with(svc("ns/x"), func(r *Request) {
					r.SharingKey = "s"
					r.Ports = tcp(81)
					r.Addresses = ips("10.0.0.1")
				})), wantErr: ErrSharingRefused, wantMsg: "TCP/81"},
				{desc: "restore of an incompatible rival claim", do: restore(with(svc("ns/r"), func(r *Request) { r.SharingKey = "z" }), "10.0.0.2"), wantErr: ErrSharingRefused},
				{desc: "restore of a compatible sharer", do: restore(with(svc("ns/r"), func(r *Request) { r.SharingKey = "l"; r.BackendKey = "app=g" }), "10.0.0.2"), want: asg("p", "10.0.0.2")},
				{desc: "holders of .2", do: holders("10.0.0.2"), want: []string{"ns/g", "ns/h", "ns/r"}},
			},
		},
		{
			// Invariant 10: a sharing key does not reach into another namespace unless the pool
			// says so (IPAddressPool spec.addressSharing: AcrossNamespaces).
			name: "sharing across namespaces",
			steps: []step{
				{desc: "a pool within namespaces, a pool across", do: setPools(
					Pool{Name: "p", Addresses: []string{"10.0.0.0/30"}, AutoAssign: true, Priority: 1},
					Pool{Name: "shared", Addresses: []string{"10.1.0.0/30"}, ShareAcrossNamespaces: true},
				), want: noStrs},
				{desc: "team-a/web: key s", do: assign(with(svc("team-a/web"), func(r *Request) { r.SharingKey = "s"; r.Ports = tcp(80) })), want: asg("p", "10.0.0.0")},
				{desc: "team-b/evil: same key, automatic: a free address, not team-a's", do: assign(with(svc("team-b/evil"), func(r *Request) { r.SharingKey = "s"; r.Ports = tcp(443) })), want: asg("p", "10.0.0.1")},
				{desc: "team-b/evil2: same key, asks for team-a's address", do: assign(with(svc("team-b/evil2"), func(r *Request) {
					r.SharingKey = "s"
					r.Ports = tcp(8443)
					r.Addresses = ips("10.0.0.0")
				})), wantErr: ErrSharingRefused, wantMsg: `address 10.0.0.0 is shared under key "s" by Service team-a/web of another namespace; pool "p" shares an address only among Services of one namespace`},
				{desc: "restore of a cross-namespace sharer is refused too", do: restore(with(svc("team-c/x"), func(r *Request) { r.SharingKey = "s"; r.Ports = tcp(22) }), "10.0.0.0"),
					wantErr: ErrSharingRefused, wantMsg: "another namespace"},
				{desc: "team-a/api: same namespace shares", do: assign(with(svc("team-a/api"), func(r *Request) { r.SharingKey = "s"; r.Ports = tcp(8080) })), want: asg("p", "10.0.0.0")},
				{desc: "holders of .0", do: holders("10.0.0.0"), want: []string{"team-a/api", "team-a/web"}},
				{desc: "the across pool: team-a/db", do: assign(with(svc("team-a/db"), func(r *Request) { r.SharingKey = "db"; r.Pool = "shared"; r.Ports = tcp(5432) })), want: asg("shared", "10.1.0.0")},
				{desc: "team-b/db2 shares it (MetalLB behaviour, allowed by the pool)", do: assign(with(svc("team-b/db2"), func(r *Request) { r.SharingKey = "db"; r.Pool = "shared"; r.Ports = tcp(3306) })), want: asg("shared", "10.1.0.0")},
				{desc: "holders of the across pool's address", do: holders("10.1.0.0"), want: []string{"team-a/db", "team-b/db2"}},
				{desc: "the pool stops allowing it: team-b/db2 loses the address, team-a/db keeps it", do: setPools(
					Pool{Name: "p", Addresses: []string{"10.0.0.0/30"}, AutoAssign: true, Priority: 1},
					Pool{Name: "shared", Addresses: []string{"10.1.0.0/30"}},
				), want: []string{"team-b/db2"}},
				{desc: "team-b/db2 reassigned: a new address", do: assign(with(svc("team-b/db2"), func(r *Request) { r.SharingKey = "db"; r.Pool = "shared"; r.Ports = tcp(3306) })), want: asg("shared", "10.1.0.1")},
				{desc: "SharingConflict of the claims: within one namespace", do: sharingConflict("10.0.0.0", "p", "team-a/x", "team-a/y"), want: "<nil>"},
				{desc: "SharingConflict of the claims: across, pool p", do: sharingConflict("10.0.0.0", "p", "team-a/x", "team-b/y"), want: "sharing refused"},
				{desc: "SharingConflict of the claims: unknown pool is within-namespace", do: sharingConflict("10.0.0.0", "gone", "team-a/x", "team-b/y"), want: "sharing refused"},
			},
		},
		{
			name: "restore",
			steps: []step{
				{desc: "pools", do: setPools(Pool{Name: "p", Addresses: []string{"10.0.0.0/30", "2001:db8::/126"}}), want: noStrs},
				{desc: "rival claim of .0, autoAssign false does not matter", do: restore(svc("other/rival"), "10.0.0.0"), want: asg("p", "10.0.0.0")},
				{desc: "allocation skips the rival's address", do: assign(with(svc("ns/a"), func(r *Request) { r.Pool = "p" })), want: asg("p", "10.0.0.1")},
				{desc: "restore of a held address", do: restore(svc("ns/b"), "10.0.0.1"), wantErr: ErrInUse, wantMsg: "ns/a"},
				{desc: "restore outside every pool", do: restore(svc("ns/b"), "192.0.2.1"), wantErr: ErrNotInPool},
				{desc: "restore dual stack, given v6 first for a v4-primary Service", do: restore(with(svc("ns/d"), func(r *Request) { r.Policy = RequireDualStack }), "2001:db8::2", "10.0.0.3"),
					want: asg("p", "10.0.0.3", "2001:db8::2")},
				{desc: "Assign with the same request keeps the restored addresses", do: assign(with(svc("ns/d"), func(r *Request) { r.Policy = RequireDualStack; r.Pool = "p" })),
					want: asg("p", "10.0.0.3", "2001:db8::2")},
				{desc: "restore replaces what a key held", do: restore(svc("other/rival"), "10.0.0.2"), want: asg("p", "10.0.0.2")},
				{desc: ".0 is free again", do: holders("10.0.0.0"), want: noStrs},
			},
		},
		{
			name: "pool edits",
			steps: []step{
				{desc: "pools", do: setPools(
					Pool{Name: "a", Addresses: []string{"10.0.0.0/29"}, AutoAssign: true, Priority: 1},
					Pool{Name: "b", Addresses: []string{"10.1.0.0/30"}, AutoAssign: true, Priority: 2},
				), want: noStrs},
				{desc: "k1", do: assign(svc("ns/k1")), want: asg("a", "10.0.0.0")},
				{desc: "k2", do: assign(svc("ns/k2")), want: asg("a", "10.0.0.1")},
				{desc: "k3", do: assign(svc("ns/k3")), want: asg("a", "10.0.0.2")},
				{desc: "k4", do: assign(svc("ns/k4")), want: asg("a", "10.0.0.3")},
				{desc: "k5 in b", do: assign(with(svc("ns/k5"), func(r *Request) { r.Pool = "b" })), want: asg("b", "10.1.0.0")},
				{desc: "invalid: bad syntax", do: setPools(Pool{Name: "a", Addresses: []string{"10.0.0.0/33"}}), wantErr: ErrInvalidPool, wantMsg: `pool "a": address entry "10.0.0.0/33": bad CIDR`},
				{desc: "invalid: bad syntax is also ErrInvalidAddress", do: setPools(Pool{Name: "a", Addresses: []string{"10.0.0.1"}}), wantErr: ErrInvalidAddress},
				{desc: "invalid: start after end", do: setPools(Pool{Name: "a", Addresses: []string{"10.0.0.9-10.0.0.1"}}), wantErr: ErrInvalidPool, wantMsg: "after end"},
				{desc: "invalid: mixed family range", do: setPools(Pool{Name: "a", Addresses: []string{"10.0.0.1-2001:db8::1"}}), wantErr: ErrInvalidPool, wantMsg: "different address families"},
				{desc: "invalid: duplicate name", do: setPools(Pool{Name: "a", Addresses: []string{"10.9.0.0/30"}}, Pool{Name: "a"}), wantErr: ErrInvalidPool, wantMsg: `pool "a" is defined twice`},
				{desc: "invalid: empty name", do: setPools(Pool{Addresses: []string{"10.9.0.0/30"}}), wantErr: ErrInvalidPool},
				{desc: "invalid: nil selector", do: setPools(Pool{Name: "a", ServiceSelectors: []LabelMatcher{nil}}), wantErr: ErrInvalidPool},
				{desc: "state intact: k4", do: held("ns/k4"), want: asg("a", "10.0.0.3")},
				{desc: "state intact: stats", do: stats("a"), want: PoolStats{AssignedV4: 4, AvailableV4: 4}},
				{desc: "shrink a to .0-.1, new pool c covers .2, b moves to a /29", do: setPools(
					Pool{Name: "a", Addresses: []string{"10.0.0.0/31"}, AutoAssign: true, Priority: 1},
					Pool{Name: "b", Addresses: []string{"10.1.0.0/29"}, AutoAssign: true, Priority: 2},
					Pool{Name: "c", Addresses: []string{"10.0.0.2/32"}},
				), want: []string{"ns/k4"}},
				{desc: "k1 keeps its owner pool", do: held("ns/k1"), want: asg("a", "10.0.0.0")},
				{desc: "k3's address moved to pool c", do: held("ns/k3"), want: asg("c", "10.0.0.2")},
				{desc: "k4 was released", do: held("ns/k4"), want: nil},
				{desc: "k5 still held in grown b", do: held("ns/k5"), want: asg("b", "10.1.0.0")},
				{desc: "k3 Assign keeps the moved address (c is not auto-assign)", do: assign(svc("ns/k3")), want: asg("c", "10.0.0.2")},
				{desc: "k4 re-allocated from b", do: assign(svc("ns/k4")), want: asg("b", "10.1.0.1")},
				{desc: "stats c", do: stats("c"), want: PoolStats{AssignedV4: 1}},
				{desc: "a address moved between pools: rename a to a2", do: setPools(
					Pool{Name: "a2", Addresses: []string{"10.0.0.0/30"}, AutoAssign: true},
					Pool{Name: "b", Addresses: []string{"10.1.0.0/29"}, AutoAssign: true, Priority: 2},
				), want: noStrs},
				{desc: "k1 now in a2", do: held("ns/k1"), want: asg("a2", "10.0.0.0")},
				{desc: "k3 now in a2", do: held("ns/k3"), want: asg("a2", "10.0.0.2")},
				{desc: "a2 free address .3 is the only free one there", do: assign(with(svc("ns/k6"), func(r *Request) { r.Pool = "a2" })), want: asg("a2", "10.0.0.3")},
				{desc: "requesting a pool moves k1", do: assign(with(svc("ns/k1"), func(r *Request) { r.Pool = "b" })), want: asg("b", "10.1.0.2")},
				{desc: "all pools removed", do: setPools(), want: []string{"ns/k1", "ns/k2", "ns/k3", "ns/k4", "ns/k5", "ns/k6"}},
				{desc: "nothing held", do: holders("10.1.0.0"), want: noStrs},
			},
		},
		{
			name: "stats of huge pools saturate",
			steps: []step{
				{desc: "pools", do: setPools(
					Pool{Name: "v6", Addresses: []string{"2001:db8::/64"}, AutoAssign: true},
					Pool{Name: "v6-48", Addresses: []string{"2001:db8:1::/48", "2001:db8:2::/127"}, AutoAssign: true},
					Pool{Name: "v4", Addresses: []string{"10.0.0.0/8"}, AutoAssign: true, AvoidBuggyIPs: true},
					Pool{Name: "v6-62bit", Addresses: []string{"2001:db8:3::/66"}},
				), want: noStrs},
				{desc: "empty /64", do: stats("v6"), want: PoolStats{AvailableV6: math.MaxInt64}},
				{desc: "a /66 (2^62 addresses) does not saturate", do: stats("v6-62bit"), want: PoolStats{AvailableV6: 1 << 62}},
				{desc: "assign from /64", do: assign(with(svc("ns/a"), func(r *Request) { r.Families = v6only })), want: asg("v6", "2001:db8::")},
				{desc: "/64 saturates", do: stats("v6"), want: PoolStats{AssignedV6: 1, AvailableV6: math.MaxInt64}},
				{desc: "/8 with avoidBuggyIPs", do: stats("v4"), want: PoolStats{AvailableV4: 65536 * 254}},
				{desc: "v4 from the /8 skips .0", do: assign(svc("ns/b")), want: asg("v4", "10.0.0.1")},
				{desc: "stats /8", do: stats("v4"), want: PoolStats{AssignedV4: 1, AvailableV4: 65536*254 - 1}},
				{desc: "/48", do: stats("v6-48"), want: PoolStats{AvailableV6: math.MaxInt64}},
			},
		},
		{
			name: "overlaps and PoolOf",
			steps: []step{
				{desc: "overlapping pools", do: setPools(
					Pool{Name: "a", Addresses: []string{"10.0.0.0/24"}, AutoAssign: true, Priority: 3},
					Pool{Name: "b", Addresses: []string{"10.0.0.128-10.0.1.10"}, AutoAssign: true, Priority: 1},
					Pool{Name: "c", Addresses: []string{"10.0.1.0/30", "2001:db8::/64"}, AutoAssign: true},
					Pool{Name: "d", Addresses: []string{"2001:db8::/120", "10.0.0.200/32"}, AutoAssign: true},
					Pool{Name: "e", Addresses: []string{"10.2.0.0/16"}},
				), want: noStrs},
				{desc: "overlaps", do: overlaps(), want: []Overlap{
					{PoolA: "a", PoolB: "b", Prefix: "10.0.0.128-10.0.0.255"},
					{PoolA: "a", PoolB: "d", Prefix: "10.0.0.200-10.0.0.200"},
					{PoolA: "b", PoolB: "c", Prefix: "10.0.1.0-10.0.1.3"},
					{PoolA: "b", PoolB: "d", Prefix: "10.0.0.200-10.0.0.200"},
					{PoolA: "c", PoolB: "d", Prefix: "2001:db8::-2001:db8::ff"},
				}},
				{desc: "PoolOf in the overlap: priority 1 (b) before 3 (a)", do: poolOf("10.0.0.130"), want: "b"},
				{desc: "PoolOf only a", do: poolOf("10.0.0.5"), want: "a"},
				{desc: "PoolOf c/d overlap: names (both priority 0)", do: poolOf("2001:db8::5"), want: "c"},
				{desc: "PoolOf outside", do: poolOf("10.3.0.0"), want: ""},
				{desc: "an address held through b counts in a too", do: assign(with(svc("ns/x"), func(r *Request) { r.Addresses = ips("10.0.0.128") })), want: asg("b", "10.0.0.128")},
				{desc: "a's stats", do: stats("a"), want: PoolStats{AssignedV4: 1, AvailableV4: 255}},
				{desc: "b allocates past the held address", do: assign(svc("ns/y")), want: asg("b", "10.0.0.129")},
				{desc: "requesting a's pool gives a's lowest free address", do: assign(with(svc("ns/z"), func(r *Request) { r.Pool = "a" })), want: asg("a", "10.0.0.0")},
				{desc: "no overlaps when disjoint", do: setPools(Pool{Name: "a", Addresses: []string{"10.0.0.0/24"}}, Pool{Name: "b", Addresses: []string{"10.0.1.0/24"}}), want: noStrs},
				{desc: "none", do: overlaps(), want: []Overlap{}},
				{desc: "two pieces of one pair", do: setPools(
					Pool{Name: "x", Addresses: []string{"10.0.0.0/24", "2001:db8::/126"}},
					Pool{Name: "y", Addresses: []string{"10.0.0.5-10.0.0.6", "10.0.0.7/32", "10.0.0.9/32", "2001:db8::3-2001:db8::8"}},
				), want: noStrs},
				{desc: "pieces merged and listed", do: overlaps(), want: []Overlap{
					{PoolA: "x", PoolB: "y", Prefix: "10.0.0.5-10.0.0.7, 10.0.0.9-10.0.0.9, 2001:db8::3-2001:db8::3"},
				}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := New()
			for i, st := range tc.steps {
				got, err := st.do(a)
				if st.wantErr != nil {
					if !errors.Is(err, st.wantErr) {
						t.Fatalf("step %d %q: error = %v, want errors.Is %v", i, st.desc, err, st.wantErr)
					}
					if !strings.Contains(err.Error(), st.wantMsg) {
						t.Fatalf("step %d %q: error %q does not contain %q", i, st.desc, err, st.wantMsg)
					}
				} else {
					if err != nil {
						t.Fatalf("step %d %q: unexpected error: %v", i, st.desc, err)
					}
					if diff := cmp.Diff(st.want, got, addrCmp, emptyCmp); diff != "" {
						t.Fatalf("step %d %q: result (-want +got):\n%s", i, st.desc, diff)
					}
				}
				if err := a.check(); err != nil {
					t.Fatalf("step %d %q: internal state: %v", i, st.desc, err)
				}
			}
		})
	}
}
