package bundlereader

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Paths in fleet.yaml cannot reach outside the bundle folder (charts: outside the checkout),
// neither by their text nor through a symlink; the error names the file, key and path.
func TestPathsStayInside(t *testing.T) {
	tests := []struct {
		name      string
		fleetYAML string
		links     map[string]string // link (in app/) -> target
		want      []string          // substrings of the error; none: accepted
	}{
		{name: "valuesFiles up and out", fleetYAML: "helm:\n  valuesFiles: [../secret.yaml]\n",
			want: []string{"app/fleet.yaml", `"helm.valuesFiles[0]"`, `"../secret.yaml" is outside the bundle folder`}},
		{name: "valuesFiles absolute", fleetYAML: "helm:\n  valuesFiles: [ok.yaml, /etc/hostname]\n",
			want: []string{`"helm.valuesFiles[1]"`, `"/etc/hostname" is outside the bundle folder`}},
		{name: "valuesFiles through a symlink", fleetYAML: "helm:\n  valuesFiles: [link.yaml]\n", links: map[string]string{"link.yaml": "../secret.yaml"},
			want: []string{`"helm.valuesFiles[0]"`, `"link.yaml" reaches outside the bundle folder through a symlink`}},
		{name: "a targetCustomization's valuesFiles", fleetYAML: "targetCustomizations:\n- name: t\n  clusterSelector: {}\n  helm:\n    valuesFiles: [../secret.yaml]\n",
			want: []string{"app/fleet.yaml: targetCustomizations[0]", `"helm.valuesFiles[0]"`, "outside the bundle folder"}},
		{name: "kustomize.dir up and out", fleetYAML: "kustomize:\n  dir: ../other\n",
			want: []string{`"kustomize.dir"`, `"../other" is outside the bundle folder`}},
		{name: "kustomize.dir through a symlink", fleetYAML: "kustomize:\n  dir: linked\n", links: map[string]string{"linked": "../other"},
			want: []string{`"kustomize.dir"`, "through a symlink"}},
		{name: "an overlay up and out", fleetYAML: "yaml:\n  overlays: [../../other]\n",
			want: []string{`"yaml.overlays[0]"`, "outside the bundle folder"}},
		{name: "a chart outside the checkout", fleetYAML: "helm:\n  chart: ../../chart\n",
			want: []string{`"helm.chart"`, `"../../chart" is outside the checkout`}},
		{name: "a symlink that stays inside is fine", fleetYAML: "helm:\n  valuesFiles: [inner.yaml]\n", links: map[string]string{"inner.yaml": "ok.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			repo := filepath.Join(root, "repo")
			for name, data := range map[string]string{
				"repo/secret.yaml":              "password: hunter2\n",
				"repo/other/kustomization.yaml": "resources: []\n",
				"repo/app/cm.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
				"repo/app/ok.yaml":              "a: 1\n",
				"repo/app/fleet.yaml":           tt.fleetYAML,
				"chart/Chart.yaml":              "apiVersion: v2\nname: c\nversion: 1.0.0\n",
			} {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for link, target := range tt.links {
				if err := os.Symlink(target, filepath.Join(repo, "app", link)); err != nil {
					t.Fatal(err)
				}
			}
			bs, err := Read(repo, []string{"app"}, Options{Name: "r", Namespace: "fleet-local"})
			checkReadOutcome(t, len(bs), err, tt.want)
		})
	}
}

// checkReadOutcome accepts a read that made one bundle when want is empty; otherwise the
// read must fail with every want in its message and without the outside file's content.
func checkReadOutcome(t *testing.T, bundles int, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil || bundles != 1 {
			t.Fatalf("want accepted, got %d bundles, %v", bundles, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want an error, got %d bundles", bundles)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Error("the error shows the outside file's content")
	}
}
