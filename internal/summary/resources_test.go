package summary

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestResourcesPerCluster(t *testing.T) {
	cm := fleet.BundleDeploymentResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: "cfg"}
	dep := fleet.BundleDeploymentResource{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web"}
	bd := func(applied bool, st fleet.BundleDeploymentStatus) *fleet.BundleDeployment {
		b := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: fleet.BundleDeploymentSpec{DeploymentID: "d1"}}
		b.Status = st
		if applied {
			b.Status.AppliedDeploymentID = "d1"
		}
		return b
	}
	got := Resources([]Deployment{
		{Cluster: "ns/a", BD: bd(true, fleet.BundleDeploymentStatus{Resources: []fleet.BundleDeploymentResource{cm, dep}})},
		{Cluster: "ns/b", BD: bd(true, fleet.BundleDeploymentStatus{Resources: []fleet.BundleDeploymentResource{cm, dep},
			NonReadyStatus: []fleet.NonReadyStatus{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web"}}})},
		{Cluster: "ns/c", BD: bd(false, fleet.BundleDeploymentStatus{Resources: []fleet.BundleDeploymentResource{cm}})},
		{Cluster: "ns/d", Offline: true, BD: bd(true, fleet.BundleDeploymentStatus{Resources: []fleet.BundleDeploymentResource{cm, dep}})},
	})
	if len(got) != 2 {
		t.Fatalf("want 2 resources, got %+v", got)
	}
	d, c := got[0], got[1] // sorted by type: apps.deployment, configmap
	if d.Type != "apps.deployment" || d.ID != "app/web" || d.State != "NotReady" || !d.Transitioning {
		t.Errorf("deployment: %+v", d)
	}
	if len(d.PerClusterState.Ready) != 1 || d.PerClusterState.NotReady[0] != "ns/b" || d.PerClusterState.Unknown[0] != "ns/d" {
		t.Errorf("deployment per cluster: %+v", d.PerClusterState)
	}
	if c.Type != "configmap" || c.State != "WaitApplied" || c.PerClusterState.WaitApplied[0] != "ns/c" || len(c.PerClusterState.Ready) != 2 {
		t.Errorf("configmap: %+v", c)
	}
}
