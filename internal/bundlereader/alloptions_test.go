package bundlereader

import (
	"testing"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestEveryFleetYAMLOption(t *testing.T) {
	targets, restrictions := FromGitTargets([]fleet.GitTarget{{Name: "from-gitrepo", ClusterGroup: "default"}})
	bundles, err := Read("testdata/alloptions", nil, Options{Name: "repo", Namespace: "ns",
		Targets: targets, TargetRestrictions: restrictions})
	if err != nil {
		t.Fatal(err)
	}
	if len(bundles) != 1 {
		t.Fatalf("%d bundles", len(bundles))
	}
	b := bundles[0]
	s := b.Spec
	h := s.Helm
	checks := map[string]bool{
		"name":                     b.Name == "all-options",
		"labels":                   b.Labels["app"] == "all",
		"defaultNamespace":         s.DefaultNamespace == "all-default",
		"namespace":                s.TargetNamespace == "all-forced",
		"serviceAccount":           s.ServiceAccount == "deployer",
		"keepResources":            s.KeepResources,
		"deleteNamespace":          s.DeleteNamespace,
		"deleteCRDResources":       s.DeleteCRDResources,
		"createNamespace":          s.CreateNamespace != nil && *s.CreateNamespace,
		"paused":                   s.Paused,
		"forceSyncGeneration":      s.ForceSyncGeneration == 3,
		"namespaceLabels":          s.NamespaceLabels["team"] == "a",
		"namespaceAnnotations":     s.NamespaceAnnotations["note"] == "b",
		"allowedTargetNamespaces":  s.AllowedTargetNamespaceSelector.MatchLabels["allowed"] == "true",
		"correctDrift":             s.CorrectDrift.Enabled && s.CorrectDrift.Force && s.CorrectDrift.KeepFailHistory,
		"helm.chart":               h.Chart == "./chart",
		"helm.releaseName":         h.ReleaseName == "all-release",
		"helm.values":              h.Values.Data["a"] == float64(1),
		"helm.valuesFrom":          len(h.ValuesFrom) == 2 && h.ValuesFrom[1].SecretKeyRef.Name == "s",
		"helm.templateValues":      h.TemplateValues["cluster"] == "${ .ClusterName }",
		"helm flags":               h.TakeOwnership && h.Force && h.Atomic && h.WaitForJobs && h.SkipSchemaValidation && h.DisableDNS && h.DisableDependencyUpdate,
		"helm.timeoutSeconds":      h.TimeoutSeconds == 60,
		"helm.maxHistory":          h.MaxHistory == 5,
		"kustomize.dir":            s.Kustomize.Dir == "kust",
		"diff.comparePatches":      len(s.Diff.ComparePatches) == 1 && s.Diff.ComparePatches[0].Operations[0].Op == "remove" && s.Diff.ComparePatches[0].JSONPointers[0] != "",
		"ignore.conditions":        s.IgnoreOptions.Conditions[0]["type"] == "Progressing",
		"downstreamResources":      s.DownstreamResources[0].Kind == "Secret",
		"dependsOn":                s.DependsOn[0].Name == "other-bundle" && len(s.DependsOn[0].AcceptedStates) == 2,
		"rolloutStrategy":          s.RolloutStrategy.MaxUnavailable.IntValue() == 1 && s.RolloutStrategy.MaxUnavailablePartitions.String() == "10%" && *s.RolloutStrategy.MaxNew == 20 && s.RolloutStrategy.Partitions[0].Name == "canary",
		"targetCustomizationMode":  s.TargetCustomizationMode == "AllMatches",
		"targetCustomizations":     s.Targets[0].Name == "edge" && s.Targets[0].YAML.Overlays[0] == "edge" && s.Targets[1].DoNotDeploy,
		"overrideTargets replace":  len(s.Targets) == 3 && s.Targets[2].Name == "only-prod",
		"overrideTargets restrict": len(s.TargetRestrictions) == 1 && s.TargetRestrictions[0].Name == "only-prod",
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("option %s did not reach the bundle", name)
		}
	}
}
