package main

import (
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalgate/metalgate/allocator"
	"github.com/metalgate/metalgate/api/contract"
	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/controllers"
)

// MetalLB's API group, and the kinds and versions migrate reads (MetalLB 0.13 to 0.15).
const metallbGroup = "metallb.io"

// metallbSpecs maps each MetalLB kind migrate translates to the metalgate spec it must fit:
// field names follow MetalLB's, so a field is kept when the metalgate type has it and
// reported otherwise.
var metallbSpecs = map[string]reflect.Type{
	"IPAddressPool":    reflect.TypeFor[v1alpha1.IPAddressPoolSpec](),
	"L2Advertisement":  reflect.TypeFor[v1alpha1.L2AdvertisementSpec](),
	"BGPAdvertisement": reflect.TypeFor[v1alpha1.BGPAdvertisementSpec](),
	"BGPPeer":          reflect.TypeFor[v1alpha1.BGPPeerSpec](),
	"BFDProfile":       reflect.TypeFor[v1alpha1.BFDProfileSpec](),
	"Community":        reflect.TypeFor[v1alpha1.CommunitySpec](),
}

// metallbVersions lists the apiVersions of each kind: BGPPeer is v1beta2 (v1beta1 is
// deprecated but still served, with nodeSelectors of the same shape and fewer fields), the
// others v1beta1.
var metallbVersions = map[string][]string{
	"BGPPeer": {"metallb.io/v1beta2", "metallb.io/v1beta1"},
}

func metallbAPIVersions(kind string) []string {
	if v, ok := metallbVersions[kind]; ok {
		return v
	}
	return []string{"metallb.io/v1beta1"}
}

// metallbOther says why the other metallb.io kinds are not migrated.
var metallbOther = map[string]string{
	"ServiceL2Status":    "status MetalLB's speakers write; metalgate's speakers answer kubectl metalgate announcers",
	"ServiceBGPStatus":   "status MetalLB's speakers write; metalgate's speakers answer kubectl metalgate announcers",
	"ConfigurationState": "status MetalLB writes; metalgate reports in each object's status and in kubectl metalgate check",
	"AddressPool":        "removed in MetalLB 0.14: let MetalLB convert it to an IPAddressPool and an L2Advertisement or BGPAdvertisement first, then migrate those",
	"MetalLB":            "the MetalLB operator's install settings: install metalgate with its own manifests or Helm chart",
}

// durationPattern is what metalgate's CRDs accept for BGPPeer durations (api/v1alpha1
// bgppeer_types.go): units in decreasing order, each at most once.
var durationPattern = regexp.MustCompile(`^(0|([0-9]{1,6}(\.[0-9]{1,9})?h)?([0-9]{1,6}(\.[0-9]{1,9})?m)?([0-9]{1,6}(\.[0-9]{1,9})?s)?([0-9]{1,6}(\.[0-9]{1,9})?ms)?([0-9]{1,6}(\.[0-9]{1,9})?(us|µs))?([0-9]{1,6}(\.[0-9]{1,9})?ns)?)$`)

// migrateMetalLB translates one MetalLB object. It returns nil and the reason when the object
// cannot be migrated.
func migrateMetalLB(src source, s *migrateSettings) (*unstructured.Unstructured, *objectReport, string) {
	in := src.obj
	kind := in.GetKind()
	specType, ok := metallbSpecs[kind]
	if !ok {
		if why, ok := metallbOther[kind]; ok {
			return nil, nil, why
		}
		return nil, nil, fmt.Sprintf("metalgate has no kind %s", kind)
	}
	if !slices.Contains(metallbAPIVersions(kind), in.GetAPIVersion()) {
		return nil, nil, fmt.Sprintf("apiVersion %s of %s is not one migrate reads (%s)", in.GetAPIVersion(), kind, strings.Join(metallbAPIVersions(kind), ", "))
	}
	rep := &objectReport{
		title: fmt.Sprintf("%s %s/%s", kind, s.namespace, in.GetName()),
		from:  joinNonEmpty(", ", in.GetAPIVersion()+" "+objectName(in), src.origin),
	}
	out := newObject(v1alpha1.GroupVersion.String(), kind, s.namespace, in)
	if ns := in.GetNamespace(); ns != "" && ns != s.metallbNamespace {
		rep.add(changed, "metadata.namespace", "%s → %s: metalgate reads its configuration only from its own namespace (MetalLB, from %s, ignores this object)", ns, s.namespace, s.metallbNamespace)
	}
	for k := range in.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "spec", "status":
		default:
			rep.add(unsupported, k, "not a field of a Kubernetes object; left out")
		}
	}
	spec, _, _ := unstructured.NestedMap(in.Object, "spec") // a deep copy
	if spec == nil {
		spec = map[string]any{}
	}
	switch kind {
	case "BGPPeer":
		if why := fixBGPPeer(spec, in.GetAPIVersion(), s.namespace, rep); why != "" {
			return nil, nil, why
		}
	case "BFDProfile":
		fixBFDProfile(spec, rep)
	}
	unknown, malformed := dropUnknown("spec", spec, specType)
	for _, path := range unknown {
		rep.add(unsupported, path, "metalgate.io/v1alpha1 %s has no such field; left out", kind)
	}
	for _, m := range malformed {
		rep.add(unsupported, m.path, "%s, but metalgate.io/v1alpha1 %s wants %s; kept as it is: the API server refuses the object until it is fixed", m.got, kind, m.want)
	}
	var fields []string
	for k := range spec {
		if !mentioned(rep, "spec."+k) {
			fields = append(fields, k)
		}
	}
	sort.Strings(fields)
	if len(fields) > 0 && len(rep.entries) > 0 {
		// Say what did map, next to what did not; a clean object needs no list.
		rep.entries = append([]entry{{verdict: same, what: "spec", detail: strings.Join(fields, ", ")}}, rep.entries...)
	}
	if len(spec) > 0 || in.Object["spec"] != nil {
		out.Object["spec"] = spec
	}
	return out, rep, ""
}

// mentioned says whether the report has an entry for path or a field under it.
func mentioned(rep *objectReport, path string) bool {
	for _, e := range rep.entries {
		if e.what == path || strings.HasPrefix(e.what, path+".") || strings.HasPrefix(e.what, path+"[") {
			return true
		}
	}
	return false
}

// fixBGPPeer adjusts the values of a BGPPeer spec that MetalLB and metalgate read
// differently, and removes the MetalLB fields metalgate lacks with the reason. It returns why
// the peer cannot be migrated at all, or "".
func fixBGPPeer(spec map[string]any, apiVersion, namespace string, rep *objectReport) string {
	if vrf, _ := spec["vrf"].(string); vrf != "" {
		return fmt.Sprintf("spec.vrf %s: metalgate's BGP speaker opens sessions in the default routing table only (it refuses a peer with a VRF)", vrf)
	}
	if mode, ok := spec["dynamicASN"]; ok {
		if asn, _ := spec["peerASN"].(int64); asn == 0 {
			return fmt.Sprintf("spec.dynamicASN %v: metalgate needs the peer's AS number in spec.peerASN", mode)
		}
		delete(spec, "dynamicASN")
		rep.add(unsupported, "spec.dynamicASN", "metalgate checks the peer's AS number against spec.peerASN; left out")
	}
	if iface, ok := spec["interface"]; ok {
		if addr, _ := spec["peerAddress"].(string); addr == "" {
			return fmt.Sprintf("spec.interface %v: BGP unnumbered (peering over an interface without an address) is not supported; metalgate needs spec.peerAddress", iface)
		}
		delete(spec, "interface")
		rep.add(unsupported, "spec.interface", "BGP unnumbered is not supported; the session goes to spec.peerAddress; left out")
	}
	if v, ok := spec["disableMP"]; ok {
		delete(spec, "disableMP")
		if v == true {
			rep.add(unsupported, "spec.disableMP", "metalgate sends IPv4 and IPv6 prefixes over one session (multiprotocol BGP); separate sessions per family are not supported; left out")
		} else {
			rep.add(same, "spec.disableMP", "false is what metalgate does (one multiprotocol session); left out")
		}
	}
	if v, ok := spec["dualStackAddressFamily"]; ok {
		delete(spec, "dualStackAddressFamily")
		if v == true {
			rep.add(same, "spec.dualStackAddressFamily", "metalgate always sends the other family's prefixes too, with a next hop of that family from the node; left out")
		} else {
			rep.add(changed, "spec.dualStackAddressFamily", "false: metalgate sends the other family's prefixes over the session anyway when the node has an address of that family (MetalLB did not); left out")
		}
	}
	if ref, ok := spec["passwordSecret"].(map[string]any); ok {
		if name, _ := ref["name"].(string); name != "" {
			from, _ := ref["namespace"].(string)
			if from != "" && from != namespace {
				ref["namespace"] = namespace
			}
			rep.add(changed, "spec.passwordSecret", "metalgate's speaker reads the Secret %s from its own namespace %s (a kubernetes.io/basic-auth Secret with key password, as MetalLB's): copy it there%s",
				name, namespace, map[bool]string{true: fmt.Sprintf(" (namespace %s → %s)", from, namespace)}[from != "" && from != namespace])
		}
	}
	if bfd, _ := spec["bfdProfile"].(string); bfd != "" && spec["ebgpMultiHop"] == true {
		delete(spec, "bfdProfile")
		rep.add(unsupported, "spec.bfdProfile", "%s on a multi-hop session: metalgate's embedded BFD is single-hop only (the speaker refuses the peer with it); left out: the session runs without BFD", bfd)
	}
	if id, _ := spec["routerID"].(string); id != "" {
		rep.add(changed, "spec.routerID", "%s kept: metalgate's speaker has one router ID per node, its first IPv4 InternalIP; on a node with another, the speaker refuses this peer (BGPPeer status says so)", id)
	}
	if p, ok := spec["peerPort"]; ok && p == int64(0) {
		delete(spec, "peerPort")
		rep.add(changed, "spec.peerPort", "0 (MetalLB then dials 179) is left out: metalgate's default is 179 and it refuses 0")
	}
	fixBGPTimers(spec, apiVersion, rep)
	return ""
}

// fixBGPTimers rewrites holdTime, keepaliveTime and connectTime to the duration form
// metalgate accepts, leaves out what MetalLB v1beta1 reads as unset, and reports what it
// cannot fix (the API server then refuses the object).
func fixBGPTimers(spec map[string]any, apiVersion string, rep *objectReport) {
	for _, f := range []string{"holdTime", "keepaliveTime", "connectTime"} {
		raw, ok := spec[f]
		if !ok {
			continue
		}
		v, isString := raw.(string)
		if !isString {
			continue // null, or another type: dropUnknown reports it
		}
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			rep.add(unsupported, "spec."+f, "%q is not a duration metalgate takes (%v); kept as it is: the API server refuses the object until it is fixed", v, err)
		case d == 0 && apiVersion == "metallb.io/v1beta1" && f != "connectTime":
			// v1beta1 has no pointer here: a peer that never set it reads back as 0s.
			delete(spec, f)
			rep.add(changed, "spec."+f, "%q in MetalLB v1beta1 means unset (MetalLB's default); metalgate reads 0 as no hold timer; left out so the default applies", v)
		case durationPattern.MatchString(v):
		case d >= 0 && durationPattern.MatchString(d.String()):
			spec[f] = d.String()
			rep.add(changed, "spec."+f, "%q is written %q (metalgate accepts units in decreasing order, each once)", v, spec[f])
		default:
			rep.add(unsupported, "spec."+f, "%q is out of metalgate's range (not negative, at most 6 digits a unit); kept as it is: the API server refuses the object until it is fixed", v)
		}
	}
}

// fixBFDProfile removes what metalgate's embedded BFD does not do: echo and passive mode (the
// speaker refuses a profile with either), and the settings it does not use.
func fixBFDProfile(spec map[string]any, rep *objectReport) {
	for _, f := range []string{"echoMode", "passiveMode"} {
		if v, ok := spec[f]; ok {
			delete(spec, f)
			if v == true {
				rep.add(unsupported, "spec."+f, "not supported by metalgate's embedded BFD (the speaker refuses a profile with it); left out: BFD runs without it")
			} else {
				rep.add(same, "spec."+f, "false is what metalgate does; left out")
			}
		}
	}
	for _, f := range []string{"echoInterval", "minimumTtl"} {
		if v, ok := spec[f]; ok {
			delete(spec, f)
			rep.add(unsupported, "spec."+f, "%v: metalgate's embedded BFD has no such setting (no echo, single-hop only); left out", v)
		}
	}
}

// badShape is a value of the wrong JSON type for the metalgate field at path.
type badShape struct{ path, got, want string }

// dropUnknown removes from v every field that type t (a metalgate API type, read through its
// json tags) does not have, and returns their paths, sorted; and the values whose JSON type
// is not the one t wants (left as they are: the API server refuses them with the reason).
func dropUnknown(path string, v any, t reflect.Type) (unknown []string, malformed []badShape) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return nil, nil // null: the same as unset
	}
	wrong := func(want string) (unknown []string, malformed []badShape) {
		return nil, []badShape{{path, jsonType(v), want}}
	}
	switch {
	case t == reflect.TypeFor[metav1.Duration]() || t == reflect.TypeFor[metav1.Time]() || t.Kind() == reflect.String:
		if _, ok := v.(string); !ok {
			return wrong("a string")
		}
		return nil, nil
	case t.Kind() == reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrong("true or false")
		}
		return nil, nil
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		switch v.(type) {
		case int64, float64:
			return nil, nil
		}
		return wrong("a number")
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				delete(m, k)
				unknown = append(unknown, path+"."+k)
				continue
			}
			u, b := dropUnknown(path+"."+k, m[k], ft)
			unknown, malformed = append(unknown, u...), append(malformed, b...)
		}
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			return wrong("a list")
		}
		for i, e := range l {
			u, b := dropUnknown(fmt.Sprintf("%s[%d]", path, i), e, t.Elem())
			unknown, malformed = append(unknown, u...), append(malformed, b...)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return wrong("an object")
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			u, b := dropUnknown(path+"."+k, m[k], t.Elem())
			unknown, malformed = append(unknown, u...), append(malformed, b...)
		}
	}
	sort.Strings(unknown)
	return unknown, malformed
}

// jsonType names the JSON type of a decoded value, for the report.
func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// jsonFields maps the JSON names of a struct's fields (embedded inline structs included) to
// their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// sharedAcrossNamespaces finds, for each pool, the sharing keys that Services of more than one
// namespace use for one address: MetalLB allows that, metalgate only when the pool says
// spec.addressSharing: AcrossNamespaces. The value names the Services, for the report.
func sharedAcrossNamespaces(pools []*unstructured.Unstructured, services []*unstructured.Unstructured) map[string]string {
	type holder struct{ ns, name string }
	byAddr := map[string][]holder{} // "address|key"
	for _, svc := range services {
		key := firstAnnotation(svc.GetAnnotations(), contract.AnnotationKeys(contract.AnnotationAllowSharedIP))
		if key == "" {
			continue
		}
		ingress, _, _ := unstructured.NestedSlice(svc.Object, "status", "loadBalancer", "ingress")
		for _, i := range ingress {
			m, _ := i.(map[string]any)
			ip, _ := m["ip"].(string)
			if ip != "" {
				byAddr[ip+"|"+key] = append(byAddr[ip+"|"+key], holder{svc.GetNamespace(), svc.GetName()})
			}
		}
	}
	out := map[string]string{}
	keys := make([]string, 0, len(byAddr))
	for k := range byAddr {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		hs := byAddr[k]
		nss := map[string]bool{}
		for _, h := range hs {
			nss[h.ns] = true
		}
		if len(nss) < 2 {
			continue
		}
		ip, key, _ := strings.Cut(k, "|")
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			continue
		}
		for _, p := range pools {
			if _, done := out[p.GetName()]; done || !poolHas(p, addr.Unmap()) {
				continue
			}
			var names []string
			for _, h := range hs {
				names = append(names, h.ns+"/"+h.name)
			}
			sort.Strings(names)
			out[p.GetName()] = fmt.Sprintf("%s share %s under key %q", strings.Join(names, " and "), ip, key)
		}
	}
	return out
}

// poolHas says whether one of the pool's address blocks holds a.
func poolHas(pool *unstructured.Unstructured, a netip.Addr) bool {
	addrs, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "addresses")
	for _, s := range addrs {
		r, err := allocator.ParseRange(s)
		if err == nil && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0 {
			return true
		}
	}
	return false
}

// setAddressSharing reports, on every migrated pool, MetalLB's sharing rule and what migrate
// did about it: AcrossNamespaces where the Services read need it (across says who).
func setAddressSharing(pool *unstructured.Unstructured, rep *objectReport, across string, servicesRead bool) {
	if _, set, _ := unstructured.NestedString(pool.Object, "spec", "addressSharing"); set {
		return
	}
	switch {
	case across != "":
		_ = unstructured.SetNestedField(pool.Object, string(v1alpha1.AddressSharingAcrossNamespaces), "spec", "addressSharing")
		rep.add(changed, "spec.addressSharing", "set to AcrossNamespaces, MetalLB's rule, because %s; metalgate's default shares only within a namespace", across)
	case servicesRead:
		rep.add(changed, "spec.addressSharing", "left unset: metalgate shares an address only among Services of one namespace (MetalLB: any namespace); no Service read shares across namespaces")
	default:
		rep.add(changed, "spec.addressSharing", "left unset: metalgate shares an address only among Services of one namespace (MetalLB: any namespace); no Services were read to check (set AcrossNamespaces if yours do)")
	}
}

// firstAnnotation returns the value of the first of keys present in ann ("" when none is).
func firstAnnotation(ann map[string]string, keys []string) string {
	for _, k := range keys {
		if v, ok := ann[k]; ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// serviceReport says how a LoadBalancer Service with MetalLB annotations fares: the controller
// reads them as they are (nil when the Service has none).
func serviceReport(svc *unstructured.Unstructured, origin string) *objectReport {
	if t, _, _ := unstructured.NestedString(svc.Object, "spec", "type"); t != "LoadBalancer" {
		return nil
	}
	ann := svc.GetAnnotations()
	rep := &objectReport{title: "Service " + objectName(svc), from: origin}
	for _, name := range []string{contract.AnnotationLoadBalancerIPs, contract.AnnotationAddressPool, contract.AnnotationAllowSharedIP} {
		for _, k := range contract.AnnotationKeys(name)[1:] {
			if _, ok := ann[k]; ok {
				rep.add(same, k, "read as %s", name)
			}
		}
	}
	// The class is immutable and the controller serves only its own (and none): a Service of
	// MetalLB's class would stay pending after the cut-over.
	if class, _, _ := unstructured.NestedString(svc.Object, "spec", "loadBalancerClass"); class != "" && class != controllers.DefaultLBClass {
		rep.add(breaking, "spec.loadBalancerClass", "class %q is not metalgate's (%s) and cannot be changed in place: the Service stays pending after the cut-over. "+
			"Recreate it without spec.loadBalancerClass (delete and apply; keep its address with metalgate.io/loadBalancerIPs), "+
			"or run the controller with --lb-class=%s", class, controllers.DefaultLBClass, class)
	}
	if len(rep.entries) == 0 {
		return nil
	}
	for _, c := range controllers.AnnotationConflicts(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}) {
		rep.add(changed, "metadata.annotations", "%s; the controller says so in an InvalidRequest Warning event", c)
	}
	return rep
}

// newObject starts an output object: apiVersion, kind, name, namespace, and the labels and
// annotations of in (selectors may depend on the labels), without what the API server wrote.
func newObject(apiVersion, kind, namespace string, in *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(apiVersion)
	out.SetKind(kind)
	out.SetName(in.GetName())
	out.SetNamespace(namespace)
	if l := in.GetLabels(); len(l) > 0 {
		out.SetLabels(l)
	}
	ann := in.GetAnnotations()
	delete(ann, lastApplied)
	if len(ann) > 0 {
		out.SetAnnotations(ann)
	}
	return out
}

// lastApplied is kubectl apply's record of the object; migrate's output makes a new one.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
