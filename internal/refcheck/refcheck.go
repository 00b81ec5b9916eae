package refcheck

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

// Snapshot is what the checks look references up in: the objects of the configuration
// namespace. Only names (and a Community's aliases, a BFDProfile's spec) are read.
type Snapshot struct {
	Pools       []v1alpha1.IPAddressPool
	BGPPeers    []v1alpha1.BGPPeer
	BFDProfiles []v1alpha1.BFDProfile
	Communities []v1alpha1.Community
}

// Problem is one reference that does not resolve, or one field the speakers cannot use.
type Problem struct {
	// Field is the path of the offending field: "spec.ipAddressPools[1]".
	Field string
	// Reason is one of v1alpha1's Reason* constants.
	Reason string
	// Message says what is wrong, without the field: `IPAddressPool "x" not found`.
	Message string
}

// String is "field: message", as the condition message and kubectl metalgate check show it.
func (p Problem) String() string { return p.Field + ": " + p.Message }

// maxMessage is metav1.Condition's limit on the message length.
const maxMessage = 32768

// Condition is the Valid condition for an object of generation with these problems: True
// (ReasonValid) without any, else False with the first problem's reason and every problem in
// the message. LastTransitionTime is left for meta.SetStatusCondition to fill.
func Condition(problems []Problem, generation int64) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionValid, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid,
		Message: "every reference resolves", ObservedGeneration: generation}
	if len(problems) == 0 {
		return c
	}
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.String()
	}
	c.Status, c.Reason, c.Message = metav1.ConditionFalse, problems[0].Reason, strings.Join(msgs, "; ")
	if len(c.Message) > maxMessage {
		c.Message = c.Message[:maxMessage-len("…")] + "…"
	}
	return c
}

// L2Advertisement checks the pools an L2Advertisement names and its selectors.
func L2Advertisement(ad *v1alpha1.L2Advertisement, s Snapshot) []Problem {
	out := poolNames(ad.Spec.IPAddressPools, s.Pools)
	out = append(out, selectorProblems("spec.ipAddressPoolSelectors", ad.Spec.IPAddressPoolSelectors)...)
	return append(out, selectorProblems("spec.nodeSelectors", ad.Spec.NodeSelectors)...)
}

// BGPAdvertisement checks the pools, community names and peers a BGPAdvertisement uses and
// its selectors. A community name that no Community defines makes the speakers skip the whole
// advertisement; a missing pool or peer only the missing one.
func BGPAdvertisement(ad *v1alpha1.BGPAdvertisement, s Snapshot) []Problem {
	out := poolNames(ad.Spec.IPAddressPools, s.Pools)
	out = append(out, selectorProblems("spec.ipAddressPoolSelectors", ad.Spec.IPAddressPoolSelectors)...)
	out = append(out, selectorProblems("spec.nodeSelectors", ad.Spec.NodeSelectors)...)
	aliases := communityAliases(s.Communities)
	for i, c := range ad.Spec.Communities {
		if isCommunityValue(c) {
			continue
		}
		field := fmt.Sprintf("spec.communities[%d]", i)
		defs := aliases[c]
		switch {
		case len(defs) == 0:
			out = append(out, Problem{field, v1alpha1.ReasonCommunityNotFound,
				fmt.Sprintf("community name %q is defined by no Community in namespace %s", c, ad.Namespace)})
		case distinctValues(defs) > 1:
			out = append(out, Problem{field, v1alpha1.ReasonCommunityAmbiguous,
				fmt.Sprintf("community name %q has different values in Communities %s", c, describe(defs))})
		}
	}
	peers := map[string]bool{}
	for _, p := range s.BGPPeers {
		peers[p.Name] = true
	}
	for i, name := range ad.Spec.Peers {
		if !peers[name] {
			out = append(out, Problem{fmt.Sprintf("spec.peers[%d]", i), v1alpha1.ReasonPeerNotFound, fmt.Sprintf("BGPPeer %q not found", name)})
		}
	}
	return out
}

// BGPPeer checks the BFDProfile a BGPPeer names and its node selectors. The password Secret
// is not checked: each speaker reads it and reports a missing one in status.nodes.
func BGPPeer(p *v1alpha1.BGPPeer, s Snapshot) []Problem {
	out := selectorProblems("spec.nodeSelectors", p.Spec.NodeSelectors)
	name := p.Spec.BFDProfile
	if name == "" {
		return out
	}
	var prof *v1alpha1.BFDProfile
	for i := range s.BFDProfiles {
		if s.BFDProfiles[i].Name == name {
			prof = &s.BFDProfiles[i]
		}
	}
	switch {
	case prof == nil:
		out = append(out, Problem{"spec.bfdProfile", v1alpha1.ReasonBFDProfileNotFound, fmt.Sprintf("BFDProfile %q not found", name)})
	case len(BFDProfile(prof)) > 0:
		out = append(out, Problem{"spec.bfdProfile", v1alpha1.ReasonBFDProfileInvalid,
			fmt.Sprintf("BFDProfile %q cannot be used: %s", name, BFDProfile(prof)[0])})
	case p.Spec.EBGPMultiHop:
		out = append(out, Problem{"spec.bfdProfile", v1alpha1.ReasonBFDMultiHop,
			fmt.Sprintf("BFDProfile %q on an ebgpMultiHop peer: the embedded BFD is single-hop only", name)})
	}
	return out
}

// BFDProfile checks what the embedded BFD does not do. The API server refuses both today;
// a profile stored before that, or by a CRD without the rules, still has them.
func BFDProfile(p *v1alpha1.BFDProfile) []Problem {
	var out []Problem
	if p.Spec.EchoMode {
		out = append(out, Problem{"spec.echoMode", v1alpha1.ReasonUnsupported, "echo mode is not supported by the embedded BFD"})
	}
	if p.Spec.PassiveMode {
		out = append(out, Problem{"spec.passiveMode", v1alpha1.ReasonUnsupported, "passive mode is not supported by the embedded BFD"})
	}
	return out
}

// Community checks that each name c defines has no other value in another Community of the
// namespace: which of the two values the speakers use is then a matter of list order.
func Community(c *v1alpha1.Community, s Snapshot) []Problem {
	aliases := communityAliases(s.Communities)
	var out []Problem
	for i, a := range c.Spec.Communities {
		var others []alias
		for _, d := range aliases[a.Name] {
			if d.community != c.Name && d.value != a.Value {
				others = append(others, d)
			}
		}
		if len(others) > 0 {
			out = append(out, Problem{fmt.Sprintf("spec.communities[%d]", i), v1alpha1.ReasonCommunityAmbiguous,
				fmt.Sprintf("name %q is also defined, with another value, by Communities %s", a.Name, describe(others))})
		}
	}
	return out
}

func poolNames(names []string, pools []v1alpha1.IPAddressPool) []Problem {
	have := map[string]bool{}
	for _, p := range pools {
		have[p.Name] = true
	}
	var out []Problem
	for i, n := range names {
		if !have[n] {
			out = append(out, Problem{fmt.Sprintf("spec.ipAddressPools[%d]", i), v1alpha1.ReasonPoolNotFound, fmt.Sprintf("IPAddressPool %q not found", n)})
		}
	}
	return out
}

func selectorProblems(field string, sels []metav1.LabelSelector) []Problem {
	var out []Problem
	for i := range sels {
		if _, err := metav1.LabelSelectorAsSelector(&sels[i]); err != nil {
			out = append(out, Problem{fmt.Sprintf("%s[%d]", field, i), v1alpha1.ReasonInvalidSelector, err.Error()})
		}
	}
	return out
}

// alias is one definition of a community name.
type alias struct{ community, value string }

// communityAliases maps each name to its definitions, in Community name order.
func communityAliases(cs []v1alpha1.Community) map[string][]alias {
	out := map[string][]alias{}
	for _, c := range cs {
		for _, a := range c.Spec.Communities {
			out[a.Name] = append(out[a.Name], alias{c.Name, a.Value})
		}
	}
	for _, defs := range out {
		sort.Slice(defs, func(i, j int) bool { return defs[i].community < defs[j].community })
	}
	return out
}

func distinctValues(defs []alias) int {
	seen := map[string]bool{}
	for _, d := range defs {
		seen[d.value] = true
	}
	return len(seen)
}

func describe(defs []alias) string {
	parts := make([]string, len(defs))
	for i, d := range defs {
		parts[i] = fmt.Sprintf("%q (%s)", d.community, d.value)
	}
	return strings.Join(parts, ", ")
}

// isCommunityValue reports whether s is a community value rather than an alias: "65000:100"
// (two numbers up to 65535, RFC 1997) or "large:1:2:3" (three numbers up to 4294967295, RFC
// 8092), as BGPAdvertisement.spec.communities documents them.
func isCommunityValue(s string) bool {
	bits, parts := 16, strings.Split(s, ":")
	if rest, ok := strings.CutPrefix(s, "large:"); ok {
		bits, parts = 32, strings.Split(rest, ":")
		if len(parts) != 3 {
			return false
		}
	} else if len(parts) != 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.TrimLeft(p, "0123456789") != "" {
			return false
		}
		if _, err := strconv.ParseUint(p, 10, bits); err != nil {
			return false
		}
	}
	return true
}
