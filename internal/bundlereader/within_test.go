package bundlereader

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
)

// writeTreeAt writes files (path -> content) under root, and links (path -> target) as symlinks.
func writeTreeAt(t *testing.T, root string, files, links map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

// A chart `fleet apply` packages, with its file:// dependencies, and the paths a GitRepo scans
// carry nothing of the apply host from outside the checkout: a symlink that leaves it is refused
// and named; one that stays inside is copied as the file it points to.
func TestNothingFromOutsideTheCheckout(t *testing.T) {
	const chartYAML = "apiVersion: v2\nname: c\nversion: 1.0.0\n"
	tests := []struct {
		name      string
		fleetYAML string
		chartDeps string            // appended to repo/chart/Chart.yaml
		links     map[string]string // path under root -> target
		paths     []string          // the GitRepo's paths; default [app]
		want      []string          // substrings of the error; none: accepted
	}{
		{name: "a chart's template links to a host file", fleetYAML: "helm:\n  chart: ../chart\n",
			links: map[string]string{"repo/chart/templates/leak.yaml": "../../../secret.txt"},
			want:  []string{`"helm.chart"`, "symlink templates/leak.yaml", "outside the checkout"}},
		{name: "a chart's folder links out", fleetYAML: "helm:\n  chart: ../chart\n",
			links: map[string]string{"repo/chart/files": "/etc"},
			want:  []string{`"helm.chart"`, "symlink files (to /etc) leads outside the checkout"}},
		{name: "a chart's link that stays inside", fleetYAML: "helm:\n  chart: ../chart\n",
			links: map[string]string{"repo/chart/templates/shared.yaml": "../../shared/cm.yaml"}},
		{name: "a file:// dependency outside the checkout", fleetYAML: "helm:\n  chart: ../chart\n",
			chartDeps: "dependencies:\n- name: dep\n  version: 0.1.0\n  repository: file://../../dep\n",
			want:      []string{`"helm.chart"`, `dependency "dep"`, "not a folder inside the checkout"}},
		{name: "an absolute file:// dependency", fleetYAML: "helm:\n  chart: ../chart\n",
			chartDeps: "dependencies:\n- name: dep\n  version: 0.1.0\n  repository: file:///etc\n",
			want:      []string{`dependency "dep"`, "not a folder inside the checkout"}},
		{name: "a file:// dependency inside whose template links out", fleetYAML: "helm:\n  chart: ../chart\n",
			chartDeps: "dependencies:\n- name: dep\n  version: 0.1.0\n  repository: file://../innerdep\n",
			links:     map[string]string{"repo/innerdep/templates/leak.yaml": "../../../secret.txt"},
			want:      []string{`dependency "dep"`, "symlink templates/leak.yaml", "outside the checkout"}},
		{name: "a file:// dependency inside", fleetYAML: "helm:\n  chart: ../chart\n",
			chartDeps: "dependencies:\n- name: dep\n  version: 0.1.0\n  repository: file://../innerdep\n"},
		{name: "a bundle folder that is a chart links out", paths: []string{"chart"},
			links: map[string]string{"repo/chart/templates/leak.yaml": "../../../secret.txt"},
			want:  []string{`chart: key "helm.chart"`, "symlink templates/leak.yaml", "outside the checkout"}},
		{name: "fleet.yaml links out", links: map[string]string{"repo/linked/fleet.yaml": "../../secret.txt"}, paths: []string{"linked"},
			want: []string{"linked/fleet.yaml"}},
		{name: "a path climbs out", paths: []string{"../dep"}, want: []string{`path "../dep" leaves the checkout`}},
		{name: "a path links out", links: map[string]string{"repo/out": "../dep"}, paths: []string{"out"},
			want: []string{`path "out"`, "outside the checkout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			repo := filepath.Join(root, "repo")
			writeTreeAt(t, root, map[string]string{
				"secret.txt":                        "hunter2\n",
				"dep/Chart.yaml":                    "apiVersion: v2\nname: dep\nversion: 0.1.0\n",
				"repo/app/fleet.yaml":               tt.fleetYAML,
				"repo/shared/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\n",
				"repo/chart/Chart.yaml":             chartYAML + tt.chartDeps,
				"repo/chart/templates/cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
				"repo/innerdep/Chart.yaml":          "apiVersion: v2\nname: dep\nversion: 0.1.0\n",
				"repo/innerdep/templates/dep.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dep}\n",
				"repo/linked/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: l}\n",
				"repo/app/templates/placeholder.md": "",
			}, tt.links)
			paths := tt.paths
			if paths == nil {
				paths = []string{"app"}
			}
			bs, err := Read(repo, paths, Options{Name: "r", Namespace: "fleet-local"})
			checkReadOutcome(t, len(bs), err, tt.want)
		})
	}
}

// The packaged chart holds a link that stays inside as the file it points to, and a file://
// dependency with the repository string the checkout's Chart.yaml gives it.
func TestPackagedChartResolvesInsideLinks(t *testing.T) {
	root := t.TempDir()
	writeTreeAt(t, root, map[string]string{
		"shared/cm.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\n",
		"chart/Chart.yaml":           "apiVersion: v2\nname: c\nversion: 1.0.0\ndependencies:\n- name: dep\n  version: 0.1.0\n  repository: file://../dep\n",
		"dep/Chart.yaml":             "apiVersion: v2\nname: dep\nversion: 0.1.0\n",
		"dep/templates/dep.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dep}\n",
		"chart/templates/local.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\n",
	}, map[string]string{"chart/templates/shared.yaml": "../../shared/cm.yaml"})
	ec, err := packageLocalChart(context.Background(), root, filepath.Join(root, "chart"), true, ChartAuth{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := loader.LoadArchive(strings.NewReader(string(ec.Data)))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range c.Templates {
		if f.Name == "templates/shared.yaml" && strings.Contains(string(f.Data), "name: shared") {
			found = true
		}
	}
	if !found {
		t.Error("the linked template is missing from the package")
	}
	if len(c.Dependencies()) != 1 || c.Dependencies()[0].Name() != "dep" {
		t.Fatalf("dependencies %v", c.Dependencies())
	}
	if got := c.Metadata.Dependencies[0].Repository; got != "file://../dep" {
		t.Errorf("Chart.yaml names the dependency %q", got)
	}
	if c.Lock != nil && c.Lock.Dependencies[0].Repository != "file://../dep" {
		t.Errorf("Chart.lock names the dependency %q", c.Lock.Dependencies[0].Repository)
	}
}
