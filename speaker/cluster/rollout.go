package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=apps,namespace=metalgate-system,resources=daemonsets,verbs=get

// Labels and annotations of the DaemonSet controller that tell which pod template a pod was
// made from.
const (
	// PodTemplateGenerationLabel is set by the DaemonSet controller on every pod it creates:
	// the DaemonSet's template generation at that moment.
	PodTemplateGenerationLabel = "pod-template-generation"
	// TemplateGenerationAnnotation is the DaemonSet's template generation (apps/v1 keeps it in
	// this annotation): the API server adds one exactly when spec.template changes.
	TemplateGenerationAnnotation = appsv1.DeprecatedTemplateGeneration
)

// Rollout is the verdict of ReplacedByRollout: whether this speaker's pod is being replaced by
// its DaemonSet's rollout, and why (for the log).
type Rollout struct {
	Replaced bool
	Reason   string
}

// ReplacedByRollout decides, from this speaker's Pod, the DaemonSet that owns it and its Node,
// whether the pod is going away because its DaemonSet replaces it with a pod of a newer
// template on the same node (a rolling update, or OnDelete after a template change): then the
// node keeps its layer-2 addresses through the replacement (speaker.Options.HoldOnStop).
//
// It compares the pod's pod-template-generation label with the DaemonSet's template
// generation, not metadata.generation (which also grows when only updateStrategy or
// minReadySeconds change, and would take every later deletion for a rollout) nor the
// controller-revision-hash label (whose current value is in no status field: it would take
// listing ControllerRevisions). It is the comparison the DaemonSet controller itself makes to
// find the pods a rollout must replace.
//
// Anything else is not a replacement: a pod that is not being deleted (a SIGTERM without a
// deletion: a container restart), not controlled by this DaemonSet, of the DaemonSet's current
// template (kubectl delete pod, a node that no longer matches the DaemonSet's selector), on
// a cordoned or deleted node (a drain, maintenance), or a DaemonSet being deleted
// (uninstall); a label or annotation missing or unreadable.
func ReplacedByRollout(pod *corev1.Pod, ds *appsv1.DaemonSet, node *corev1.Node) Rollout {
	no := func(format string, args ...any) Rollout { return Rollout{Reason: fmt.Sprintf(format, args...)} }
	switch ref := metav1.GetControllerOf(pod); {
	case pod.DeletionTimestamp == nil:
		return no("the pod is not being deleted")
	case ref == nil || ref.Kind != "DaemonSet" || ref.UID != ds.UID:
		return no("the pod is not controlled by DaemonSet %s", ds.Name)
	case ds.DeletionTimestamp != nil:
		return no("DaemonSet %s is being deleted", ds.Name)
	case node == nil || node.DeletionTimestamp != nil:
		return no("the node is being deleted")
	case node.Spec.Unschedulable:
		return no("node %s is cordoned (drained or in maintenance)", node.Name)
	}
	podGen, err := strconv.ParseInt(pod.Labels[PodTemplateGenerationLabel], 10, 64)
	if err != nil {
		return no("pod label %s=%q: not a template generation", PodTemplateGenerationLabel, pod.Labels[PodTemplateGenerationLabel])
	}
	dsGen, err := strconv.ParseInt(ds.Annotations[TemplateGenerationAnnotation], 10, 64)
	if err != nil {
		return no("DaemonSet annotation %s=%q: not a template generation", TemplateGenerationAnnotation, ds.Annotations[TemplateGenerationAnnotation])
	}
	if podGen >= dsGen {
		return no("the pod is of the DaemonSet's current template (generation %d)", dsGen)
	}
	return Rollout{Replaced: true, Reason: fmt.Sprintf("template generation %d, the DaemonSet's is %d", podGen, dsGen)}
}

// DetectRollout reads this speaker's Pod (namespace/name), the DaemonSet that controls it and
// its Node from the API server (uncached: r is the manager's API reader) within timeout, and
// decides with ReplacedByRollout. An error (the API server not answering in time, no
// permission, an object gone) is returned as is, with Replaced false: a plain leave.
func DetectRollout(ctx context.Context, r client.Reader, namespace, name string, timeout time.Duration) (Rollout, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var pod corev1.Pod
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &pod); err != nil {
		return Rollout{}, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	ref := metav1.GetControllerOf(&pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		return Rollout{Reason: "the pod is not controlled by a DaemonSet"}, nil
	}
	var ds appsv1.DaemonSet
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, &ds); err != nil {
		return Rollout{}, fmt.Errorf("get daemonset %s/%s: %w", namespace, ref.Name, err)
	}
	var node corev1.Node
	if err := r.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, &node); err != nil {
		return Rollout{}, fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
	}
	return ReplacedByRollout(&pod, &ds, &node), nil
}
