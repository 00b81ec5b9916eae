package contract

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestAnnouncementStatusJSON pins the wire form of one announcement, which the speaker writes
// and kubectl metalgate reads: Where is "interfaces" for layer 2 and "peers" for BGP, an array
// even when empty, and reads back into Where.
func TestAnnouncementStatusJSON(t *testing.T) {
	tests := []struct {
		name string
		in   AnnouncementStatus
		want string
		// back is Where after a round trip (nil when the mode carries none).
		back []string
	}{
		{name: "unknown mode writes neither list",
			in:   AnnouncementStatus{Service: "a/b", VIP: "192.0.2.1", Mode: "other", Where: []string{"x"}},
			want: `{"service":"a/b","vip":"192.0.2.1","mode":"other"}`},
		{name: "layer2 without interfaces is an empty array",
			in:   AnnouncementStatus{Service: "a/b", VIP: "192.0.2.1", Mode: ModeLayer2},
			want: `{"service":"a/b","vip":"192.0.2.1","mode":"layer2","interfaces":[]}`, back: []string{}},
		{name: "layer2 interfaces",
			in:   AnnouncementStatus{Service: "a/b", VIP: "192.0.2.1", Mode: ModeLayer2, Where: []string{"eth0", "eth1"}},
			want: `{"service":"a/b","vip":"192.0.2.1","mode":"layer2","interfaces":["eth0","eth1"]}`, back: []string{"eth0", "eth1"}},
		{name: "bgp peers",
			in:   AnnouncementStatus{Service: "a/b", VIP: "2001:db8::1", Mode: ModeBGP, Where: []string{"router"}},
			want: `{"service":"a/b","vip":"2001:db8::1","mode":"bgp","peers":["router"]}`, back: []string{"router"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("Marshal = %s, want %s", got, tt.want)
			}
			var back AnnouncementStatus
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("Unmarshal(%s): %v", got, err)
			}
			if back.Service != tt.in.Service || back.VIP != tt.in.VIP || back.Mode != tt.in.Mode || !slices.Equal(back.Where, tt.back) || (back.Where == nil) != (tt.back == nil) {
				t.Errorf("round trip = %+v, want %+v with Where %q", back, tt.in, tt.back)
			}
		})
	}
}

// TestAnnouncementStatusReadsItsModesList: a BGP entry reads its peers, not interfaces a
// writer put beside them (and a layer-2 entry its interfaces, not peers).
func TestAnnouncementStatusReadsItsModesList(t *testing.T) {
	for body, want := range map[string][]string{
		`{"mode":"bgp","interfaces":["eth0"],"peers":["r1"]}`:    {"r1"},
		`{"mode":"layer2","interfaces":["eth0"],"peers":["r1"]}`: {"eth0"},
	} {
		var a AnnouncementStatus
		if err := json.Unmarshal([]byte(body), &a); err != nil {
			t.Fatalf("Unmarshal(%s): %v", body, err)
		}
		if !slices.Equal(a.Where, want) {
			t.Errorf("Unmarshal(%s).Where = %q, want %q", body, a.Where, want)
		}
	}
	var a AnnouncementStatus
	if err := json.Unmarshal([]byte(`{"mode":"bgp","peers":"r1"}`), &a); err == nil {
		t.Errorf("Unmarshal of a string where peers is an array: no error")
	}
}
