package bundlereader

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func readFixture(t *testing.T) map[string]*fleet.Bundle {
	t.Helper()
	targets, restrictions := FromGitTargets([]fleet.GitTarget{{Name: "dev", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}})
	bundles, err := Read("testdata/apply", nil, Options{
		Name: "simple", Namespace: "fleet-default", Commit: "abc123",
		Labels:  map[string]string{"team": "a"},
		Targets: targets, TargetRestrictions: restrictions,
		ServiceAccount: "deployer",
	})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*fleet.Bundle{}
	for _, b := range bundles {
		byName[b.Name] = b
	}
	return byName
}

func resourceNames(b *fleet.Bundle) []string {
	var out []string
	for _, r := range b.Spec.Resources {
		out = append(out, r.Name)
	}
	return out
}

func TestReadBundleNamesAndLabels(t *testing.T) {
	byName := readFixture(t)
	var got []string
	for n := range byName {
		got = append(got, n)
	}
	want := []string{"custom-name", "simple", "simple-app", "simple-app-child", "simple-helm-local", "simple-kustomize", "simple-overlays-app"}
	if !sameSet(got, want) {
		t.Fatalf("bundles %v, want %v", got, want)
	}
	b := byName["simple-helm-local"]
	wantLabels := map[string]string{fleet.RepoLabel: "simple", fleet.CommitLabel: "abc123", "team": "a"}
	if !reflect.DeepEqual(b.Labels, wantLabels) {
		t.Fatalf("labels %v", b.Labels)
	}
	if byName["custom-name"].Labels["tier"] != "backend" {
		t.Fatalf("fleet.yaml labels are kept: %v", byName["custom-name"].Labels)
	}
	if b.Namespace != "fleet-default" || b.Spec.ServiceAccount != "deployer" {
		t.Fatalf("namespace %q, serviceAccount %q", b.Namespace, b.Spec.ServiceAccount)
	}
}

func TestReadResources(t *testing.T) {
	byName := readFixture(t)
	tests := map[string][]string{
		// The root takes its loose manifests, not the bundle folders below it.
		"simple":              {"cm.yaml"},
		"simple-helm-local":   {"chart/Chart.yaml", "chart/templates/deploy.yaml"},
		"simple-kustomize":    {"base/cm.yaml", "base/kustomization.yaml", "overlays/dev/kustomization.yaml"},
		"simple-overlays-app": {"cm.yaml", "overlays/prod/cm_patch.yaml"},
		"simple-app":          {"a.yaml"},
		"simple-app-child":    {"b.yaml"},
	}
	for name, want := range tests {
		if got := resourceNames(byName[name]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s resources %v, want %v", name, got, want)
		}
	}
	// Multi-document YAML stays one file, byte for byte.
	data, _ := os.ReadFile("testdata/apply/cm.yaml")
	if byName["simple"].Spec.Resources[0].Content != string(data) {
		t.Error("cm.yaml content changed")
	}
}

func TestReadHelmValuesAndTargets(t *testing.T) {
	b := readFixture(t)["simple-helm-local"]
	h := b.Spec.Helm
	if h.Chart != "./chart" || h.ReleaseName != "web" || len(h.ValuesFiles) != 0 {
		t.Fatalf("helm %+v", h)
	}
	got, _ := json.Marshal(h.Values)
	// As in Fleet: values files win over inline values, later files over earlier ones.
	want := `{"env":"extra","image":{"repository":"nginx","tag":"dev"},"replicas":5}`
	if string(got) != want {
		t.Fatalf("values %s, want %s", got, want)
	}
	if b.Spec.DefaultNamespace != "web" {
		t.Fatalf("defaultNamespace %q", b.Spec.DefaultNamespace)
	}
	var targetNames []string
	for _, tg := range b.Spec.Targets {
		targetNames = append(targetNames, tg.Name)
	}
	// targetCustomizations first, then the GitRepo's targets.
	if !reflect.DeepEqual(targetNames, []string{"edge", "never", "dev"}) {
		t.Fatalf("targets %v", targetNames)
	}
	if !b.Spec.Targets[1].DoNotDeploy || b.Spec.Targets[0].Helm.Values.Data["replicas"] != float64(1) {
		t.Fatalf("customizations %+v", b.Spec.Targets[:2])
	}
	if len(b.Spec.TargetRestrictions) != 1 || b.Spec.TargetRestrictions[0].Name != "dev" ||
		b.Spec.TargetRestrictions[0].ClusterSelector.MatchLabels["env"] != "dev" {
		t.Fatalf("restrictions %+v", b.Spec.TargetRestrictions)
	}
}

func TestReadOtherOptions(t *testing.T) {
	byName := readFixture(t)
	n := byName["custom-name"]
	if len(n.Spec.DependsOn) != 2 || n.Spec.DependsOn[1].AcceptedStates[1] != fleet.Modified || !n.Spec.KeepResources {
		t.Fatalf("spec %+v", n.Spec)
	}
	if n.Spec.RolloutStrategy.MaxUnavailable.String() != "10%" || n.Spec.RolloutStrategy.Partitions[0].ClusterName != "c1" {
		t.Fatalf("rollout %+v", n.Spec.RolloutStrategy)
	}
	if byName["simple-kustomize"].Spec.Kustomize.Dir != "overlays/dev" {
		t.Fatal("kustomize.dir")
	}
	if byName["simple-overlays-app"].Spec.Targets[0].YAML.Overlays[0] != "prod" {
		t.Fatal("per-target overlays")
	}
}

func TestReadBadInput(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"malformed YAML", map[string]string{"fleet.yaml": "helm:\n  chart: x\n values: {}\n"}, "fleet.yaml:2: malformed YAML"},
		{"unknown key", map[string]string{"fleet.yaml": "defaultNamespace: a\nhelmm: {}\n"}, `fleet.yaml:2: key "helmm": unknown key`},
		{"unknown nested key", map[string]string{"fleet.yaml": "helm:\n  chart: ./c\n  valuez: {}\n"}, `fleet.yaml:3: key "valuez": unknown key`},
		{"invalid value type", map[string]string{"fleet.yaml": "helm:\n  timeoutSeconds: soon\n"}, `fleet.yaml:2: key "helm.timeoutSeconds": invalid value`},
		{"invalid values file", map[string]string{"fleet.yaml": "helm:\n  valuesFiles: [v.yaml]\n", "v.yaml": "a: [\n", "Chart.yaml": chartYAML}, `key "helm.valuesFiles[0]": values file "v.yaml" is not valid YAML`},
		{"SOPS values file", map[string]string{"fleet.yaml": "helm:\n  valuesFiles: [v.yaml]\n", "Chart.yaml": chartYAML,
			"v.yaml": "password: ENC[AES256_GCM,data:eA==,iv:eA==,tag:eA==,type:str]\nsops:\n  version: 3.9.0\n  mac: ENC[AES256_GCM,data:eA==]\n"},
			`key "helm.valuesFiles[0]": values file "v.yaml" is SOPS-encrypted`},
		{"missing values file", map[string]string{"fleet.yaml": "helm:\n  valuesFiles: [nope.yaml]\n", "Chart.yaml": chartYAML}, `values file "nope.yaml" not found`},
		{"missing chart", map[string]string{"fleet.yaml": "helm:\n  chart: ./nochart\n"}, `key "helm.chart": chart folder "./nochart"`},
		{"depends on itself", map[string]string{"fleet.yaml": "name: me\ndependsOn:\n- name: me\n"}, `key "dependsOn[0].name": bundle "me" cannot depend on itself`},
		{"selects itself", map[string]string{"fleet.yaml": "labels: {a: b}\ndependsOn:\n- selector: {matchLabels: {a: b}}\n"}, `key "dependsOn[0].selector": selects bundle`},
		{"bad state", map[string]string{"fleet.yaml": "dependsOn:\n- name: x\n  acceptedStates: [Sleeping]\n"}, `"Sleeping" is not a bundle state`},
		{"long release name", map[string]string{"fleet.yaml": "helm:\n  releaseName: " + strings.Repeat("a", 54) + "\n"}, `key "helm.releaseName"`},
		{"release name with an empty label", map[string]string{"fleet.yaml": "helm:\n  releaseName: my..app\n"}, `key "helm.releaseName"`},
		{"bad operator", map[string]string{"fleet.yaml": "targetCustomizations:\n- clusterSelector:\n    matchExpressions: [{key: a, operator: Equals}]\n"}, `key "targetCustomizations[0].clusterSelector": invalid label selector`},
		{"missing overlay", map[string]string{"fleet.yaml": "yaml:\n  overlays: [prod]\n"}, `overlay "prod" not found`},
		{"misspelt key", map[string]string{"fleet.yaml": "defaultNamespce: a\n"}, `fleet.yaml:1: key "defaultNamespce": unknown key (did you mean defaultNamespace?)`},
		{"chart without version", map[string]string{"fleet.yaml": "", "Chart.yaml": "apiVersion: v2\nname: c\n", "templates/cm.yaml": "kind: ConfigMap\n"}, `Chart.yaml: the bundle folder is a chart Helm cannot load: validation: chart.metadata.version is required`},
		{"unparsable Chart.yaml", map[string]string{"fleet.yaml": "", "Chart.yaml": "name: [c\n"}, `Chart.yaml:1: malformed YAML: this "[" is never closed`},
		{"unparsable chart values", map[string]string{"fleet.yaml": "", "Chart.yaml": chartYAML, "values.yaml": "x: 1\na: {b\n"}, `values.yaml:2: malformed YAML: this "{" is never closed`},
		{"unclosed brace in fleet.yaml", map[string]string{"fleet.yaml": "helm:\n  values: {a: 1,\n    b: 2\n\ndefaultNamespace: x\n"}, `fleet.yaml:2: malformed YAML: this "{" is never closed`},
		{"unclosed brace in a manifest", map[string]string{"fleet.yaml": "", "cm.yaml": "kind: ConfigMap\nmetadata: {name: a\ndata:\n  x: y\n"}, `cm.yaml:2: malformed YAML: this "{" is never closed`},
		{"targetRestrictions in fleet.yaml", map[string]string{"fleet.yaml": "targetRestrictions:\n- clusterName: a\n"}, `key "targetRestrictions": not allowed in fleet.yaml`},
		{"bad target selector", map[string]string{"fleet.yaml": "targets:\n- clusterSelector:\n    matchExpressions: [{key: a, operator: Equals}]\n"}, `key "targets[0].clusterSelector": invalid label selector`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			// A good bundle beside the bad one: nothing may be returned for it either.
			tt.files["good/fleet.yaml"] = "defaultNamespace: good\n"
			tt.files["good/cm.yaml"] = "kind: ConfigMap\n"
			for n, c := range tt.files {
				p := filepath.Join(root, "bad", n)
				if strings.HasPrefix(n, "good/") {
					p = filepath.Join(root, n)
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			bundles, err := Read(root, nil, Options{Name: "r", Namespace: "ns"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want error containing %q, got %v", tt.want, err)
			}
			if bundles != nil {
				t.Fatalf("nothing may be returned on error, got %d bundles", len(bundles))
			}
			var ie *InputError
			if !errors.As(err, &ie) || !strings.HasPrefix(ie.File, "bad/") {
				t.Fatalf("the error must name the file under bad/: %#v", err)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

// chartYAML makes a bundle folder a chart.
const chartYAML = "apiVersion: v2\nname: c\nversion: 1.0.0\n"

// Without a chart there is nothing for values: Fleet ignores valuesFiles there, and so do we.
func TestValuesFilesIgnoredWithoutAChart(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"fleet.yaml": "helm:\n  values: {a: 1}\n  valuesFiles: [nope.yaml, v.yaml]\n",
		"v.yaml": "a: 2\n", "cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := Read(dir, []string{"."}, Options{Name: "raw", Namespace: "ns"})
	if err != nil || len(bs) != 1 {
		t.Fatalf("%d bundles, %v", len(bs), err)
	}
	if got := bs[0].Spec.Helm.Values.Data["a"]; got != float64(1) {
		t.Errorf("values a = %v, want the inline 1", got)
	}
}

// Fleet takes targets: in fleet.yaml, and with no targets anywhere a bundle goes to the
// namespace's ClusterGroup "default".
func TestFleetYAMLTargetsAndDefaultGroup(t *testing.T) {
	root := t.TempDir()
	for name, data := range map[string]string{
		"own/fleet.yaml":  "targets:\n- name: east\n  clusterSelector: {matchLabels: {region: east}}\ntargetCustomizations:\n- name: tc\n  clusterName: c1\n",
		"own/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"none/fleet.yaml": "defaultNamespace: x\n",
		"none/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := Read(root, []string{"own", "none"}, Options{Name: "r", Namespace: "ns"})
	if err != nil || len(bs) != 2 {
		t.Fatalf("%d bundles, %v", len(bs), err)
	}
	by := map[string]*fleet.Bundle{}
	for _, b := range bs {
		by[b.Name] = b
	}
	own := by["r-own"]
	if own == nil || len(own.Spec.Targets) != 2 || own.Spec.Targets[0].Name != "east" ||
		own.Spec.Targets[0].ClusterSelector.MatchLabels["region"] != "east" || own.Spec.Targets[1].Name != "tc" {
		t.Fatalf("own targets %+v", own)
	}
	none := by["r-none"]
	if none == nil || !reflect.DeepEqual(none.Spec.Targets, []fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}}) {
		t.Fatalf("none targets %+v", none)
	}

	// The targets file's targets and targetRestrictions (the GitRepo's) both reach the bundle.
	targets := []fleet.BundleTarget{{Name: "t", ClusterGroup: "g"}}
	restrictions := []fleet.BundleTargetRestriction{{Name: "r", ClusterGroup: "g"}}
	bs, err = Read(root, []string{"none"}, Options{Name: "r", Namespace: "ns", Targets: targets, TargetRestrictions: restrictions})
	if err != nil || len(bs) != 1 {
		t.Fatalf("%d bundles, %v", len(bs), err)
	}
	if s := bs[0].Spec; len(s.Targets) != 1 || s.Targets[0].ClusterGroup != "g" || len(s.TargetRestrictions) != 1 || s.TargetRestrictions[0].Name != "r" {
		t.Fatalf("spec targets %+v restrictions %+v", s.Targets, s.TargetRestrictions)
	}
}

// Fleet's imageScans name their registry Secret as an object, {name: ...}.
func TestImageScanSecretRefObject(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"fleet.yaml": "imageScans:\n- image: reg.example/app\n  tagName: app\n  interval: 5m\n  secretRef:\n    name: regcred\n  policy:\n    semver: {range: '>=1.0.0'}\n",
		"cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Read(dir, []string{"."}, Options{Name: "scan", Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
}

// Release names follow Helm's rule, as on Fleet: DNS labels joined by dots.
func TestReleaseNameWithDots(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"app/fleet.yaml": "helm:\n  releaseName: my.app-v2\n", "app/cm.yaml": "kind: ConfigMap\n"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := Read(dir, []string{"app"}, Options{Name: "r", Namespace: "fleet-local"})
	if err != nil || len(bs) != 1 || bs[0].Spec.Helm.ReleaseName != "my.app-v2" {
		t.Fatalf("got %v, %v", bs, err)
	}
}
