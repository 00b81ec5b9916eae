package gatewayapi

import (
	"fmt"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// passthroughListener reports whether l is a TLS listener in mode Passthrough: it takes
// TLSRoutes and passes each connection, undecrypted, to the backend its server name selects.
// A TLS listener's mode defaults to Terminate (the CRD's default), which metalgate does not
// serve (the listener verdict refuses it).
func passthroughListener(l gatewayv1.Listener) bool {
	return l.Protocol == gatewayv1.TLSProtocolType && l.TLS != nil && l.TLS.Mode != nil && *l.TLS.Mode == gatewayv1.TLSModePassthrough
}

// compileTLSRoute compiles a TLSRoute's rule (the API allows one) into one route without a
// host whose backends take connections by weight: Route.Backend alone, or Route.Split for two
// or more (the data plane draws one per connection). An unresolved backendRef keeps its share
// of the connections, which are closed (a connection cannot be answered with a 500), and is
// reported in refsReason and refsMsg. Nothing in a TLSRoute is refused: unsupported is "".
func (b *builder) compileTLSRoute(tr *gatewayv1.TLSRoute, from table.SourceRef) (rules []gatewayRule, unsupported string, refsReason gatewayv1.RouteConditionReason, refsMsg string) {
	var refProblems []string
	for ri, rule := range tr.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", ri)
		rl, why := compileRule(b, from, field, table.DefaultOptions(), rule.BackendRefs,
			func(ref gatewayv1.BackendRef) ruleRef { return ruleRef{ref: ref} },
			[]struct{}(nil), func(struct{}) (*table.Route, string) {
				return &table.Route{Path: "/", PathType: "Prefix", Match: &table.RequestMatch{}}, ""
			}, nil, &refsReason, &refProblems)
		if why != "" {
			return nil, why, "", ""
		}
		for _, r := range rl.routes {
			if c := r.Canary; c != nil {
				// Two backends: the HTTP path's canary split, as a Split here (one per
				// connection, by weight, is all passthrough can do).
				r.Split = []table.Weighted{{Backend: r.Backend, Weight: c.WeightTotal - c.Weight}, {Backend: c.Backend, Weight: c.Weight}}
				r.Canary = nil
			}
		}
		rules = append(rules, rl)
	}
	return rules, "", refsReason, strings.Join(refProblems, "; ")
}
