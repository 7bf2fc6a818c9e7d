package helmdeployer

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A release a Fleet agent made carries its BundleDeployment on the chart only; ours on the
// release labels (and the deploymentID on the chart).
func TestOwnerOfOursAndOfFleetsReleases(t *testing.T) {
	fleets := &release.Release{Name: "app", Namespace: "ns", Version: 1, Info: &release.Info{Status: release.StatusDeployed},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Annotations: map[string]string{fleet.BundleIDAnnotation: "repo-app", fleet.CommitAnnotation: "abc"}}}}
	if got := owner(fleets); got != "repo-app" {
		t.Errorf("owner of Fleet's release = %q, want repo-app", got)
	}
	r := fromHelm(fleets)
	if !r.MadeByFleet || r.BundleID != "repo-app" || r.DeploymentID != "" || r.String() != "ns/app:1" {
		t.Errorf("fromHelm(Fleet's release) = %+v", r)
	}

	ours := &release.Release{Name: "app", Namespace: "ns", Version: 2, Labels: map[string]string{BundleIDLabel: "repo-app"},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Annotations: map[string]string{fleet.BundleIDAnnotation: "repo-app", DeploymentIDAnnotation: "s-1:2"}}}}
	r = fromHelm(ours)
	if r.MadeByFleet || r.BundleID != "repo-app" || r.DeploymentID != "s-1:2" {
		t.Errorf("fromHelm(our release) = %+v", r)
	}

	// Adopted (labelled by this agent), it is still Fleet's revision.
	fleets.Labels = map[string]string{BundleIDLabel: "repo-app"}
	if r := fromHelm(fleets); !r.MadeByFleet || r.BundleID != "repo-app" {
		t.Errorf("fromHelm(Fleet's adopted release) = %+v", r)
	}

	someone := &release.Release{Name: "app", Namespace: "ns", Version: 1, Chart: &chart.Chart{Metadata: &chart.Metadata{}}}
	if got := owner(someone); got != "" {
		t.Errorf("owner of a release nobody of Fleet made = %q, want none", got)
	}
	if r := fromHelm(someone); r.MadeByFleet || r.BundleID != "" {
		t.Errorf("fromHelm(someone's release) = %+v", r)
	}
}
