package bundlereader

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"

func bundleNames(bs []*fleet.Bundle) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}

// A root without fleet.yaml and without manifests of its own, whose subfolder (no fleet.yaml)
// holds manifests, is one bundle holding them, as in Fleet; stderr says where they went.
func TestLooseSubfolderGoesIntoRootBundle(t *testing.T) {
	root := writeTree(t, map[string]string{
		"manifests/cm.yaml":      cm,
		"manifests/deep/cm.yaml": cm,
		"app/fleet.yaml":         "defaultNamespace: app\n",
		"app/cm.yaml":            cm,
		"README.md":              "docs\n",
	})
	var log bytes.Buffer
	bs, err := Read(root, nil, Options{Name: "repo", Namespace: "ns", Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if got := bundleNames(bs); !reflect.DeepEqual(got, []string{"repo", "repo-app"}) {
		t.Fatalf("bundles %v", got)
	}
	var res []string
	for _, r := range bs[0].Spec.Resources {
		res = append(res, r.Name)
	}
	if !reflect.DeepEqual(res, []string{"README.md", "manifests/cm.yaml", "manifests/deep/cm.yaml"}) {
		t.Fatalf("root resources %v", res)
	}
	for _, want := range []string{"folder manifests has no fleet.yaml: its manifests are part of bundle repo (folder .)",
		"folder manifests/deep has no fleet.yaml"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log %q lacks %q", log.String(), want)
		}
	}
	if strings.Contains(log.String(), "app") {
		t.Errorf("a bundle folder is not loose: %q", log.String())
	}
}

// fleet apply -b: another options file instead of fleet.yaml, part of the bundle's name.
func TestOptionsFileReplacesFleetYAML(t *testing.T) {
	root := writeTree(t, map[string]string{
		"a/dev.yaml":   "defaultNamespace: dev\n",
		"a/fleet.yaml": "defaultNamespace: ignored\n",
		"a/cm.yaml":    cm,
		"b/fleet.yaml": "defaultNamespace: b\n",
	})
	bs, err := Read(root, nil, Options{Name: "repo", Namespace: "ns", Scan: ScanOptions{OptionsFile: "dev.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || bs[0].Name != "repo-a-dev" || bs[0].Spec.DefaultNamespace != "dev" {
		t.Fatalf("bundles %+v", bundleNames(bs))
	}
}

// --driven-scan: each path is one bundle, "dir" or "dir:file"; nothing below is searched.
func TestDrivenScan(t *testing.T) {
	root := writeTree(t, map[string]string{
		"app/fleet.yaml":     "defaultNamespace: app\n",
		"app/prod.yaml":      "defaultNamespace: prod\n",
		"app/cm.yaml":        cm,
		"app/sub/fleet.yaml": "defaultNamespace: sub\n",
		"app/sub/cm.yaml":    cm,
	})
	bs, err := Read(root, []string{"app", "app:prod.yaml"}, Options{Name: "repo", Namespace: "ns", Scan: ScanOptions{Driven: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := bundleNames(bs); !reflect.DeepEqual(got, []string{"repo-app", "repo-app-prod"}) {
		t.Fatalf("bundles %v", got)
	}
	if bs[0].Spec.DefaultNamespace != "app" || bs[1].Spec.DefaultNamespace != "prod" {
		t.Fatalf("namespaces %q %q", bs[0].Spec.DefaultNamespace, bs[1].Spec.DefaultNamespace)
	}
	bs, err = Read(root, []string{"app#prod.yaml"}, Options{Name: "repo", Namespace: "ns", Scan: ScanOptions{Driven: true, DrivenSep: "#"}})
	if err != nil || len(bs) != 1 || bs[0].Name != "repo-app-prod" {
		t.Fatalf("separator #: %v %v", bundleNames(bs), err)
	}
	if _, err := Read(root, []string{"app:nope.yaml"}, Options{Name: "repo", Namespace: "ns", Scan: ScanOptions{Driven: true}}); err == nil ||
		!strings.Contains(err.Error(), "options file app/nope.yaml not found") {
		t.Fatalf("missing options file: %v", err)
	}
}

// -c gzips every resource; --sync-generation sets every bundle's forceSyncGeneration; bundles
// read concurrently come out as read one by one.
func TestCompressSyncGenerationAndConcurrency(t *testing.T) {
	files := map[string]string{}
	for _, d := range []string{"a", "b", "c", "d", "e", "f"} {
		files[d+"/fleet.yaml"] = "forceSyncGeneration: 1\n"
		files[d+"/cm.yaml"] = cm
	}
	root := writeTree(t, files)
	o := Options{Name: "repo", Namespace: "ns", Compress: true, SyncGeneration: 7, MaxConcurrency: 1}
	one, err := Read(root, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	o.MaxConcurrency = 4
	many, err := Read(root, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one, many) || len(many) != 6 {
		t.Fatal("concurrent reading changed the bundles")
	}
	for _, b := range many {
		if b.Spec.ForceSyncGeneration != 7 {
			t.Errorf("%s: forceSyncGeneration %d", b.Name, b.Spec.ForceSyncGeneration)
		}
		for _, r := range b.Spec.Resources {
			if r.Encoding != EncodingBase64Gzip {
				t.Errorf("%s/%s: encoding %q", b.Name, r.Name, r.Encoding)
			}
		}
	}
}
