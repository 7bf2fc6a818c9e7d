package target

import (
	"bytes"
	"strings"
	"testing"
)

// testdata/bundles.yaml is `fleet apply -o` of internal/bundlereader/testdata/apply/helm-local with
// the targets [{clusterGroup: default}].
func TestPlanFromFiles(t *testing.T) {
	var in Input
	for _, f := range []string{"testdata/bundles.yaml", "testdata/clusters.yaml"} {
		if err := ReadObjects(f, &in); err != nil {
			t.Fatal(err)
		}
	}
	if len(in.Bundles) != 1 || len(in.Clusters) != 2 || len(in.Groups) != 1 {
		t.Fatalf("read %d bundles, %d clusters, %d groups", len(in.Bundles), len(in.Clusters), len(in.Groups))
	}
	results, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	deps := results[0].Deployments
	if len(deps) != 2 {
		t.Fatalf("%d deployments", len(deps))
	}
	replicas := map[string]any{}
	for _, bd := range deps {
		replicas[bd.Labels["fleet.cattle.io/cluster"]] = bd.Spec.Options.Helm.Values.Data["replicas"]
		if bd.Spec.DeploymentID != bd.Spec.StagedDeploymentID || !strings.HasPrefix(bd.Spec.DeploymentID, results[0].Content+":") {
			t.Errorf("ids %s / %s", bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID)
		}
	}
	// c-prod is type=edge: the "edge" customization sets one replica.
	if replicas["c-prod"] != float64(1) || replicas["c-dev"] != float64(2) {
		t.Fatalf("replicas %v", replicas)
	}
	var out bytes.Buffer
	if err := Print(&out, results, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "targets 2 cluster(s): [fleet-local/c-dev fleet-local/c-prod]") {
		t.Fatalf("summary: %s", out.String())
	}
}
