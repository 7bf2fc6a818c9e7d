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

// The form Fleet and the Rancher UI write for an OCI chart (the reference in helm.repo, no
// helm.chart) is accepted, and the Bundle names the chart by its reference.
func TestOCIReferenceInRepo(t *testing.T) {
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet-default"}}
	op.Spec.Helm = &fleet.HelmOptions{Repo: "oci://registry.example/charts/app", Version: "1.x"}
	if err := validate(op); err == nil {
		t.Fatal("before: no chart, refused")
	}
	ociRepo(op)
	if err := validate(op); err != nil {
		t.Fatalf("the UI's form: %v", err)
	}
	b := bundle(op, "1.2.0")
	if b.Spec.Helm.Chart != "oci://registry.example/charts/app" || b.Spec.Helm.Repo != "" || b.Spec.Helm.Version != "1.2.0" {
		t.Errorf("bundle helm %+v", b.Spec.Helm)
	}
	// A chart repository with a chart name is left as it is.
	op.Spec.Helm = &fleet.HelmOptions{Repo: "https://charts.example", Chart: "app"}
	ociRepo(op)
	if op.Spec.Helm.Repo != "https://charts.example" || op.Spec.Helm.Chart != "app" {
		t.Errorf("a repository form changed: %+v", op.Spec.Helm)
	}
}
