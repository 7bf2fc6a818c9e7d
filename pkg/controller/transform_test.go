package controller

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func deployment(stagedReplicas float64) *fleet.BundleDeployment {
	opts := func(r float64) fleet.BundleDeploymentOptions {
		return fleet.BundleDeploymentOptions{DefaultNamespace: "app", Helm: &fleet.HelmOptions{
			Values: &fleet.GenericMap{Data: map[string]interface{}{"replicas": r}}}}
	}
	return &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "cluster-ns", Labels: map[string]string{fleet.BundleLabel: "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "fleet"}}},
		Spec: fleet.BundleDeploymentSpec{
			StagedOptions: opts(stagedReplicas), StagedDeploymentID: "s-1:a",
			Options: opts(1), DeploymentID: "s-1:a",
		},
	}
}

func TestSlimDeployment(t *testing.T) {
	bd := deployment(1)
	want := bd.DeepCopy()
	want.ManagedFields = nil
	out, err := slimDeployment(bd)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*fleet.BundleDeployment)
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("the cached deployment writes differently from the stored one:\n%s\n%s", gotJSON, wantJSON)
	}
	if got.Spec.Options.Helm != got.Spec.StagedOptions.Helm {
		t.Fatal("equal promoted options are shared")
	}
	if got.Spec.Options.Helm.Values.Data != nil || got.Spec.Options.Helm.Values.Compacted != `{"replicas":1}` {
		t.Fatalf("values are held as JSON: %+v", got.Spec.Options.Helm.Values)
	}
	// What the bundle controller renders compares equal once compacted the same way.
	next := deployment(1)
	next.ManagedFields = nil
	next.Spec.Options.CompactValues()
	next.Spec.StagedOptions.CompactValues()
	if !equality.Semantic.DeepEqual(got.Spec, next.Spec) {
		t.Fatal("a compacted rendering equals the cached deployment")
	}
	next.Spec.Options.Helm.Values = &fleet.GenericMap{Data: map[string]interface{}{"replicas": float64(2)}}
	next.Spec.Options.CompactValues()
	if equality.Semantic.DeepEqual(got.Spec, next.Spec) {
		t.Fatal("different values compare different")
	}

	held := deployment(3) // staged options not promoted yet
	held.Spec.StagedDeploymentID = "s-1:b"
	out, _ = slimDeployment(held)
	got = out.(*fleet.BundleDeployment)
	if got.Spec.Options.Helm == got.Spec.StagedOptions.Helm || got.Spec.Options.Helm.Values.Compacted != `{"replicas":1}` ||
		got.Spec.StagedOptions.Helm.Values.Compacted != `{"replicas":3}` {
		t.Fatal("options held back by a rollout stay apart")
	}
}

func TestSlimContent(t *testing.T) {
	c := &fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: "s-1"}, Content: []byte("gzip"), SHA256Sum: "1"}
	c.Status.ReferenceCount = 3
	out, _ := slimContent(c)
	got := out.(*fleet.Content)
	if got.Content != nil || got.SHA256Sum != "1" || got.Status.ReferenceCount != 3 {
		t.Fatalf("only the manifest is dropped: %+v", got)
	}
}
