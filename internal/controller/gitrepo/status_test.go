package gitrepo

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A Bundle the bundle controller has not processed at its spec yet (just applied by the commit's
// run, or changed by it) has made none of the commit's deployments: its GitRepo is not ready,
// however its earlier status reads (a commit check would say success before the rollout began).
func TestReadinessWaitsForEveryBundlesPass(t *testing.T) {
	status := &fleet.GitRepoStatus{Commit: "abc"}
	ready := func(gen, observed int64) *fleet.Bundle {
		b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Generation: gen}}
		b.Status.ObservedGeneration = observed
		fleet.SetCondition(&b.Status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "", metav1.Now().Time)
		return b
	}
	for _, c := range []struct {
		name string
		b    *fleet.Bundle
		want corev1.ConditionStatus
	}{
		{"new, no pass yet", &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Generation: 1}}, corev1.ConditionUnknown},
		{"changed, its status of the spec before", ready(2, 1), corev1.ConditionUnknown},
		{"processed and ready", ready(2, 2), corev1.ConditionTrue},
	} {
		got, msg := readiness(status, []*fleet.Bundle{c.b}, fleet.BundleSummary{})
		if got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, msg, c.want)
		}
	}
}
