package membership

import "testing"

func TestQuorum(t *testing.T) {
	set := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	three := []string{"n1", "n2", "n3"}
	tests := []struct {
		name     string
		self     string
		live     map[string]bool
		expected []string
		want     bool
	}{
		{name: "alone and alone expected", self: "n1", expected: nil, want: true},
		{name: "all three live", self: "n2", live: set("n1", "n2", "n3"), expected: three, want: true},
		{name: "two of three", self: "n2", live: set("n2", "n3"), expected: three, want: true},
		{name: "cut off: one of three", self: "n1", live: set("n1"), expected: three, want: false},
		{name: "self counts even when absent from live", self: "n3", live: set("n1"), expected: three, want: true},
		{name: "two nodes: side with smallest name keeps quorum", self: "n1", live: set("n1"), expected: []string{"n1", "n2"}, want: true},
		{name: "two nodes: the other side stops", self: "n2", live: set("n2"), expected: []string{"n1", "n2"}, want: false},
		{name: "four nodes split 2/2: side with n1", self: "n3", live: set("n1", "n3"), expected: []string{"n1", "n2", "n3", "n4"}, want: true},
		{name: "four nodes split 2/2: side without n1", self: "n2", live: set("n2", "n4"), expected: []string{"n1", "n2", "n3", "n4"}, want: false},
		{name: "live speakers outside expected do not count", self: "n1", live: set("n1", "x", "y"), expected: three, want: false},
		{name: "self not yet expected (new node)", self: "n4", live: set("n1", "n2", "n4"), expected: three, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Quorum(tc.self, tc.live, tc.expected); got != tc.want {
				t.Errorf("Quorum(%q, %v, %v) = %v, want %v", tc.self, tc.live, tc.expected, got, tc.want)
			}
		})
	}
}

// TestQuorumNoSplitBrain checks the property the rule exists for: for every split of up to six
// speakers into two sides, at most one side has quorum.
func TestQuorumNoSplitBrain(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f"}
	for n := 1; n <= len(names); n++ {
		exp := names[:n]
		for mask := 0; mask < 1<<n; mask++ {
			sides := [2]map[string]bool{{}, {}}
			for i, name := range exp {
				sides[mask>>i&1][name] = true
			}
			winners := 0
			for _, side := range sides {
				for self := range side {
					if Quorum(self, side, exp) {
						winners++
					}
					break
				}
			}
			if winners > 1 {
				t.Fatalf("n=%d split %v | %v: both sides have quorum", n, sides[0], sides[1])
			}
		}
	}
}
