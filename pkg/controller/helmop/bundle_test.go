package helmop

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A HelmOp's Bundle carries the HelmOp's shard label, and only that: a shard-ref in spec.labels
// would hand the Bundle to a shard other than the HelmOp's.
func TestBundleFollowsTheHelmOpsShard(t *testing.T) {
	for name, tc := range map[string]struct {
		own, specLabel string
		want           string
	}{
		"labelled":                        {own: "shard-a", want: "shard-a"},
		"unlabelled":                      {},
		"spec.labels names another shard": {own: "shard-a", specLabel: "shard-b", want: "shard-a"},
		"only spec.labels names a shard":  {specLabel: "shard-b"},
	} {
		op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet-default", Labels: map[string]string{}}}
		op.Spec.Labels = map[string]string{"team": "x"}
		op.Spec.Helm = &fleet.HelmOptions{Chart: "app"}
		if tc.own != "" {
			op.Labels[fleet.ShardLabel] = tc.own
		}
		if tc.specLabel != "" {
			op.Spec.Labels[fleet.ShardLabel] = tc.specLabel
		}
		b := bundle(op, "1.0.0")
		got, ok := b.Labels[fleet.ShardLabel]
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: Bundle shard label = %q (set %v), want %q", name, got, ok, tc.want)
		}
		if b.Labels["team"] != "x" || b.Labels[fleet.HelmNameLabel] != "app" {
			t.Errorf("%s: Bundle labels %v lack spec.labels or the HelmOp's name", name, b.Labels)
		}
	}
}
