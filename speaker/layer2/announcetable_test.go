package layer2

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metalgate/metalgate/speaker"
)

// The decisions of Announcer.Announce, apart from the sockets.

func announcement(vip string, params any) speaker.Announcement {
	return speaker.Announcement{VIP: netip.MustParseAddr(vip), Params: params}
}

// flat lists a table as sorted "interface vip" lines.
func flat(t table) []string {
	var out []string
	for name, vips := range t {
		for vip, on := range vips {
			if on {
				out = append(out, name+" "+vip.String())
			}
		}
	}
	slices.Sort(out)
	return out
}

func tableOf(lines ...string) table {
	t := table{}
	for _, l := range lines {
		name, vip, _ := strings.Cut(l, " ")
		t.add(name, netip.MustParseAddr(vip))
	}
	return t
}

func TestDesiredTable(t *testing.T) {
	ifaces := []Interface{
		{Name: "eth0", Up: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24"), netip.MustParsePrefix("2001:db8::10/64")}},
		{Name: "eth1", Up: true, Prefixes: []netip.Prefix{netip.MustParsePrefix("198.51.100.10/24")}},
		{Name: "down0", Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.10/24")}},
	}
	tests := []struct {
		name      string
		desired   []speaker.Announcement
		want      []string
		wantError string
	}{
		{"params of another mode: announced on automatic interfaces, and an error", []speaker.Announcement{
			announcement("192.0.2.1", struct{ Peers []string }{}),
		}, []string{"eth0 192.0.2.1"}, "parameters of 192.0.2.1 are a struct { Peers []string }, not a layer2.Params"},
		{"an IPv4-mapped address is answered as IPv4", []speaker.Announcement{announcement("::ffff:192.0.2.1", nil)}, []string{"eth0 192.0.2.1"}, ""},
		{"named interfaces win over subnets; a down one is skipped", []speaker.Announcement{
			announcement("192.0.2.1", Params{Interfaces: []string{"eth1", "down0"}}),
		}, []string{"eth1 192.0.2.1"}, ""},
		{"by subnet, both families", []speaker.Announcement{
			announcement("192.0.2.1", Params{}), announcement("2001:db8::1", nil), announcement("198.51.100.7", nil),
		}, []string{"eth0 192.0.2.1", "eth0 2001:db8::1", "eth1 198.51.100.7"}, ""},
		{"off every subnet and no node address: nowhere", []speaker.Announcement{announcement("203.0.113.1", nil)}, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := desiredTable(tc.desired, ifaces, nil)
			if diff := cmp.Diff(tc.want, flat(got)); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
			switch {
			case tc.wantError == "" && err != nil:
				t.Errorf("error = %v, want none", err)
			case tc.wantError != "" && (err == nil || err.Error() != tc.wantError):
				t.Errorf("error = %v, want %q", err, tc.wantError)
			}
		})
	}
}

func TestKeptTable(t *testing.T) {
	prev := tableOf("eth0 192.0.2.1", "eth1 192.0.2.1", "eth0 192.0.2.2", "eth0 2001:db8::1")
	tests := []struct {
		name    string
		desired []speaker.Announcement
		want    []string
	}{
		{"nothing desired: nothing kept", nil, nil},
		{"only what is still desired, on every interface it was on", []speaker.Announcement{announcement("192.0.2.1", nil)},
			[]string{"eth0 192.0.2.1", "eth1 192.0.2.1"}},
		{"a new address is not added (no interface list)", []speaker.Announcement{announcement("192.0.2.9", nil), announcement("::ffff:192.0.2.2", nil)},
			[]string{"eth0 192.0.2.2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, flat(keptTable(prev, tc.desired))); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFreshPairs(t *testing.T) {
	tests := []struct {
		name       string
		prev, next table
		want       []string
	}{
		{"first announcement: every pair is fresh", table{}, tableOf("eth0 192.0.2.1", "eth1 192.0.2.1"), []string{"eth0 192.0.2.1", "eth1 192.0.2.1"}},
		{"unchanged: no burst", tableOf("eth0 192.0.2.1"), tableOf("eth0 192.0.2.1"), nil},
		{"moved to another interface: fresh there", tableOf("eth0 192.0.2.1"), tableOf("eth1 192.0.2.1"), []string{"eth1 192.0.2.1"}},
		{"dropped: nothing to send", tableOf("eth0 192.0.2.1", "eth0 192.0.2.2"), tableOf("eth0 192.0.2.2"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range freshPairs(tc.prev, tc.next) {
				got = append(got, p.name+" "+p.vip.String())
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fresh (-want +got):\n%s", diff)
			}
		})
	}
}
