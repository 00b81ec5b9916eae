package gatewayapi

import (
	"fmt"
	"slices"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/metalgate/metalgate/proxy/table"
)

// refFilter is one filter of a backendRef, of either route kind (both spell header modifiers
// as HTTPHeaderFilter).
type refFilter struct {
	typ       string
	req, resp *gatewayv1.HTTPHeaderFilter
}

// ruleRef is one backendRef of a rule, of either route kind, with its filters.
type ruleRef struct {
	ref     gatewayv1.BackendRef
	filters []refFilter
}

// ruleTarget compiles a rule's backendRefs (field names the rule) into what its routes send
// to: ruleBackends' backend, canary or split. An unresolved ref is added to refsReason (the
// first reason) and refProblems; why names an unsupported value, as a field path.
func (b *builder) ruleTarget(from table.SourceRef, field string, refs []ruleRef, opts table.Options, refsReason *gatewayv1.RouteConditionReason, refProblems *[]string) (be *table.Backend, canary *table.Canary, split []table.Weighted, why string) {
	plain := make([]gatewayv1.BackendRef, len(refs))
	per := make([]refEdits, len(refs))
	for i, r := range refs {
		var w string
		if per[i], w = backendRefEdits(r.filters); w != "" {
			return nil, nil, nil, fmt.Sprintf("%s.backendRefs[%d].%s", field, i, w)
		}
		plain[i] = r.ref
	}
	be, canary, split, reason, msg, w := b.ruleBackends(from, plain, per, opts)
	if w != "" {
		return nil, nil, nil, field + ".backendRefs: " + w
	}
	if reason != "" {
		if *refsReason == "" {
			*refsReason = reason
		}
		*refProblems = append(*refProblems, field+".backendRefs: "+msg)
	}
	return be, canary, split, ""
}

// refEdits are the header edits of one backendRef's filters.
type refEdits struct {
	req, resp table.HeaderEdits
	set       bool // the backendRef has filters
}

// backendRefEdits compiles a backendRef's filters: request and response header modifiers,
// nothing else (why names the first filter that is not one, or a value refused).
func backendRefEdits(fs []refFilter) (refEdits, string) {
	var e refEdits
	for i, f := range fs {
		var why string
		switch f.typ {
		case "RequestHeaderModifier":
			e.req, why = headerEdits(f.req)
		case "ResponseHeaderModifier":
			e.resp, why = headerEdits(f.resp)
		default:
			why = fmt.Sprintf("filter type %s is not supported on backendRefs (RequestHeaderModifier and ResponseHeaderModifier are)", f.typ)
		}
		if why != "" {
			return e, fmt.Sprintf("filters[%d]: %s", i, why)
		}
		e.set = true
	}
	return e, ""
}

// thenEdits returns the edits of a followed by b, as one HeaderEdits: a header b removes or sets
// loses every value a gave it.
func thenEdits(a, b table.HeaderEdits) table.HeaderEdits {
	if a.Empty() {
		return b
	}
	if b.Empty() {
		return a
	}
	replaced := func(h table.Header) bool {
		return slices.Contains(b.Remove, h.Name) || slices.ContainsFunc(b.Set, func(s table.Header) bool { return s.Name == h.Name })
	}
	out := table.HeaderEdits{Remove: append(slices.Clone(a.Remove), b.Remove...)}
	out.Set = append(slices.DeleteFunc(slices.Clone(a.Set), replaced), b.Set...)
	out.Add = append(slices.DeleteFunc(slices.Clone(a.Add), replaced), b.Add...)
	return out
}

// compileRule compiles what a rule of either route kind shares: its backendRefs (refOf reads
// one) into the rule's target (ruleTarget), then one route per match (route compiles one; a
// rule without matches has one that takes every request), each sending to that target with
// opts. check, when set, refuses (a reason naming the field) or completes the route of match
// mi. field names the rule.
func compileRule[R, M any](b *builder, from table.SourceRef, field string, opts table.Options,
	backendRefs []R, refOf func(R) ruleRef, matches []M, route func(M) (*table.Route, string),
	check func(mi int, r *table.Route) string, refsReason *gatewayv1.RouteConditionReason, refProblems *[]string) (gatewayRule, string) {
	refs := make([]ruleRef, len(backendRefs))
	for i, ref := range backendRefs {
		refs[i] = refOf(ref)
	}
	be, canary, split, why := b.ruleTarget(from, field, refs, opts, refsReason, refProblems)
	if why != "" {
		return gatewayRule{}, why
	}
	if len(matches) == 0 {
		var all M
		matches = []M{all}
	}
	var rl gatewayRule
	for mi, m := range matches {
		r, why := route(m)
		if why != "" {
			return gatewayRule{}, fmt.Sprintf("%s.matches[%d].%s", field, mi, why)
		}
		r.Source, r.Backend, r.Canary, r.Split, r.Options = from, be, canary, split, opts
		if check != nil {
			if why := check(mi, r); why != "" {
				return gatewayRule{}, why
			}
		}
		rl.routes = append(rl.routes, r)
	}
	return rl, ""
}
