package helmdeployer

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func deploymentObj(replicas int64, image string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": image}}}}},
	}}
}

// A field comparePatches ignore keeps the cluster's value on an upgrade unless the chart changed
// it; fields nobody ignores, and objects no patch names, are deployed as rendered.
func TestIgnoredFieldsKeepTheClustersValue(t *testing.T) {
	last := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n      - name: app\n        image: app:1\n"
	live := deploymentObj(5, "app:hotfix")
	reads := 0
	read := func(*unstructured.Unstructured) (*unstructured.Unstructured, error) { reads++; return live, nil }
	patches := []fleet.ComparePatch{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Namespace: "shop",
		JSONPointers: []string{"/spec/replicas"},
		Operations:   []fleet.Operation{{Op: "remove", Path: "/spec/template/spec/containers/0/image"}}}}
	f, err := newIgnoredFields(patches, last, "", "shop", read)
	if err != nil || f == nil {
		t.Fatalf("keeper %v, %v", f, err)
	}

	same := deploymentObj(1, "app:1")
	if err := f.keep(same); err != nil {
		t.Fatal(err)
	}
	if r, _ := lookup(same.Object, []string{"spec", "replicas"}); r != int64(5) {
		t.Errorf("unchanged by the chart: replicas %v, want the cluster's 5", r)
	}
	if img, _ := lookup(same.Object, []string{"spec", "template", "spec", "containers", "0", "image"}); img != "app:hotfix" {
		t.Errorf("unchanged by the chart: image %v, want the cluster's", img)
	}

	// The next upgrade: the last manifest now holds the kept value (5); what the chart rendered
	// (1) comes from the ledger's record, so the value is kept again.
	keptManifest := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n  template:\n    spec:\n      containers:\n      - name: app\n        image: app:hotfix\n"
	again, err := newIgnoredFields(patches, keptManifest, f.renderedJSON(), "shop", read)
	if err != nil {
		t.Fatal(err)
	}
	second := deploymentObj(1, "app:1")
	if err := again.keep(second); err != nil {
		t.Fatal(err)
	}
	if r, _ := lookup(second.Object, []string{"spec", "replicas"}); r != int64(5) {
		t.Errorf("second forced upgrade: replicas %v, want the cluster's 5", r)
	}
	bumped := deploymentObj(3, "app:1")
	if err := again.keep(bumped); err != nil {
		t.Fatal(err)
	}
	if r, _ := lookup(bumped.Object, []string{"spec", "replicas"}); r != int64(3) {
		t.Errorf("after a kept upgrade, the chart's change: replicas %v, want 3", r)
	}

	changed := deploymentObj(3, "app:2")
	if err := f.keep(changed); err != nil {
		t.Fatal(err)
	}
	if r, _ := lookup(changed.Object, []string{"spec", "replicas"}); r != int64(3) {
		t.Errorf("changed by the chart: replicas %v, want 3", r)
	}
	if img, _ := lookup(changed.Object, []string{"spec", "template", "spec", "containers", "0", "image"}); img != "app:2" {
		t.Errorf("changed by the chart: image %v, want app:2", img)
	}

	other := deploymentObj(1, "app:1")
	other.SetName("api")
	before := reads
	if err := f.keep(other); err != nil {
		t.Fatal(err)
	}
	if r, _ := lookup(other.Object, []string{"spec", "replicas"}); r != int64(1) || reads != before {
		t.Errorf("an object no patch names: replicas %v, %d reads", r, reads-before)
	}
	elsewhere, _ := newIgnoredFields(patches, last, "", "other-ns", read)
	inOther := deploymentObj(1, "app:1")
	if err := elsewhere.keep(inOther); err != nil {
		t.Fatal(err)
	}
	if r, _ := lookup(inOther.Object, []string{"spec", "replicas"}); r != int64(1) {
		t.Errorf("a patch for namespace shop applied in other-ns: replicas %v", r)
	}

	if f, _ := newIgnoredFields([]fleet.ComparePatch{{Kind: "ConfigMap", Name: "x", Operations: []fleet.Operation{{Op: "ignore"}}}}, last, "", "shop", read); f != nil {
		t.Error("a patch ignoring whole objects keeps no fields")
	}
}

func TestPointerTokens(t *testing.T) {
	got, ok := pointerTokens("/metadata/annotations/example.com~1owner~0x")
	if !ok || len(got) != 3 || got[2] != "example.com/owner~x" {
		t.Errorf("tokens %q", got)
	}
	if _, ok := pointerTokens(""); ok {
		t.Error("the whole document is not a field")
	}
}
