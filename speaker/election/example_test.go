package election_test

import (
	"fmt"
	"net/netip"

	"github.com/metalgate/metalgate/speaker/election"
)

func ExampleElect() {
	nodes := []election.Node{{Name: "n1"}, {Name: "n2"}, {Name: "n3", Excluded: true}}
	live := map[string]bool{"n1": true, "n2": true, "n3": true}
	req := election.Request{VIP: netip.MustParseAddr("198.51.100.100"), AnyReady: true}
	fmt.Println(election.Candidates(req, nodes, live))
	owner := election.Elect(req, nodes, live)
	fmt.Println(owner == election.Owner(req.VIP, []string{"n2", "n1"}))
	// Output:
	// [n1 n2]
	// true
}
