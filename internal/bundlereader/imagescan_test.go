package bundlereader

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func readScans(t *testing.T, fleetYAML string) (Result, error) {
	t.Helper()
	return readScansWith(t, fleetYAML, Options{Name: "repo", Namespace: "ns"})
}

func readScansWith(t *testing.T, fleetYAML string, o Options) (Result, error) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"app/fleet.yaml": fleetYAML, "app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ReadAll(context.Background(), dir, []string{"app"}, o)
}

// A sharded GitRepo's ImageScans carry its shard label (as its Bundles do), so its shard handles
// them; other labels of the GitRepo stay on the Bundles.
func TestImageScansOfAShardedGitRepo(t *testing.T) {
	r, err := readScansWith(t, "imageScans:\n- image: reg.example/web\n",
		Options{Name: "repo", Namespace: "ns", Labels: map[string]string{fleet.ShardLabel: "shard-a", "team": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ImageScans) != 1 || len(r.Bundles) != 1 {
		t.Fatalf("%d scans, %d bundles", len(r.ImageScans), len(r.Bundles))
	}
	want := map[string]string{fleet.RepoLabel: "repo", fleet.ShardLabel: "shard-a"}
	if got := r.ImageScans[0].Labels; len(got) != len(want) || got[fleet.ShardLabel] != "shard-a" || got[fleet.RepoLabel] != "repo" {
		t.Errorf("scan labels %v, want %v", got, want)
	}
	if r.Bundles[0].Labels[fleet.ShardLabel] != "shard-a" {
		t.Errorf("bundle labels %v lack the shard", r.Bundles[0].Labels)
	}
	r, err = readScans(t, "imageScans:\n- image: reg.example/web\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.ImageScans[0].Labels[fleet.ShardLabel]; ok {
		t.Errorf("an unsharded GitRepo's scan has a shard label: %v", r.ImageScans[0].Labels)
	}
}

func TestImageScansOfFleetYAML(t *testing.T) {
	r, err := readScans(t, "imageScans:\n- name: web\n  image: reg.example/web\n  interval: 5m\n  policy:\n    alphabetical: {order: desc}\n- image: reg.example/api\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Bundles) != 1 || len(r.ImageScans) != 2 {
		t.Fatalf("%d bundles, %d scans", len(r.Bundles), len(r.ImageScans))
	}
	web, second := r.ImageScans[0], r.ImageScans[1]
	if web.Name != "repo-app-web" || web.Namespace != "ns" || web.Spec.GitRepoName != "repo" || web.Labels[fleet.RepoLabel] != "repo" {
		t.Errorf("scan %+v", web.ObjectMeta)
	}
	if web.Spec.TagName != "web" || web.Spec.Interval.Duration != 5*time.Minute || web.Spec.Policy.Alphabetical.Order != "desc" {
		t.Errorf("spec %+v", web.Spec)
	}
	if second.Name != "repo-app-1" || second.Spec.TagName != "1" {
		t.Errorf("an unnamed scan: %s tagName %q", second.Name, second.Spec.TagName)
	}
}

func TestImageScansRefused(t *testing.T) {
	for yaml, want := range map[string]string{
		"imageScans:\n- name: web\n":                                `key "imageScans[0].image"`,
		"imageScans:\n- image: reg.example/web\n  interval: soon\n": `key "imageScans[0].interval"`,
	} {
		if _, err := readScans(t, yaml); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %s", yaml, err, want)
		}
	}
}

// A GitRepo's imageScanInterval is the interval of the scans that set none.
func TestImageScanIntervalOfTheGitRepo(t *testing.T) {
	r, err := readScansWith(t, "imageScans:\n- name: own\n  image: reg.example/web\n  interval: 5m\n- name: default\n  image: reg.example/api\n",
		Options{Name: "repo", Namespace: "ns", ImageScanInterval: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if own, def := r.ImageScans[0].Spec.Interval.Duration, r.ImageScans[1].Spec.Interval.Duration; own != 5*time.Minute || def != 2*time.Hour {
		t.Errorf("intervals %s and %s, want 5m and 2h", own, def)
	}
}
