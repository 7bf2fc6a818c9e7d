package bundle

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/target"
)

func TestRenderMemo(t *testing.T) {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b1", Generation: 1, Labels: map[string]string{fleet.CommitLabel: "c1"}},
		Spec: fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}}}
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "c1", Labels: map[string]string{"env": "a"}}}
	ci := target.ClusterInfo{Cluster: c}
	m := &target.Match{Targets: []int{0}}
	memo := newRenderMemo()
	render := func() *fleet.BundleDeployment {
		bd, err := memo.deployment(b, ci, m, "s-content")
		if err != nil {
			t.Fatal(err)
		}
		return bd
	}
	first := render()
	if render() != first {
		t.Fatal("unchanged inputs must reuse the rendering")
	}
	c.Status.Summary.Ready = 7 // status churn is not an input
	if render() != first {
		t.Fatal("cluster status is not an input")
	}
	c.Labels["env"] = "b"
	second := render()
	if second == first {
		t.Fatal("a label change re-renders")
	}
	b.Labels[fleet.CommitLabel] = "c2"
	if bd := render(); bd == second || bd.Labels[fleet.CommitLabel] != "c2" {
		t.Fatal("bundle labels reach the deployment")
	}
	b.Generation = 2
	third := render()
	b.Generation = 2
	if render() != third {
		t.Fatal("same generation reuses")
	}
	memo.forget(b)
	if render() == third {
		t.Fatal("forget drops the bundle's renderings")
	}
}
