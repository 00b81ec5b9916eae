package refcheck

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalgate/metalgate/api/v1alpha1"
)

func om(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "ns", Name: name} }

var badSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}

func snapshot() Snapshot {
	return Snapshot{
		Pools:       []v1alpha1.IPAddressPool{{ObjectMeta: om("a")}, {ObjectMeta: om("b")}},
		BGPPeers:    []v1alpha1.BGPPeer{{ObjectMeta: om("r1")}},
		BFDProfiles: []v1alpha1.BFDProfile{{ObjectMeta: om("fast")}, {ObjectMeta: om("echo"), Spec: v1alpha1.BFDProfileSpec{EchoMode: true}}},
		Communities: []v1alpha1.Community{
			{ObjectMeta: om("c2"), Spec: v1alpha1.CommunitySpec{Communities: []v1alpha1.CommunityAlias{{Name: "twice", Value: "1:2"}, {Name: "same", Value: "9:9"}}}},
			{ObjectMeta: om("c1"), Spec: v1alpha1.CommunitySpec{Communities: []v1alpha1.CommunityAlias{{Name: "no-export", Value: "65535:65281"}, {Name: "twice", Value: "1:3"}, {Name: "same", Value: "9:9"}}}},
		},
	}
}

func TestChecks(t *testing.T) {
	s := snapshot()
	tests := []struct {
		name string
		got  []Problem
		want []string // Reason + " " + String()
	}{
		// Hostile first.
		{"L2Advertisement: missing pool, bad selectors",
			L2Advertisement(&v1alpha1.L2Advertisement{ObjectMeta: om("l2"), Spec: v1alpha1.L2AdvertisementSpec{
				IPAddressPools: []string{"a", "gone"}, IPAddressPoolSelectors: []metav1.LabelSelector{{}, badSelector},
				NodeSelectors: []metav1.LabelSelector{badSelector}}}, s),
			[]string{`PoolNotFound spec.ipAddressPools[1]: IPAddressPool "gone" not found`,
				`InvalidSelector spec.ipAddressPoolSelectors[1]: "Bogus" is not a valid label selector operator`,
				`InvalidSelector spec.nodeSelectors[0]: "Bogus" is not a valid label selector operator`}},
		{"BGPAdvertisement: unknown and ambiguous names, missing peer",
			BGPAdvertisement(&v1alpha1.BGPAdvertisement{ObjectMeta: om("adv"), Spec: v1alpha1.BGPAdvertisementSpec{
				IPAddressPools: []string{"b"}, Communities: []string{"nope", "twice", "65536:1", "large:1:2:4294967296"},
				Peers: []string{"r1", "r2"}}}, s),
			[]string{`CommunityNotFound spec.communities[0]: community name "nope" is defined by no Community in namespace ns`,
				`CommunityAmbiguous spec.communities[1]: community name "twice" has different values in Communities "c1" (1:3), "c2" (1:2)`,
				// Out of range is no value: read as a name (the API server refuses it anyway).
				`CommunityNotFound spec.communities[2]: community name "65536:1" is defined by no Community in namespace ns`,
				`CommunityNotFound spec.communities[3]: community name "large:1:2:4294967296" is defined by no Community in namespace ns`,
				`PeerNotFound spec.peers[1]: BGPPeer "r2" not found`}},
		{"BGPAdvertisement: values, a name defined twice with one value, known pools and peers",
			BGPAdvertisement(&v1alpha1.BGPAdvertisement{ObjectMeta: om("adv"), Spec: v1alpha1.BGPAdvertisementSpec{
				IPAddressPools: []string{"a", "b"}, Communities: []string{"65535:65535", "0:0", "large:4294967295:0:1", "no-export", "same"},
				Peers: []string{"r1"}}}, s),
			nil},
		{"BGPPeer: missing BFDProfile",
			BGPPeer(&v1alpha1.BGPPeer{ObjectMeta: om("p"), Spec: v1alpha1.BGPPeerSpec{BFDProfile: "slow"}}, s),
			[]string{`BFDProfileNotFound spec.bfdProfile: BFDProfile "slow" not found`}},
		{"BGPPeer: unusable BFDProfile, bad node selector",
			BGPPeer(&v1alpha1.BGPPeer{ObjectMeta: om("p"), Spec: v1alpha1.BGPPeerSpec{BFDProfile: "echo", NodeSelectors: []metav1.LabelSelector{badSelector}}}, s),
			[]string{`InvalidSelector spec.nodeSelectors[0]: "Bogus" is not a valid label selector operator`,
				`BFDProfileInvalid spec.bfdProfile: BFDProfile "echo" cannot be used: spec.echoMode: echo mode is not supported by the embedded BFD`}},
		{"BGPPeer: BFD on a multi-hop session",
			BGPPeer(&v1alpha1.BGPPeer{ObjectMeta: om("p"), Spec: v1alpha1.BGPPeerSpec{BFDProfile: "fast", EBGPMultiHop: true}}, s),
			[]string{`BFDMultiHopUnsupported spec.bfdProfile: BFDProfile "fast" on an ebgpMultiHop peer: the embedded BFD is single-hop only`}},
		{"BGPPeer: resolvable", BGPPeer(&v1alpha1.BGPPeer{ObjectMeta: om("p"), Spec: v1alpha1.BGPPeerSpec{BFDProfile: "fast"}}, s), nil},
		{"BGPPeer: no BFD", BGPPeer(&v1alpha1.BGPPeer{ObjectMeta: om("p"), Spec: v1alpha1.BGPPeerSpec{EBGPMultiHop: true}}, s), nil},
		{"BFDProfile: echo and passive mode",
			BFDProfile(&v1alpha1.BFDProfile{Spec: v1alpha1.BFDProfileSpec{EchoMode: true, PassiveMode: true}}),
			[]string{`Unsupported spec.echoMode: echo mode is not supported by the embedded BFD`,
				`Unsupported spec.passiveMode: passive mode is not supported by the embedded BFD`}},
		{"BFDProfile: defaults", BFDProfile(&v1alpha1.BFDProfile{}), nil},
		{"Community: a name another Community defines with another value",
			Community(&s.Communities[0], s),
			[]string{`CommunityAmbiguous spec.communities[0]: name "twice" is also defined, with another value, by Communities "c1" (1:3)`}},
		{"Community: the other side", Community(&s.Communities[1], s),
			[]string{`CommunityAmbiguous spec.communities[1]: name "twice" is also defined, with another value, by Communities "c2" (1:2)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range tc.got {
				got = append(got, p.Reason+" "+p.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCondition(t *testing.T) {
	ok := Condition(nil, 4)
	if ok.Type != v1alpha1.ConditionValid || ok.Status != metav1.ConditionTrue || ok.Reason != v1alpha1.ReasonValid || ok.ObservedGeneration != 4 {
		t.Errorf("Condition(nil) = %+v", ok)
	}
	ps := []Problem{{"spec.a", v1alpha1.ReasonPoolNotFound, "one"}, {"spec.b", v1alpha1.ReasonPeerNotFound, "two"}}
	bad := Condition(ps, 5)
	if bad.Status != metav1.ConditionFalse || bad.Reason != v1alpha1.ReasonPoolNotFound || bad.Message != "spec.a: one; spec.b: two" || bad.ObservedGeneration != 5 {
		t.Errorf("Condition(two problems) = %+v", bad)
	}
	// The API server refuses a condition message over 32768 bytes: a huge list is cut.
	var many []Problem
	for range 2000 {
		many = append(many, Problem{"spec.ipAddressPools[1000]", v1alpha1.ReasonPoolNotFound, `IPAddressPool "` + strings.Repeat("x", 20) + `" not found`})
	}
	if m := Condition(many, 1).Message; len(m) > maxMessage || !strings.HasSuffix(m, "…") {
		t.Errorf("long message: %d bytes, suffix %q", len(m), m[len(m)-5:])
	}
}

func TestSelectsPool(t *testing.T) {
	p := &v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"tier": "web"}}}
	tests := []struct {
		name  string
		names []string
		sels  []metav1.LabelSelector
		want  bool
	}{
		{"bad selector matches nothing", nil, []metav1.LabelSelector{badSelector}, false},
		{"other name", []string{"q"}, nil, false},
		{"selector of another label", nil, []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "db"}}}, false},
		{"nothing named: every pool", nil, nil, true},
		{"by name", []string{"q", "p"}, nil, true},
		{"by selector", []string{"q"}, []metav1.LabelSelector{badSelector, {MatchLabels: map[string]string{"tier": "web"}}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SelectsPool(p, tc.names, tc.sels); got != tc.want {
				t.Errorf("SelectsPool = %v, want %v", got, tc.want)
			}
		})
	}
}
