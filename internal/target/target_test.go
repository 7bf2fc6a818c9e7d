package target

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func cluster(name string, labels map[string]string) *fleet.Cluster {
	return &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet-default", Labels: labels}}
}

func group(name string, labels, selector map[string]string) *fleet.ClusterGroup {
	return &fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet-default", Labels: labels},
		Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}},
	}
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func info(t *testing.T, c *fleet.Cluster, groups ...*fleet.ClusterGroup) ClusterInfo {
	t.Helper()
	gs, err := Groups(c, groups)
	if err != nil {
		t.Fatal(err)
	}
	return ClusterInfo{Cluster: c, Groups: gs}
}

func TestMatchTargetingForms(t *testing.T) {
	prod := cluster("c-prod", map[string]string{"env": "prod", "region": "eu"})
	dev := cluster("c-dev", map[string]string{"env": "dev", "region": "us"})
	groups := []*fleet.ClusterGroup{
		group("europe", map[string]string{"geo": "eu"}, map[string]string{"region": "eu"}),
		group("america", map[string]string{"geo": "us"}, map[string]string{"region": "us"}),
		// Groups of another namespace never contain these clusters.
		{ObjectMeta: metav1.ObjectMeta{Name: "europe", Namespace: "other"}, Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{}}},
	}
	tests := []struct {
		name     string
		target   fleet.BundleTarget
		wantProd bool
		wantDev  bool
	}{
		{"clusterName", fleet.BundleTarget{ClusterName: "c-dev"}, false, true},
		{"clusterSelector", fleet.BundleTarget{ClusterSelector: sel("env", "prod")}, true, false},
		{"empty selector matches all", fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{}}, true, true},
		{"matchExpressions", fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "region", Operator: metav1.LabelSelectorOpIn, Values: []string{"us", "asia"}}}}}, false, true},
		{"clusterGroup", fleet.BundleTarget{ClusterGroup: "europe"}, true, false},
		{"clusterGroupSelector", fleet.BundleTarget{ClusterGroupSelector: sel("geo", "us")}, false, true},
		{"criteria combine with AND", fleet.BundleTarget{ClusterGroup: "europe", ClusterSelector: sel("env", "dev")}, false, false},
		{"a target without criteria matches nothing", fleet.BundleTarget{Name: "only-a-name"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fleet.Bundle{Spec: fleet.BundleSpec{Targets: []fleet.BundleTarget{tt.target}}}
			for _, c := range []struct {
				c    *fleet.Cluster
				want bool
			}{{prod, tt.wantProd}, {dev, tt.wantDev}} {
				m, err := MatchCluster(b, info(t, c.c, groups...))
				if err != nil {
					t.Fatal(err)
				}
				if (m != nil) != c.want {
					t.Errorf("%s: matched=%v, want %v", c.c.Name, m != nil, c.want)
				}
			}
		})
	}
}

func TestRestrictionsCustomizationsAndDoNotDeploy(t *testing.T) {
	prod := cluster("c-prod", map[string]string{"env": "prod"})
	dev := cluster("c-dev", map[string]string{"env": "dev"})
	test := cluster("c-test", map[string]string{"env": "test"})
	b := &fleet.Bundle{Spec: fleet.BundleSpec{
		BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "base", Helm: &fleet.HelmOptions{
			Values: &fleet.GenericMap{Data: map[string]any{"replicas": float64(3), "image": map[string]any{"tag": "v1", "repo": "nginx"}}},
		}},
		Targets: []fleet.BundleTarget{
			{Name: "prod", ClusterSelector: sel("env", "prod"), BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"image": map[string]any{"tag": "v2"}}}}}},
			{Name: "everything", ClusterSelector: &metav1.LabelSelector{}, BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "all"}},
			{Name: "no-test", ClusterSelector: sel("env", "test"), DoNotDeploy: true},
		},
		// The GitRepo only allows prod and test clusters.
		TargetRestrictions: []fleet.BundleTargetRestriction{{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "test"}}}}}},
	}}

	m, err := MatchCluster(b, info(t, prod))
	if err != nil || m == nil {
		t.Fatalf("prod: %v %v", m, err)
	}
	if len(m.Targets) != 1 || m.Targets[0] != 0 || m.Options.DefaultNamespace != "base" {
		t.Fatalf("FirstMatch uses only the first target: %+v", m)
	}
	vals, _ := json.Marshal(m.Options.Helm.Values)
	if string(vals) != `{"image":{"repo":"nginx","tag":"v2"},"replicas":3}` {
		t.Fatalf("values merge key by key: %s", vals)
	}
	if b.Spec.Helm.Values.Data["image"].(map[string]any)["tag"] != "v1" {
		t.Fatal("matching must not modify the bundle")
	}
	if m, _ := MatchCluster(b, info(t, dev)); m != nil {
		t.Fatal("dev is outside the restrictions")
	}
	// test matches "everything" first, under FirstMatch: deployed.
	if m, _ := MatchCluster(b, info(t, test)); m == nil || m.Options.DefaultNamespace != "all" {
		t.Fatalf("test under FirstMatch: %+v", m)
	}

	b.Spec.TargetCustomizationMode = "AllMatches"
	m, _ = MatchCluster(b, info(t, prod))
	if len(m.Targets) != 2 || m.Options.DefaultNamespace != "all" || m.Options.Helm.Values.Data["image"].(map[string]any)["tag"] != "v2" {
		t.Fatalf("AllMatches merges every match in order: %+v", m)
	}
	if m, _ := MatchCluster(b, info(t, test)); m != nil {
		t.Fatal("under AllMatches the doNotDeploy target excludes test")
	}
}

func TestInvalidSelectorIsAnError(t *testing.T) {
	b := &fleet.Bundle{Spec: fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Equals"}}}}}}}
	_, err := MatchCluster(b, info(t, cluster("c", nil)))
	if err == nil || !strings.HasPrefix(err.Error(), "targets[0].clusterSelector") {
		t.Fatalf("err = %v", err)
	}
}

func TestMergeOptions(t *testing.T) {
	base := fleet.BundleDeploymentOptions{
		DefaultNamespace: "a", ServiceAccount: "sa", KeepResources: true,
		YAML:            &fleet.YAMLOptions{Overlays: []string{"one"}},
		NamespaceLabels: map[string]string{"x": "1", "y": "1"},
		Helm:            &fleet.HelmOptions{Chart: "./c", ReleaseName: "r", TimeoutSeconds: 10},
	}
	custom := fleet.BundleDeploymentOptions{
		DefaultNamespace: "b",
		YAML:             &fleet.YAMLOptions{Overlays: []string{"two"}},
		NamespaceLabels:  map[string]string{"y": "2"},
		Kustomize:        &fleet.KustomizeOptions{Dir: "overlays/dev"},
		Helm:             &fleet.HelmOptions{Version: "1.2.3", Atomic: true},
	}
	got := Merge(base, custom)
	if got.DefaultNamespace != "b" || got.ServiceAccount != "sa" || !got.KeepResources {
		t.Errorf("scalars: %+v", got)
	}
	if strings.Join(got.YAML.Overlays, ",") != "one,two" {
		t.Errorf("overlays %v", got.YAML.Overlays)
	}
	if got.NamespaceLabels["x"] != "1" || got.NamespaceLabels["y"] != "2" {
		t.Errorf("labels %v", got.NamespaceLabels)
	}
	if got.Kustomize.Dir != "overlays/dev" || got.Helm.Chart != "./c" || got.Helm.Version != "1.2.3" || !got.Helm.Atomic || got.Helm.TimeoutSeconds != 10 {
		t.Errorf("kustomize/helm: %+v %+v", got.Kustomize, got.Helm)
	}
	if len(base.YAML.Overlays) != 1 || base.NamespaceLabels["y"] != "1" {
		t.Error("Merge must not modify its inputs")
	}
}

func TestRenderValues(t *testing.T) {
	c := cluster("c-1", map[string]string{"env": "prod", "region": "eu"})
	c.Annotations = map[string]string{"owner": "team-a"}
	c.Spec.TemplateValues = &fleet.GenericMap{Data: map[string]any{"size": "large"}}
	opts := fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
		Values: &fleet.GenericMap{Data: map[string]any{
			"name":   "app-${ .ClusterName }",
			"env":    "${ .ClusterLabels.env | upper }",
			"owner":  "${ index .ClusterAnnotations \"owner\" }",
			"size":   "${ .ClusterValues.size }",
			"static": "plain",
			// Meant for the chart's own templating: Fleet leaves it alone.
			"chart": "{{ .Release.Name }}",
			// Fleet's older way to reach a label, at any depth.
			"nested": map[string]any{"region": "global.fleet.clusterLabels.region",
				"list": []any{"global.fleet.clusterLabels.env", "global.fleet.clusterLabels.absent"}},
		}},
		TemplateValues: map[string]string{"replicas": "${ if eq .ClusterLabels.env \"prod\" }3${ else }1${ end }"},
	}}
	if err := RenderValues(&opts, c); err != nil {
		t.Fatal(err)
	}
	v := opts.Helm.Values.Data
	want := map[string]any{"name": "app-c-1", "env": "PROD", "owner": "team-a", "size": "large", "static": "plain",
		"chart": "{{ .Release.Name }}", "replicas": float64(3)}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("%s = %#v, want %#v", k, v[k], w)
		}
	}
	nested := v["nested"].(map[string]any)
	if nested["region"] != "eu" || nested["list"].([]any)[0] != "prod" || nested["list"].([]any)[1] != "" {
		t.Errorf("global.fleet.clusterLabels references: %v", nested)
	}
	if _, ok := v["global"]; ok {
		t.Errorf("no values are added that the bundle did not have: %v", v["global"])
	}

	bad := []struct{ tmpl, want string }{
		{`${ env "HOME" }`, `function "env" not defined`},
		{`${ include "x" . }`, `function "include" not defined`},
		{`${ .ClusterLabels.missing.deeper }`, "helm.values"},
		{`${ .Nope }`, "helm.values"},
		{`${ if }`, "invalid template"},
	}
	for _, b := range bad {
		o := fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"x": b.tmpl}}}}
		if err := RenderValues(&o, c); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: err %v, want %q", b.tmpl, err, b.want)
		}
	}

	o := fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{DisablePreProcess: true, Values: &fleet.GenericMap{Data: map[string]any{"x": "${ .Values.y }"}}}}
	if err := RenderValues(&o, c); err != nil || o.Helm.Values.Data["x"] != "${ .Values.y }" {
		t.Errorf("disablePreProcess keeps templates as they are: %v %v", o.Helm.Values.Data["x"], err)
	}
}

func TestIDs(t *testing.T) {
	m1, _ := Manifest([]fleet.BundleResource{{Name: "a.yaml", Content: "x"}})
	m2, _ := Manifest([]fleet.BundleResource{{Name: "a.yaml", Content: "y"}})
	c1, c2 := ContentName(m1), ContentName(m2)
	if len(c1) != 63 || !strings.HasPrefix(c1, "s-") || c1 == c2 {
		t.Fatalf("content names %s %s", c1, c2)
	}
	opts := fleet.BundleDeploymentOptions{DefaultNamespace: "a"}
	id1, _ := DeploymentID(c1, opts)
	opts.CorrectDrift = &fleet.CorrectDrift{Enabled: true}
	opts.Diff = &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{{Kind: "x"}}}
	id2, _ := DeploymentID(c1, opts)
	opts.DefaultNamespace = "b"
	id3, _ := DeploymentID(c1, opts)
	if id1 != id2 {
		t.Error("diff and correctDrift must not change the deployment ID")
	}
	if id1 == id3 || !strings.HasPrefix(id1, c1+":") {
		t.Errorf("ids %s %s", id1, id3)
	}
}
