package bundle

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/rollout"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A Rollout's status may be written by others than the manager: the revision a rollback returns
// to is deployed only when its seal verifies, for this Bundle, under the manager's key. A forged
// status.passed naming another Content (another namespace's resources) is not deployed.
func TestOnlySealedRevisionsAreReturnedTo(t *testing.T) {
	key := sealer(strings.Repeat("k", 32))
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "fleet-default", UID: "c1"}}
	ci := target.ClusterInfo{Cluster: c}
	all := []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet-default", UID: "b1"},
		Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "v2"}, Targets: all}}
	desired, err := render(b, ci, &target.Match{Targets: []int{0}}, "s-new")
	if err != nil {
		t.Fatal(err)
	}
	cur := desired.DeepCopy()
	cur.Annotations = map[string]string{fleet.RolloutRevisionAnnotation: "r2"}
	sealed := func(content string) *fleet.RolloutRevision {
		r := rollout.Inputs(b, content)
		r.Seal = key.seal(b, r)
		return r
	}
	back := func(k sealer, passed *fleet.RolloutRevision) *fleet.BundleDeployment {
		pg := &progressive{bundle: b, verify: k.verify, result: rollout.Result{Status: fleet.RolloutStatus{Passed: passed}}}
		return pg.rollBack(ci, desired, cur)
	}
	if bd := back(key, sealed("s-old")); bd == nil || bd.Labels[fleet.ContentNameLabel] != "s-old" {
		t.Fatalf("a revision the manager sealed is not returned to: %+v", bd)
	}
	forged := sealed("s-old")
	forged.Content = "s-another-teams"
	unsealed := rollout.Inputs(b, "s-old")
	other := sealed("s-old")
	otherBundle := b.DeepCopy()
	otherBundle.UID = "b2"
	other.Seal = key.seal(otherBundle, other)
	for name, tc := range map[string]struct {
		key    sealer
		passed *fleet.RolloutRevision
	}{
		"content changed after sealing": {key, forged},
		"no seal":                       {key, unsealed},
		"another Bundle's seal":         {key, other},
		"another installation's key":    {sealer(strings.Repeat("x", 32)), sealed("s-old")},
		"no key":                        {nil, sealed("s-old")},
	} {
		if bd := back(tc.key, tc.passed); bd != nil {
			t.Errorf("%s: rolled back to %s", name, bd.Labels[fleet.ContentNameLabel])
		}
	}
}
