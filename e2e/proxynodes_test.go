//go:build e2e

package e2e

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readyProxyNodes returns the nodes running a ready metalgate proxy pod in ns, sorted, once
// there is one (within a minute). The proxies' Services are externalTrafficPolicy: Local
// (config/proxy/base), so those nodes are the only candidates to announce the VIP: the
// election picks its owner among them, not among every node.
func readyProxyNodes(t *testing.T, cl client.Client, ns string) []string {
	t.Helper()
	var nodes []string
	eventually(t, time.Minute, "a ready proxy pod in "+ns, func() error {
		var pods corev1.PodList
		if err := cl.List(context.Background(), &pods, client.InNamespace(ns),
			client.MatchingLabels{"app.kubernetes.io/name": "metalgate", "app.kubernetes.io/component": "proxy"}); err != nil {
			return err
		}
		nodes = nil
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil &&
					p.Spec.NodeName != "" && !slices.Contains(nodes, p.Spec.NodeName) {
					nodes = append(nodes, p.Spec.NodeName)
				}
			}
		}
		if len(nodes) == 0 {
			return errors.New("none ready")
		}
		return nil
	})
	slices.Sort(nodes)
	return nodes
}
