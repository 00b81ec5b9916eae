package v1alpha1_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/internal/testenv"
)

// kube is the API server TestMain started (internal/testenv) with the generated CRDs and
// dual-stack Service ranges (so that the IPv6 sample Service can be created too); nil when
// KUBEBUILDER_ASSETS is unset.
var kube *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{CRDs: []string{testenv.MetalgateCRDs}, DualStack: true}, func(e *testenv.Env) error {
		kube = e
		return nil
	}))
}

// apiServer returns the client of the test API server, or skips the test when there is none.
func apiServer(t *testing.T) (context.Context, client.Client) {
	t.Helper()
	kube.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, kube.Client
}

// namespace creates a namespace (once) for a test.
func namespace(ctx context.Context, t *testing.T, c client.Client, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// object builds a metalgate.io/v1alpha1 object of the given kind; a nil spec leaves it out.
func object(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": ns},
	}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

// with returns base with the keys of extra added (or replaced); a nil value removes the key.
func with(base map[string]any, extra map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

func poolSpec(addresses ...string) map[string]any {
	list := make([]any, len(addresses))
	for i, a := range addresses {
		list[i] = a
	}
	return map[string]any{"addresses": list}
}

var peerBase = map[string]any{"myASN": int64(64512), "peerASN": int64(64500), "peerAddress": "198.51.100.1"}

func peerSpec(extra map[string]any) map[string]any { return with(peerBase, extra) }

func strs(s ...string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// strict makes the API server fail the call on any field the schema does not know, instead of
// silently pruning it.
var strict = client.FieldValidation(metav1.FieldValidationStrict)

// TestRefused sends objects the schema must refuse and checks that the API server answers
// Invalid, naming the field and the reason.
func TestRefused(t *testing.T) {
	ctx, c := apiServer(t)
	ns := namespace(ctx, t, c, "refused")

	type field = map[string]any
	cases := []struct {
		name   string
		kind   string
		spec   map[string]any
		field  string // the field the cause must name
		reason string // a substring of the cause's message
	}{
		{"address is a word", "IPAddressPool", poolSpec("banana"), "spec.addresses[0]",
			`"banana" must be a CIDR such as 192.0.2.0/24 or a range such as 192.0.2.10-192.0.2.20`},
		{"address is a single IP", "IPAddressPool", poolSpec("192.0.2.1"), "spec.addresses[0]",
			"must be a CIDR such as 192.0.2.0/24 or a range such as 192.0.2.10-192.0.2.20"},
		{"prefix too long", "IPAddressPool", poolSpec("192.0.2.0/33"), "spec.addresses[0]",
			"must be a CIDR such as 192.0.2.0/24"},
		{"range with three ends", "IPAddressPool", poolSpec("192.0.2.1-192.0.2.5-192.0.2.9"), "spec.addresses[0]",
			"must be a CIDR such as 192.0.2.0/24"},
		{"range without end", "IPAddressPool", poolSpec("192.0.2.1-"), "spec.addresses[0]",
			"must be a CIDR such as 192.0.2.0/24"},
		{"second address bad", "IPAddressPool", poolSpec("192.0.2.0/24", "2001:db8::/200"), "spec.addresses[1]",
			`"2001:db8::/200" must be a CIDR`},
		{"address sharing not a scope", "IPAddressPool", with(poolSpec("192.0.2.0/24"), field{"addressSharing": "Everywhere"}), "spec.addressSharing",
			`Unsupported value: "Everywhere": supported values: "WithinNamespace", "AcrossNamespaces"`},
		{"v4 start after end", "IPAddressPool", poolSpec("192.0.2.20-192.0.2.10"), "spec.addresses[0]",
			`"192.0.2.20-192.0.2.10": the start of a range must not be after its end`},
		{"v4 start after end by one", "IPAddressPool", poolSpec("192.0.2.11-192.0.2.10"), "spec.addresses[0]",
			"the start of a range must not be after its end"},
		{"v4 start after end, first bit", "IPAddressPool", poolSpec("128.0.0.0-127.255.255.255"), "spec.addresses[0]",
			"the start of a range must not be after its end"},
		{"v6 start after end", "IPAddressPool", poolSpec("10.0.0.0/8", "2001:db8::ff - 2001:db8::10"), "spec.addresses[1]",
			"the start of a range must not be after its end"},
		{"v6 start after end, last bit", "IPAddressPool", poolSpec("2001:db8::1-2001:db8::"), "spec.addresses[0]",
			"the start of a range must not be after its end"},
		{"mixed families", "IPAddressPool", poolSpec("192.0.2.1-2001:db8::1"), "spec.addresses[0]",
			`"192.0.2.1-2001:db8::1" mixes IPv4 and IPv6`},
		{"no addresses", "IPAddressPool", poolSpec(), "spec.addresses", "should have at least 1 items"},
		{"negative priority", "IPAddressPool", with(poolSpec("192.0.2.0/24"), field{"serviceAllocation": field{"priority": int64(-1)}}),
			"spec.serviceAllocation.priority", "should be greater than or equal to 0"},

		{"myASN 0", "BGPPeer", peerSpec(field{"myASN": int64(0)}), "spec.myASN", "should be greater than or equal to 1"},
		{"peerASN 0", "BGPPeer", peerSpec(field{"peerASN": int64(0)}), "spec.peerASN", "should be greater than or equal to 1"},
		{"peerASN above 32 bits", "BGPPeer", peerSpec(field{"peerASN": int64(4294967296)}), "spec.peerASN",
			"should be less than or equal to 4294967295"},
		{"myASN above 32 bits", "BGPPeer", peerSpec(field{"myASN": int64(4294967296)}), "spec.myASN",
			"should be less than or equal to 4294967295"},
		{"holdTime 1s", "BGPPeer", peerSpec(field{"holdTime": "1s"}), "spec.holdTime", "holdTime must be 0 or at least 3s"},
		{"holdTime 2.5s", "BGPPeer", peerSpec(field{"holdTime": "2.5s"}), "spec.holdTime", "holdTime must be 0 or at least 3s"},
		{"holdTime above 16 bits", "BGPPeer", peerSpec(field{"holdTime": "65536s"}), "spec.holdTime", "holdTime must be at most 65535s"},
		{"holdTime not a duration", "BGPPeer", peerSpec(field{"holdTime": "9 seconds"}), "spec.holdTime", "holdTime must be a duration such as 90s"},
		{"holdTime empty", "BGPPeer", peerSpec(field{"holdTime": ""}), "spec.holdTime", "should be at least 1 chars long"},
		{"holdTime negative", "BGPPeer", peerSpec(field{"holdTime": "-9s"}), "spec.holdTime", "holdTime must be a duration such as 90s"},
		{"keepalive equal to holdTime", "BGPPeer", peerSpec(field{"holdTime": "9s", "keepaliveTime": "9s"}),
			"spec.keepaliveTime", "keepaliveTime must be less than holdTime"},
		{"keepalive above holdTime", "BGPPeer", peerSpec(field{"holdTime": "90s", "keepaliveTime": "2m"}),
			"spec.keepaliveTime", "keepaliveTime must be less than holdTime"},
		{"connectTime 0", "BGPPeer", peerSpec(field{"connectTime": "0s"}), "spec.connectTime", "connectTime must be between 1s and 65535s"},
		{"peerAddress a name", "BGPPeer", peerSpec(field{"peerAddress": "router.example"}), "spec.peerAddress",
			"peerAddress must be an IPv4 or IPv6 address"},
		{"peerAddress a CIDR", "BGPPeer", peerSpec(field{"peerAddress": "198.51.100.1/32"}), "spec.peerAddress",
			"peerAddress must be an IPv4 or IPv6 address"},
		{"peerPort 0", "BGPPeer", peerSpec(field{"peerPort": int64(0)}), "spec.peerPort", "should be greater than or equal to 1"},
		{"sourceAddress not an IP", "BGPPeer", peerSpec(field{"sourceAddress": "eth0"}), "spec.sourceAddress",
			"sourceAddress must be an IPv4 or IPv6 address"},
		{"routerID IPv6", "BGPPeer", peerSpec(field{"routerID": "2001:db8::1"}), "spec.routerID", "routerID must be an IPv4 address"},
		{"password and passwordSecret", "BGPPeer",
			peerSpec(field{"password": "s3cret", "passwordSecret": field{"name": "bgp-password"}}),
			"spec.password", "password and passwordSecret are mutually exclusive"},
		{"missing peerAddress", "BGPPeer", peerSpec(field{"peerAddress": nil}), "spec.peerAddress", "Required value"},
		{"vrf", "BGPPeer", peerSpec(field{"vrf": "red"}), "spec.vrf",
			"vrf is not supported: the speaker opens every session in the nodes' default routing table"},

		{"BFD receiveInterval 5", "BFDProfile", field{"receiveInterval": int64(5)}, "spec.receiveInterval",
			"should be greater than or equal to 10"},
		{"BFD transmitInterval 60001", "BFDProfile", field{"transmitInterval": int64(60001)}, "spec.transmitInterval",
			"should be less than or equal to 60000"},
		{"BFD detectMultiplier 1", "BFDProfile", field{"detectMultiplier": int64(1)}, "spec.detectMultiplier",
			"should be greater than or equal to 2"},
		{"BFD minimumTtl 255", "BFDProfile", field{"minimumTtl": int64(255)}, "spec.minimumTtl",
			"should be less than or equal to 254"},
		{"BFD echoMode", "BFDProfile", field{"echoMode": true, "echoInterval": int64(50)}, "spec.echoMode",
			"echoMode is not supported: the embedded BFD has no echo function"},
		{"BFD passiveMode", "BFDProfile", field{"passiveMode": true}, "spec.passiveMode",
			"passiveMode is not supported: the embedded BFD always starts the session itself"},

		{"community half above 16 bits", "BGPAdvertisement", field{"communities": strs("65000:100", "65536:1")},
			"spec.communities[1]", "must be a standard community such as 65000:100"},
		{"community with three parts", "BGPAdvertisement", field{"communities": strs("1:2:3")},
			"spec.communities[0]", "must be a standard community such as 65000:100"},
		{"large community with two parts", "BGPAdvertisement", field{"communities": strs("large:1:2")},
			"spec.communities[0]", "must be a standard community such as 65000:100"},
		{"large community part above 32 bits", "BGPAdvertisement", field{"communities": strs("large:4294967296:1:2")},
			"spec.communities[0]", "must be a standard community such as 65000:100"},
		{"community alias with a space", "BGPAdvertisement", field{"communities": strs("no export")},
			"spec.communities[0]", "must be a standard community such as 65000:100"},
		{"aggregationLength 33", "BGPAdvertisement", field{"aggregationLength": int64(33)}, "spec.aggregationLength",
			"should be less than or equal to 32"},
		{"aggregationLengthV6 129", "BGPAdvertisement", field{"aggregationLengthV6": int64(129)}, "spec.aggregationLengthV6",
			"should be less than or equal to 128"},
		{"aggregationLength -1", "BGPAdvertisement", field{"aggregationLength": int64(-1)}, "spec.aggregationLength",
			"should be greater than or equal to 0"},

		{"interface with a slash", "L2Advertisement", field{"interfaces": strs("eth0", "eth0/1")}, "spec.interfaces[1]",
			"must be a network interface name"},
		{"interface with a space", "L2Advertisement", field{"interfaces": strs("eth 0")}, "spec.interfaces[0]",
			"must be a network interface name"},
		{"interface ..", "L2Advertisement", field{"interfaces": strs("..")}, "spec.interfaces[0]",
			"must be a network interface name"},
		{"interface too long", "L2Advertisement", field{"interfaces": strs("averyverylongname0")}, "spec.interfaces[0]",
			"15"},
		{"interface empty", "L2Advertisement", field{"interfaces": strs("")}, "spec.interfaces[0]", "at least 1 chars long"},

		{"community value an alias", "Community", field{"communities": []any{field{"name": "x", "value": "no-export"}}},
			"spec.communities[0].value", "must be a standard community such as 65000:100 (two numbers from 0 to 65535) or a large community"},
		{"community name with a colon", "Community", field{"communities": []any{field{"name": "a:b", "value": "1:1"}}},
			"spec.communities[0].name", "must start with a letter"},
		{"community names not distinct", "Community",
			field{"communities": []any{field{"name": "x", "value": "1:1"}, field{"name": "x", "value": "1:2"}}},
			"spec.communities[1]", "Duplicate value"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(tc.kind, ns, fmt.Sprintf("case-%d", i), tc.spec)
			err := c.Create(ctx, obj)
			if err == nil {
				t.Fatalf("created %s with spec %v; want it refused", tc.kind, tc.spec)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v; want an Invalid error", err)
			}
			t.Log(err)
			for _, bad := range []string{"evaluating rule", "no such overload", "cost limit", "exceeds budget"} {
				if strings.Contains(err.Error(), bad) {
					t.Errorf("the error mentions %q, which suggests a rule failed to run: %v", bad, err)
				}
			}
			if !hasCause(err, tc.field, tc.reason) {
				t.Errorf("got %v\nwant a cause for field %s with %q", err, tc.field, tc.reason)
			}
		})
	}
}

// hasCause reports whether err has a cause for exactly field whose message contains reason.
func hasCause(err error, field, reason string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, reason) {
			return true
		}
	}
	return false
}

// TestAccepted sends objects the schema must accept.
func TestAccepted(t *testing.T) {
	ctx, c := apiServer(t)
	ns := namespace(ctx, t, c, "accepted")

	// The longest values an address may reasonably take, 256 times: both checks that the
	// per-object CEL cost budget holds and that big ranges are ordered right.
	long := make([]string, 256)
	for i := range long {
		long[i] = fmt.Sprintf("ffff:ffff:ffff:ffff:ffff:ffff:ffff:%04x - ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", i)
	}

	type field = map[string]any
	cases := []struct {
		name string
		kind string
		spec map[string]any
	}{
		{"v4 CIDR", "IPAddressPool", poolSpec("100.64.0.0/16")},
		{"v4 CIDR with host bits", "IPAddressPool", poolSpec("100.64.3.7/16")},
		{"v4 /32", "IPAddressPool", poolSpec("192.0.2.7/32")},
		{"v6 CIDR", "IPAddressPool", poolSpec("2001:db8::/64")},
		{"v4 range", "IPAddressPool", poolSpec("192.0.2.10-192.0.2.20")},
		{"v6 range", "IPAddressPool", poolSpec("2001:db8::10-2001:db8::ff")},
		{"range with spaces", "IPAddressPool", poolSpec("192.0.2.10 - 192.0.2.20")},
		{"v6 range with spaces", "IPAddressPool", poolSpec("2001:db8::10 - 2001:db8::1:0")},
		{"equal start and end", "IPAddressPool", poolSpec("192.0.2.10-192.0.2.10")},
		{"equal v6 start and end", "IPAddressPool", poolSpec("2001:db8::1-2001:db8::1")},
		{"whole v4 space", "IPAddressPool", poolSpec("0.0.0.0-255.255.255.255")},
		{"whole v6 space", "IPAddressPool", poolSpec("::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")},
		{"range across the first bit", "IPAddressPool", poolSpec("127.255.255.255-128.0.0.0")},
		{"v6 range differing in the last bit", "IPAddressPool", poolSpec("2001:db8::-2001:db8::1")},
		{"mixed pool", "IPAddressPool", poolSpec("192.0.2.0/24", "198.51.100.1-198.51.100.9", "2001:db8::/64", "2001:db8:1::1-2001:db8:1::9")},
		{"256 long v6 ranges", "IPAddressPool", poolSpec(long...)},
		{"every pool field", "IPAddressPool", with(poolSpec("192.0.2.0/24"), field{
			"autoAssign": false, "avoidBuggyIPs": true, "addressSharing": "AcrossNamespaces",
			"serviceAllocation": field{"priority": int64(10), "namespaces": strs("a", "b"),
				"namespaceSelectors": []any{field{"matchLabels": field{"team": "a"}}},
				"serviceSelectors":   []any{field{"matchExpressions": []any{field{"key": "app", "operator": "Exists"}}}}},
		})},

		{"holdTime 0s", "BGPPeer", peerSpec(field{"holdTime": "0s"})},
		{"holdTime 0", "BGPPeer", peerSpec(field{"holdTime": "0"})},
		{"holdTime 3s", "BGPPeer", peerSpec(field{"holdTime": "3s"})},
		{"holdTime 1m30s", "BGPPeer", peerSpec(field{"holdTime": "1m30s"})},
		{"holdTime 65535s", "BGPPeer", peerSpec(field{"holdTime": "65535s"})},
		{"holdTime 0 with keepalive", "BGPPeer", peerSpec(field{"holdTime": "0s", "keepaliveTime": "30s"})},
		{"keepalive below holdTime", "BGPPeer", peerSpec(field{"holdTime": "9s", "keepaliveTime": "3s"})},
		{"keepalive without holdTime", "BGPPeer", peerSpec(field{"keepaliveTime": "10s"})},
		{"32-bit ASNs", "BGPPeer", peerSpec(field{"myASN": int64(4294967295), "peerASN": int64(4200000000)})},
		{"v6 peer", "BGPPeer", peerSpec(field{"peerAddress": "2001:db8::1", "sourceAddress": "2001:db8::2"})},
		{"every peer field", "BGPPeer", peerSpec(field{
			"peerPort": int64(1179), "sourceAddress": "198.51.100.2", "holdTime": "90s", "keepaliveTime": "30s",
			"connectTime": "10s", "routerID": "10.0.0.1", "nodeSelectors": []any{field{"matchLabels": field{"rack": "r1"}}},
			"password": "s3cret", "passwordSecret": field{}, "bfdProfile": "fast", "enableGracefulRestart": true,
			"ebgpMultiHop": true, "vrf": "",
		})},
		{"passwordSecret alone", "BGPPeer", peerSpec(field{"passwordSecret": field{"name": "bgp", "namespace": "x"}})},

		{"BFD limits", "BFDProfile", field{"receiveInterval": int64(10), "transmitInterval": int64(60000),
			"detectMultiplier": int64(255), "echoInterval": int64(10), "minimumTtl": int64(1)}},
		{"BFD empty", "BFDProfile", nil},
		{"BFD echo and passive mode off", "BFDProfile", field{"echoMode": false, "passiveMode": false}},

		{"communities of every shape", "BGPAdvertisement", field{"communities": strs(
			"0:0", "65535:65535", "large:0:0:0", "large:4294967295:4294967295:4294967295", "vpn-only", "NO_ADVERTISE", "a.b_c")}},
		{"aggregation limits", "BGPAdvertisement", field{"aggregationLength": int64(0), "aggregationLengthV6": int64(128),
			"localPref": int64(4294967295)}},
		{"BGP advertisement without spec", "BGPAdvertisement", nil},

		{"interfaces", "L2Advertisement", field{"interfaces": strs("eth0", "bond0.100", "enp0s31f6", "a23456789012345", "vlan@x")}},
		{"L2 advertisement without spec", "L2Advertisement", nil},

		{"community aliases", "Community", field{"communities": []any{
			field{"name": "no-export", "value": "65535:65281"}, field{"name": "big", "value": "large:1:2:3"}}}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(tc.kind, ns, fmt.Sprintf("case-%d", i), tc.spec)
			if err := c.Create(ctx, obj, strict); err != nil {
				t.Fatalf("create %s: %v", tc.kind, err)
			}
		})
	}
}

// readManifests returns the objects of the YAML files matching pattern, each with the file it
// came from.
func readManifests(t *testing.T, pattern string) (objs []*unstructured.Unstructured, files []string) {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			js, err := yaml.YAMLToJSON(doc)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if s := strings.TrimSpace(string(js)); s == "null" || s == "" {
				continue // a document with only comments
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			objs = append(objs, u)
			files = append(files, filepath.Base(p))
		}
	}
	if len(objs) == 0 {
		t.Fatalf("no manifests match %s", pattern)
	}
	return objs, files
}

// TestSamples creates every object of config/samples, as kubectl apply -f config/samples/ does.
func TestSamples(t *testing.T) {
	ctx, c := apiServer(t)
	objs, files := readManifests(t, "../../config/samples/*.yaml")
	kinds := map[string]int{}
	for i, obj := range objs {
		kinds[obj.GetKind()]++
		if obj.GetAPIVersion() != v1alpha1.GroupVersion.String() && obj.GetKind() != "Service" {
			t.Errorf("%s: unexpected %s %s", files[i], obj.GetAPIVersion(), obj.GetKind())
			continue
		}
		namespace(ctx, t, c, obj.GetNamespace())
		if err := c.Create(ctx, obj, strict); err != nil {
			t.Errorf("%s: create %s %s: %v", files[i], obj.GetKind(), obj.GetName(), err)
		}
	}
	for _, k := range []string{"IPAddressPool", "L2Advertisement", "BGPPeer", "BFDProfile", "BGPAdvertisement", "Community", "Service"} {
		if kinds[k] == 0 {
			t.Errorf("config/samples has no %s", k)
		}
	}
}

// TestSamplesKustomization checks that config/samples/Kustomization lists every sample. The
// file has no .yaml extension so that kubectl apply -f config/samples/ does not try to send it
// to the API server; kustomize (kubectl apply -k) finds it under that name.
func TestSamplesKustomization(t *testing.T) {
	data, err := os.ReadFile("../../config/samples/Kustomization")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob("../../config/samples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range paths {
		files = append(files, filepath.Base(p))
	}
	sort.Strings(files)
	sort.Strings(k.Resources)
	if diff := cmp.Diff(files, k.Resources); diff != "" {
		t.Errorf("config/samples/Kustomization resources differ from the sample files (-files +listed):\n%s", diff)
	}
}

// metallbDefaults are the fields the API server adds to a MetalLB object that leaves them out:
// the schema defaults.
var metallbDefaults = map[string]map[string]any{
	"IPAddressPool":    {"autoAssign": true},
	"BGPPeer":          {"peerPort": int64(179)},
	"BGPAdvertisement": {"aggregationLength": int64(32), "aggregationLengthV6": int64(128)},
}

// metallbRefused are the testdata/metallb objects that use a setting metalgate does not
// support, by kind/name: the field the API server's refusal names and a part of its message.
var metallbRefused = map[string]struct{ field, reason string }{
	"BGPPeer/spine-b":       {"spec.vrf", "vrf is not supported"},
	"BFDProfile/production": {"spec.echoMode", "echoMode is not supported"},
}

// TestMetalLBManifests checks that MetalLB users can bring their manifests by changing only the
// apiVersion: every field is known to the schema (strict field validation fails on any other)
// and comes back unchanged — but for the settings metalgate does not support (metallbRefused),
// which the API server refuses, naming the field, rather than accepting what no speaker would
// do.
func TestMetalLBManifests(t *testing.T) {
	unseen := maps.Clone(metallbRefused)
	ctx, c := apiServer(t)
	ns := namespace(ctx, t, c, "metallb-system")
	objs, files := readManifests(t, "testdata/metallb/*.yaml")
	for _, orig := range objs {
		delete(unseen, orig.GetKind()+"/"+orig.GetName())
	}
	for k := range unseen {
		t.Errorf("metallbRefused names %s, which testdata/metallb does not hold", k)
	}
	for i, orig := range objs {
		t.Run(files[i]+"/"+orig.GetKind()+"/"+orig.GetName(), func(t *testing.T) {
			switch orig.GetAPIVersion() {
			case "metallb.io/v1beta1", "metallb.io/v1beta2":
			default:
				t.Fatalf("apiVersion %s; testdata must keep MetalLB's own apiVersions", orig.GetAPIVersion())
			}
			obj := orig.DeepCopy()
			obj.SetAPIVersion(v1alpha1.GroupVersion.String())
			obj.SetNamespace(ns)
			err := c.Create(ctx, obj, strict)
			if want, refused := metallbRefused[orig.GetKind()+"/"+orig.GetName()]; refused {
				if !apierrors.IsInvalid(err) || !hasCause(err, want.field, want.reason) {
					t.Fatalf("create = %v; want Invalid with a cause for %s saying %q", err, want.field, want.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("create: %v", err)
			}

			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(obj.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatalf("get: %v", err)
			}
			want, hasSpec, _ := unstructured.NestedMap(orig.Object, "spec")
			if hasSpec {
				for k, v := range metallbDefaults[orig.GetKind()] {
					if _, set := want[k]; !set {
						want[k] = v
					}
				}
			}
			gotSpec, _, _ := unstructured.NestedMap(got.Object, "spec")
			if diff := cmp.Diff(want, gotSpec); diff != "" {
				t.Errorf("spec changed on the way through the API server (-sent +stored):\n%s", diff)
			}
		})
	}
}

// TestDefaults checks the defaults the API server fills in, read back through the Go types.
func TestDefaults(t *testing.T) {
	ctx, c := apiServer(t)
	ns := namespace(ctx, t, c, "defaults")

	pool := &v1alpha1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec:       v1alpha1.IPAddressPoolSpec{Addresses: []v1alpha1.AddressRange{"192.0.2.0/24"}},
	}
	if err := c.Create(ctx, pool, strict); err != nil {
		t.Fatalf("create pool: %v", err)
	}
	if pool.Spec.AutoAssign == nil || !*pool.Spec.AutoAssign {
		t.Errorf("autoAssign = %v, want true", pool.Spec.AutoAssign)
	}

	peer := &v1alpha1.BGPPeer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peer"},
		Spec:       v1alpha1.BGPPeerSpec{MyASN: 64512, ASN: 64500, Address: "198.51.100.1"},
	}
	if err := c.Create(ctx, peer, strict); err != nil {
		t.Fatalf("create peer: %v", err)
	}
	if peer.Spec.Port == nil || *peer.Spec.Port != 179 {
		t.Errorf("peerPort = %v, want 179", peer.Spec.Port)
	}

	adv := &v1alpha1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adv"}}
	if err := c.Create(ctx, adv, strict); err != nil {
		t.Fatalf("create BGPAdvertisement: %v", err)
	}
	if adv.Spec.AggregationLength == nil || *adv.Spec.AggregationLength != 32 {
		t.Errorf("aggregationLength = %v, want 32", adv.Spec.AggregationLength)
	}
	if adv.Spec.AggregationLengthV6 == nil || *adv.Spec.AggregationLengthV6 != 128 {
		t.Errorf("aggregationLengthV6 = %v, want 128", adv.Spec.AggregationLengthV6)
	}

	// Set values are kept, not replaced by the defaults.
	set := &v1alpha1.BGPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "set"},
		Spec:       v1alpha1.BGPAdvertisementSpec{AggregationLength: ptr.To[int32](24), AggregationLengthV6: ptr.To[int32](0)},
	}
	if err := c.Create(ctx, set, strict); err != nil {
		t.Fatalf("create BGPAdvertisement: %v", err)
	}
	if *set.Spec.AggregationLength != 24 || *set.Spec.AggregationLengthV6 != 0 {
		t.Errorf("aggregation lengths = %d/%d, want 24/0", *set.Spec.AggregationLength, *set.Spec.AggregationLengthV6)
	}
}

// TestTypedRoundTrip writes every kind through the Go types, with every field set, and reads it
// back: the Go types and the generated schema agree (nothing pruned, 32-bit unsigned values
// fit), and the status subresources take what the controller and speakers write.
func TestTypedRoundTrip(t *testing.T) {
	ctx, c := apiServer(t)
	ns := namespace(ctx, t, c, "typed")
	sel := []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}

	objs := []client.Object{
		&v1alpha1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}, Spec: v1alpha1.IPAddressPoolSpec{
			Addresses: []v1alpha1.AddressRange{"192.0.2.0/24", "2001:db8::10-2001:db8::ff"}, AutoAssign: ptr.To(false), AvoidBuggyIPs: true,
			ServiceAllocation: &v1alpha1.ServiceAllocation{Priority: 3, Namespaces: []string{"x"}, NamespaceSelectors: sel, ServiceSelectors: sel},
		}},
		&v1alpha1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "l2"}, Spec: v1alpha1.L2AdvertisementSpec{
			IPAddressPools: []string{"pool"}, IPAddressPoolSelectors: sel, NodeSelectors: sel, Interfaces: []string{"eth0"},
		}},
		&v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peer"}, Spec: v1alpha1.BGPPeerSpec{
			MyASN: 4294967295, ASN: 4294967294, Address: "2001:db8::1", Port: ptr.To[uint16](65535), SrcAddress: "2001:db8::2",
			HoldTime: &metav1.Duration{Duration: 90 * time.Second}, KeepaliveTime: &metav1.Duration{Duration: 30 * time.Second},
			ConnectTime: &metav1.Duration{Duration: 1500 * time.Millisecond}, RouterID: "10.0.0.1", NodeSelectors: sel,
			PasswordSecret: corev1.SecretReference{Name: "s", Namespace: ns}, BFDProfile: "fast",
			EnableGracefulRestart: true, EBGPMultiHop: true,
		}},
		&v1alpha1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adv"}, Spec: v1alpha1.BGPAdvertisementSpec{
			AggregationLength: ptr.To[int32](30), AggregationLengthV6: ptr.To[int32](120), LocalPref: 4294967295,
			Communities: []string{"65000:1", "large:1:2:3", "alias"}, IPAddressPools: []string{"pool"}, IPAddressPoolSelectors: sel,
			NodeSelectors: sel, Peers: []string{"peer"},
		}},
		&v1alpha1.BFDProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bfd"}, Spec: v1alpha1.BFDProfileSpec{
			ReceiveInterval: ptr.To[uint32](300), TransmitInterval: ptr.To[uint32](300), DetectMultiplier: ptr.To[uint32](3),
			EchoInterval: ptr.To[uint32](50), MinimumTTL: ptr.To[uint32](254),
		}},
		&v1alpha1.Community{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "community"}, Spec: v1alpha1.CommunitySpec{
			Communities: []v1alpha1.CommunityAlias{{Name: "alias", Value: "65000:1"}},
		}},
	}
	for _, obj := range objs {
		sent := obj.DeepCopyObject().(client.Object)
		if err := c.Create(ctx, obj, strict); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
		got := obj.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatalf("get %T: %v", obj, err)
		}
		if diff := cmp.Diff(sent, got, cmp.FilterPath(func(p cmp.Path) bool {
			return p.String() == "ObjectMeta" || p.String() == "TypeMeta"
		}, cmp.Ignore())); diff != "" {
			t.Errorf("%T changed on the way through the API server (-sent +stored):\n%s", obj, diff)
		}
	}

	// Status as the controller writes it.
	pool := &v1alpha1.IPAddressPool{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pool"}, pool); err != nil {
		t.Fatal(err)
	}
	pool.Status = v1alpha1.IPAddressPoolStatus{AssignedIPv4: 2, AvailableIPv4: 254, AvailableIPv6: 240}
	meta.SetStatusCondition(&pool.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionValid,
		Status: metav1.ConditionTrue, Reason: "Valid", Message: "in use", ObservedGeneration: pool.Generation})
	meta.SetStatusCondition(&pool.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionOverlap,
		Status: metav1.ConditionTrue, Reason: "Overlapping", Message: "shares 192.0.2.0/24 with pool other"})
	if err := c.Status().Update(ctx, pool); err != nil {
		t.Fatalf("update pool status: %v", err)
	}
	if !meta.IsStatusConditionTrue(pool.Status.Conditions, v1alpha1.ConditionOverlap) || pool.Status.AvailableIPv4 != 254 {
		t.Errorf("pool status not stored: %+v", pool.Status)
	}

	peer := &v1alpha1.BGPPeer{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "peer"}, peer); err != nil {
		t.Fatal(err)
	}
	peer.Status.Nodes = []v1alpha1.BGPPeerNodeStatus{
		{Node: "n1", SessionState: v1alpha1.SessionStateEstablished, PrefixesAdvertised: 4, LastTransitionTime: metav1.Now()},
		{Node: "n2", SessionState: v1alpha1.SessionStateActive, LastError: "connection refused"},
	}
	if err := c.Status().Update(ctx, peer); err != nil {
		t.Fatalf("update peer status: %v", err)
	}
	peer.Status.Nodes = []v1alpha1.BGPPeerNodeStatus{{Node: "n1", SessionState: "Up"}}
	if err := c.Status().Update(ctx, peer); !apierrors.IsInvalid(err) {
		t.Errorf("session state Up: got %v, want Invalid", err)
	}
}
