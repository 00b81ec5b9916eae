package gatewayapi

import (
	"net/http/httptest"
	"os"
	"testing"
)

// TestGatewayTLSRoutePassthrough looks server names up in the table of testdata/tlsroute.in.yaml
// (its statuses are the golden file's): hostile names first — another namespace's route the
// listener does not admit, a name only a wider listener's wildcard covers, no server name, a
// port of HTTP listeners — then exact before wildcard, and case and a trailing dot.
func TestGatewayTLSRoutePassthrough(t *testing.T) {
	f, err := os.Open("testdata/tlsroute.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in, err := decodeInput(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	tb := Translate(in).Table
	for _, tc := range []struct {
		name        string
		port        int32
		sni         string
		want        string // the route's Source, "" for none
		passthrough bool
	}{
		// tenant/outsider names outsider.example.com on listener wild, which admits only
		// infra's routes: the name is the Gateway owner's wildcard route's, never tenant's.
		{"route of a namespace the listener does not admit", 443, "outsider.example.com", "TLSRoute infra/wide", true},
		{"name no route of the listener has", 8443, "outsider.example.com", "", true},
		{"name of a listener without routes, covered by a wider listener's route", 443, "a.example.com", "", true},
		{"name outside every listener", 443, "abc.nomatch.com", "", true},
		{"route refused on its listener (NoMatchingListenerHostname)", 443, "www.nomatch.com", "", true},
		{"no server name", 443, "", "", true},
		{"no server name, listener for any name", 8443, "", "", true},
		{"server name with a port", 443, "abc.example.com:443", "", true},
		{"port of HTTP listeners", 80, "abc.example.com", "", false},
		{"port of conflicted listeners", 10443, "m.example.com", "", true},
		{"unknown port", 1, "abc.example.com", "", false},
		{"exact before wildcard", 443, "abc.example.com", "TLSRoute infra/exact", true},
		{"wildcard", 443, "other.example.com", "TLSRoute infra/wide", true},
		{"wildcard, several labels", 443, "a.b.example.com", "TLSRoute infra/wide", true},
		{"case and trailing dot", 443, "ABC.Example.COM.", "TLSRoute infra/exact", true},
		{"granted cross-namespace backend", 8443, "granted.test", "TLSRoute tenant/granted", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, pt := tb.GatewayPassthrough(tc.port, tc.sni)
			got := ""
			if r != nil {
				got = r.Source.String()
			}
			if got != tc.want || pt != tc.passthrough {
				t.Errorf("GatewayPassthrough(%d, %q) = %q, %v; want %q, %v", tc.port, tc.sni, got, pt, tc.want, tc.passthrough)
			}
		})
	}
	// An HTTP request never takes a passthrough route, whatever port it names.
	for _, port := range []int32{443, 8443} {
		req := httptest.NewRequest("GET", "http://abc.example.com/", nil)
		if r := tb.Match(port, req); r != nil {
			t.Errorf("Match(%d, abc.example.com) = %s, want nil: a TLSRoute is not an HTTP route", port, r.Source)
		}
	}
	if c := tb.GatewayCertificate(443, "abc.example.com"); c != nil {
		t.Errorf("GatewayCertificate on a passthrough port = a certificate, want none")
	}
}
