package main

import (
	"strings"
	"testing"
)

func TestKindPool(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"172.18.0.0/16 fc00:f853:ccd:e793::/64"}, "172.18.255.223-172.18.255.254"},
		{[]string{"fc00::/64", "10.89.0.0/24"}, "10.89.0.223-10.89.0.254"},
		{[]string{"192.168.49.7/20"}, "192.168.63.223-192.168.63.254"},
	} {
		got, err := kindPool(c.in)
		if err != nil {
			t.Fatalf("%v: %v", c.in, err)
		}
		if !strings.Contains(got, "- "+c.want+"\n") || !strings.Contains(got, "kind: L2Advertisement") {
			t.Errorf("%v: want range %s in\n%s", c.in, c.want, got)
		}
	}
	for _, bad := range [][]string{{"fc00::/64"}, {"10.0.0.0/25"}, {"nonsense"}, nil} {
		if _, err := kindPool(bad); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}
