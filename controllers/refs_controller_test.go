package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalgate/metalgate/api/v1alpha1"
	"github.com/metalgate/metalgate/controllers"
	"github.com/metalgate/metalgate/internal/testenv"
)

// validOf reads the Valid condition and status.observedGeneration (-1: the kind has none) of
// a configuration object.
func validOf(o client.Object) (*metav1.Condition, int64) {
	switch o := o.(type) {
	case *v1alpha1.L2Advertisement:
		return meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionValid), o.Status.ObservedGeneration
	case *v1alpha1.BGPAdvertisement:
		return meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionValid), o.Status.ObservedGeneration
	case *v1alpha1.BFDProfile:
		return meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionValid), o.Status.ObservedGeneration
	case *v1alpha1.Community:
		return meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionValid), o.Status.ObservedGeneration
	case *v1alpha1.BGPPeer:
		return meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionValid), -1
	}
	panic(fmt.Sprintf("validOf(%T)", o))
}

// waitValid waits until o (re-read into o) shows Valid with status, reason and message, for
// its current generation (the condition's observedGeneration and status.observedGeneration).
func waitValid(t *testing.T, o client.Object, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	key := client.ObjectKeyFromObject(o)
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("Valid=%s %s on %T %s", status, reason, o, key.Name), func() error {
		if err := k8sClient.Get(context.Background(), key, o); err != nil {
			return err
		}
		c, observed := validOf(o)
		switch {
		case c == nil:
			return fmt.Errorf("no Valid condition")
		case c.Status != status || c.Reason != reason || c.Message != message:
			return fmt.Errorf("Valid = %s %s %q, want %s %s %q", c.Status, c.Reason, c.Message, status, reason, message)
		case c.ObservedGeneration != o.GetGeneration():
			return fmt.Errorf("condition observedGeneration %d, generation %d", c.ObservedGeneration, o.GetGeneration())
		case observed >= 0 && observed != o.GetGeneration():
			return fmt.Errorf("status.observedGeneration %d, generation %d", observed, o.GetGeneration())
		}
		return nil
	})
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	o.SetNamespace(controllers.DefaultNamespace)
	if err := k8sClient.Create(context.Background(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), o) })
}

func del(t *testing.T, o client.Object) {
	t.Helper()
	if err := k8sClient.Delete(context.Background(), o); err != nil {
		t.Fatalf("delete %T %s: %v", o, o.GetName(), err)
	}
}

// TestRefsAdvertisementPool: an L2Advertisement naming a pool that does not exist is
// Valid=False naming the field and the pool; creating the pool flips it to True, deleting it
// flips it back; a spec edit is observed (observedGeneration follows).
func TestRefsAdvertisementPool(t *testing.T) {
	kube.Need(t)
	startController(t)
	ad := &v1alpha1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "refs-l2"},
		Spec: v1alpha1.L2AdvertisementSpec{IPAddressPools: []string{"refs-there", "refs-later"}}}
	pool(t, "refs-there", nil, "192.0.2.64/28")
	create(t, ad)
	waitValid(t, ad, metav1.ConditionFalse, v1alpha1.ReasonPoolNotFound, `spec.ipAddressPools[1]: IPAddressPool "refs-later" not found`)

	later := pool(t, "refs-later", nil, "192.0.2.80/28")
	waitValid(t, ad, metav1.ConditionTrue, v1alpha1.ReasonValid, "every reference resolves")

	del(t, later)
	waitValid(t, ad, metav1.ConditionFalse, v1alpha1.ReasonPoolNotFound, `spec.ipAddressPools[1]: IPAddressPool "refs-later" not found`)

	// A spec edit: the new generation is checked and observed.
	gen := ad.Generation
	ad.Spec.IPAddressPools = []string{"refs-there"}
	if err := k8sClient.Update(context.Background(), ad); err != nil {
		t.Fatalf("update: %v", err)
	}
	waitValid(t, ad, metav1.ConditionTrue, v1alpha1.ReasonValid, "every reference resolves")
	if ad.Generation == gen {
		t.Fatalf("generation stayed %d after a spec edit", gen)
	}

	// Nothing new, nothing written: a reconcile caused by a metadata edit leaves the object
	// as it is.
	ad.Annotations = map[string]string{"touched": "yes"}
	if err := k8sClient.Update(context.Background(), ad); err != nil {
		t.Fatalf("update: %v", err)
	}
	rv := ad.ResourceVersion
	testenv.Holds(t, 2*time.Second, "no status write without a change", func() error {
		var now v1alpha1.L2Advertisement
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(ad), &now); err != nil {
			return err
		}
		if now.ResourceVersion != rv {
			c, _ := validOf(&now)
			return fmt.Errorf("resourceVersion %s → %s (Valid %+v)", rv, now.ResourceVersion, c)
		}
		return nil
	})
}

// TestRefsBGPAdvertisement: unknown community names, missing peers and a bad selector each
// name their field; defining the name in a Community resolves it; a name defined twice with
// different values is ambiguous on the advertisement and on both Communities.
func TestRefsBGPAdvertisement(t *testing.T) {
	kube.Need(t)
	startController(t)
	ad := &v1alpha1.BGPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "refs-bgp"},
		Spec: v1alpha1.BGPAdvertisementSpec{Communities: []string{"65000:1", "refs-no-export"}, Peers: []string{"refs-peer"},
			NodeSelectors: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "In"}}}}}}
	create(t, ad)
	waitValid(t, ad, metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector,
		`spec.nodeSelectors[0]: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty; `+
			`spec.communities[1]: community name "refs-no-export" is defined by no Community in namespace metalgate-system; `+
			`spec.peers[0]: BGPPeer "refs-peer" not found`)

	ad.Spec.NodeSelectors = nil
	if err := k8sClient.Update(context.Background(), ad); err != nil {
		t.Fatalf("update: %v", err)
	}
	waitValid(t, ad, metav1.ConditionFalse, v1alpha1.ReasonCommunityNotFound,
		`spec.communities[1]: community name "refs-no-export" is defined by no Community in namespace metalgate-system; `+
			`spec.peers[0]: BGPPeer "refs-peer" not found`)

	create(t, &v1alpha1.Community{ObjectMeta: metav1.ObjectMeta{Name: "refs-a"},
		Spec: v1alpha1.CommunitySpec{Communities: []v1alpha1.CommunityAlias{{Name: "refs-no-export", Value: "65535:65281"}}}})
	waitValid(t, ad, metav1.ConditionFalse, v1alpha1.ReasonPeerNotFound, `spec.peers[0]: BGPPeer "refs-peer" not found`)

	create(t, &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "refs-peer"},
		Spec: v1alpha1.BGPPeerSpec{MyASN: 64512, ASN: 64513, Address: "192.0.2.1"}})
	waitValid(t, ad, metav1.ConditionTrue, v1alpha1.ReasonValid, "every reference resolves")

	// The same name with another value in a second Community: which one the speakers use
	// depends on list order, so both the advertisement and the Communities say so.
	b := &v1alpha1.Community{ObjectMeta: metav1.ObjectMeta{Name: "refs-b"},
		Spec: v1alpha1.CommunitySpec{Communities: []v1alpha1.CommunityAlias{{Name: "refs-no-export", Value: "65000:9"}}}}
	create(t, b)
	waitValid(t, ad, metav1.ConditionFalse, v1alpha1.ReasonCommunityAmbiguous,
		`spec.communities[1]: community name "refs-no-export" has different values in Communities "refs-a" (65535:65281), "refs-b" (65000:9)`)
	waitValid(t, b, metav1.ConditionFalse, v1alpha1.ReasonCommunityAmbiguous,
		`spec.communities[0]: name "refs-no-export" is also defined, with another value, by Communities "refs-a" (65535:65281)`)

	del(t, b)
	waitValid(t, ad, metav1.ConditionTrue, v1alpha1.ReasonValid, "every reference resolves")
}

// TestRefsBGPPeerBFDProfile: a BGPPeer naming a missing BFDProfile is Valid=False; creating
// the profile flips it to True. The condition lives next to the speakers' status.nodes: the
// controller's apply never removes a speaker's entry.
func TestRefsBGPPeerBFDProfile(t *testing.T) {
	kube.Need(t)
	startController(t)
	peer := &v1alpha1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "refs-bfd-peer"},
		Spec: v1alpha1.BGPPeerSpec{MyASN: 64512, ASN: 64513, Address: "192.0.2.2", BFDProfile: "refs-fast"}}
	create(t, peer)
	// A speaker's entry, applied as the speakers do (their own field manager).
	entry := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "BGPPeer",
		"metadata": map[string]any{"name": peer.Name, "namespace": controllers.DefaultNamespace},
		"status": map[string]any{"nodes": []any{map[string]any{"node": "n1", "sessionState": "Active",
			"lastTransitionTime": "2026-01-01T00:00:00Z"}}},
	}}
	if err := k8sClient.Status().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(entry),
		client.FieldOwner("metalgate-speaker-n1"), client.ForceOwnership); err != nil {
		t.Fatalf("apply speaker entry: %v", err)
	}
	waitValid(t, peer, metav1.ConditionFalse, v1alpha1.ReasonBFDProfileNotFound, `spec.bfdProfile: BFDProfile "refs-fast" not found`)

	prof := &v1alpha1.BFDProfile{ObjectMeta: metav1.ObjectMeta{Name: "refs-fast"}}
	create(t, prof)
	waitValid(t, peer, metav1.ConditionTrue, v1alpha1.ReasonValid, "every reference resolves")
	waitValid(t, prof, metav1.ConditionTrue, v1alpha1.ReasonValid, "every reference resolves")
	if len(peer.Status.Nodes) != 1 || peer.Status.Nodes[0].Node != "n1" {
		t.Errorf("status.nodes = %+v, want the speaker's entry for n1 kept", peer.Status.Nodes)
	}

	peer.Spec.EBGPMultiHop = true
	if err := k8sClient.Update(context.Background(), peer); err != nil {
		t.Fatalf("update: %v", err)
	}
	waitValid(t, peer, metav1.ConditionFalse, v1alpha1.ReasonBFDMultiHop,
		`spec.bfdProfile: BFDProfile "refs-fast" on an ebgpMultiHop peer: the embedded BFD is single-hop only`)

	del(t, prof)
	waitValid(t, peer, metav1.ConditionFalse, v1alpha1.ReasonBFDProfileNotFound, `spec.bfdProfile: BFDProfile "refs-fast" not found`)
	if !strings.Contains(fmt.Sprint(peer.Status.Nodes), "n1") {
		t.Errorf("status.nodes = %+v, want the speaker's entry for n1 kept", peer.Status.Nodes)
	}
}
