package gatewayapi

import (
	"fmt"
	"regexp"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// compileGRPCRoute compiles a GRPCRoute's rules into routes without a host, as
// compileHTTPRoute does for HTTPRoutes; its backends are h2c.
func (b *builder) compileGRPCRoute(gr *gatewayv1.GRPCRoute, from table.SourceRef) (rules []gatewayRule, unsupported string, refsReason gatewayv1.RouteConditionReason, refsMsg string) {
	var refProblems []string
	for ri, rule := range gr.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", ri)
		opts := table.DefaultOptions()
		opts.Protocol = table.ProtocolH2C
		if rule.SessionPersistence != nil {
			return nil, field + ".sessionPersistence: not supported", "", ""
		}
		for fi, f := range rule.Filters {
			var why string
			switch f.Type {
			case gatewayv1.GRPCRouteFilterRequestHeaderModifier:
				opts.Policy.RequestHeaders, why = headerEdits(f.RequestHeaderModifier)
			case gatewayv1.GRPCRouteFilterResponseHeaderModifier:
				opts.Policy.ResponseHeaders, why = headerEdits(f.ResponseHeaderModifier)
			default:
				// RequestMirror included: the data plane does not mirror HTTP/2 to h2c backends.
				why = fmt.Sprintf("filter type %s is not supported on GRPCRoutes", f.Type)
			}
			if why != "" {
				return nil, fmt.Sprintf("%s.filters[%d]: %s", field, fi, why), "", ""
			}
		}
		rl, why := compileRule(b, from, field, opts, rule.BackendRefs, grpcRuleRef, rule.Matches, grpcMatchRoute, nil, &refsReason, &refProblems)
		if why != "" {
			return nil, why, "", ""
		}
		rules = append(rules, rl)
	}
	return rules, "", refsReason, strings.Join(refProblems, "; ")
}

// grpcRuleRef is a GRPCRoute backendRef with its filters.
func grpcRuleRef(ref gatewayv1.GRPCBackendRef) ruleRef {
	rr := ruleRef{ref: ref.BackendRef}
	for _, f := range ref.Filters {
		rr.filters = append(rr.filters, refFilter{string(f.Type), f.RequestHeaderModifier, f.ResponseHeaderModifier})
	}
	return rr
}

// grpcMatchRoute makes the route of one GRPCRoute match: the path its method match selects,
// and its headers.
func grpcMatchRoute(m gatewayv1.GRPCRouteMatch) (*table.Route, string) {
	r := &table.Route{Path: "/", PathType: "Prefix", Match: &table.RequestMatch{}}
	if mm := m.Method; mm != nil {
		svc, method := "", ""
		if mm.Service != nil {
			svc = *mm.Service
		}
		if mm.Method != nil {
			method = *mm.Method
		}
		exact := mm.Type == nil || *mm.Type == gatewayv1.GRPCMethodMatchExact
		switch {
		case !exact && *mm.Type != gatewayv1.GRPCMethodMatchRegularExpression:
			return nil, fmt.Sprintf("method.type %s is not supported (Exact and RegularExpression are)", *mm.Type)
		case svc == "" && method == "":
			return nil, "method: service or method is required"
		case exact && (strings.ContainsAny(svc, "/ \t\r\n") || strings.ContainsAny(method, "/ \t\r\n")):
			return nil, fmt.Sprintf("method: %q/%q is not a gRPC service and method name", svc, method)
		case exact && svc != "" && method != "":
			r.Path, r.PathType = "/"+svc+"/"+method, "Exact"
		case exact && svc != "":
			r.Path = "/" + svc
		default:
			sre, mre := `[^/]+`, `[^/]+`
			switch {
			case exact: // the method alone
				mre = regexp.QuoteMeta(method)
			default:
				if svc != "" {
					sre = svc
				}
				if method != "" {
					mre = method
				}
			}
			re, err := regexp.Compile("^/(?:" + sre + ")/(?:" + mre + ")$")
			if err != nil {
				return nil, fmt.Sprintf("method: not a regular expression (RE2 syntax): %v", err)
			}
			r.PathType, r.Regex = table.GRPCMethodRegex, re
		}
	}
	for i, h := range m.Headers {
		if h.Type != nil && *h.Type != gatewayv1.GRPCHeaderMatchExact {
			return nil, fmt.Sprintf("headers[%d].type %s is not supported (Exact is)", i, *h.Type)
		}
		if !table.ValidHeaderName(string(h.Name)) {
			return nil, fmt.Sprintf("headers[%d].name %q is not a header name", i, h.Name)
		}
		r.Match.Headers = append(r.Match.Headers, table.ValueMatch{Name: table.CanonicalHeader(string(h.Name)), Value: h.Value})
	}
	return r, ""
}
