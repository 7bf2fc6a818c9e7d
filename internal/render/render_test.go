package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetgo/fleet/internal/bundlereader"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// bundles reads the fixture repository shared with bundlereader.
func bundles(t *testing.T) map[string]*fleet.Bundle {
	t.Helper()
	bs, err := bundlereader.Read("../bundlereader/testdata/apply", nil, bundlereader.Options{Name: "simple", Namespace: "fleet-local"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*fleet.Bundle{}
	for _, b := range bs {
		out[b.Name] = b
	}
	return out
}

func render(t *testing.T, b *fleet.Bundle, opts fleet.BundleDeploymentOptions) string {
	t.Helper()
	out, err := Manifests(b.Spec.Resources, &opts, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRawMultiDocumentManifests(t *testing.T) {
	b := bundles(t)["simple"]
	out := render(t, b, b.Spec.BundleDeploymentOptions)
	for _, want := range []string{"name: one", "name: two"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestHelmChartWithValues(t *testing.T) {
	b := bundles(t)["simple-helm-local"]
	out := render(t, b, b.Spec.BundleDeploymentOptions)
	// values-dev.yaml (replicas 5) wins over the inline replicas 2, as in Fleet.
	if !strings.Contains(out, `replicas: "5"`) {
		t.Errorf("values from fleet.yaml's values files must reach the chart:\n%s", out)
	}
	opts := b.Spec.BundleDeploymentOptions
	opts.Helm = opts.Helm.DeepCopy()
	opts.Helm.Values.Data["replicas"] = float64(7)
	if out := render(t, b, opts); !strings.Contains(out, `replicas: "7"`) {
		t.Errorf("per-target values:\n%s", out)
	}
}

func TestKustomizeWithoutHelm(t *testing.T) {
	b := bundles(t)["simple-kustomize"]
	out := render(t, b, b.Spec.BundleDeploymentOptions)
	if !strings.Contains(out, "name: dev-k") {
		t.Errorf("the dev overlay's namePrefix must apply:\n%s", out)
	}
}

func TestKustomizeWithHelm(t *testing.T) {
	files := []fleet.BundleResource{
		{Name: "chart/Chart.yaml", Content: "apiVersion: v2\nname: web\nversion: 0.1.0\n"},
		{Name: "chart/templates/cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  size: {{ .Values.size | quote }}\n"},
		{Name: "kust/kustomization.yaml", Content: "commonLabels:\n  team: blue\nnamePrefix: k-\n"},
	}
	opts := fleet.BundleDeploymentOptions{
		Kustomize: &fleet.KustomizeOptions{Dir: "kust"},
		Helm:      &fleet.HelmOptions{Chart: "chart", Values: &fleet.GenericMap{Data: map[string]any{"size": "xl"}}},
	}
	out, err := Manifests(files, &opts, "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: k-web", "team: blue", "size: xl"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestOverlays(t *testing.T) {
	b := bundles(t)["simple-overlays-app"]
	base := render(t, b, b.Spec.BundleDeploymentOptions)
	if !strings.Contains(base, "env: base") {
		t.Fatalf("base:\n%s", base)
	}
	opts := b.Spec.BundleDeploymentOptions
	opts.YAML = &fleet.YAMLOptions{Overlays: []string{"prod"}}
	if out := render(t, b, opts); !strings.Contains(out, "env: prod") || strings.Contains(out, "env: base") {
		t.Errorf("the prod overlay patches cm.yaml:\n%s", out)
	}

	files := Files{"a.yaml": []byte("kind: A\n"), "overlays/x/a.yaml": []byte("kind: Replaced\n"), "overlays/x/new.yaml": []byte("kind: New\n")}
	got, err := ApplyOverlays(files, &fleet.YAMLOptions{Overlays: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(got["a.yaml"]) != "kind: Replaced\n" || string(got["new.yaml"]) != "kind: New\n" {
		t.Errorf("replacement overlays: %v", got)
	}
	if _, err := ApplyOverlays(files, &fleet.YAMLOptions{Overlays: []string{"missing"}}); err == nil {
		t.Error("a missing overlay is an error")
	}
}

func TestEmbeddedChartArchive(t *testing.T) {
	// A chart fetched at apply time is carried as an archive under .chart/.
	b := bundles(t)["simple-helm-local"]
	files, err := FromResources(b.Spec.Resources)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := Chart(files, &b.Spec.BundleDeploymentOptions, "web")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "web" || len(c.Templates) != 1 {
		t.Fatalf("chart %s with %d templates", c.Name(), len(c.Templates))
	}
}

func TestRenderErrorsNameTheChart(t *testing.T) {
	files := []fleet.BundleResource{{Name: "bad.yaml", Content: "kind: ConfigMap\nname: {{ .Values.missing.deeper }}\n"}}
	_, err := Manifests(files, &fleet.BundleDeploymentOptions{}, "broken")
	if err == nil || !strings.Contains(err.Error(), "rendering chart broken") {
		t.Fatalf("err = %v", err)
	}
}

func TestBundleFolderThatIsAChart(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: folder-chart\nversion: 0.1.0\n",
		"values.yaml":              "color: grey\n",
		"dev.yaml":                 "color: green\n",
		"fleet.yaml":               "helm:\n  valuesFiles: [dev.yaml]\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: {{ .Values.color }}\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, "bundle", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := bundlereader.Read(dir, []string{"bundle"}, bundlereader.Options{Name: "r", Namespace: "fleet-local"})
	if err != nil {
		t.Fatal(err)
	}
	out := render(t, bs[0], bs[0].Spec.BundleDeploymentOptions)
	if !strings.Contains(out, "color: green") {
		t.Errorf("the folder's chart must render with the values file:\n%s", out)
	}
	if strings.Contains(out, "Chart.yaml") || strings.Contains(out, "values.yaml") {
		t.Errorf("Chart.yaml and values.yaml are the chart's, not manifests:\n%s", out)
	}
}
