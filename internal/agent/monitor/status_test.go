package monitor

import (
	"strings"
	"testing"

	"github.com/rancher/wrangler/v3/pkg/apply"
	"github.com/rancher/wrangler/v3/pkg/objectset"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

const unavailable = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: x, generation: 1}
status:
  observedGeneration: 1
  conditions:
  - {type: Available, status: "False", reason: MinimumReplicasUnavailable, message: "Deployment does not have minimum availability."}
  - {type: Progressing, status: "True", reason: ReplicaSetUpdated}
`

const customFailing = `apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: x}
status:
  conditions:
  - {type: Ready, status: "False", reason: Flaky, message: "upstream slow"}
`

func TestReadiness(t *testing.T) {
	cases := []struct {
		name   string
		obj    string
		ignore *fleet.IgnoreOptions
		ready  bool
	}{
		{"deployment without minimum availability", unavailable, nil, false},
		{"config map", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: x}\n", nil, true},
		{"failing condition", customFailing, nil, false},
		{"failing condition ignored", customFailing, &fleet.IgnoreOptions{Conditions: []map[string]string{{"type": "Ready", "status": "False"}}}, true},
		{"ignore rule that does not match", customFailing, &fleet.IgnoreOptions{Conditions: []map[string]string{{"type": "Ready", "status": "True"}}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Readiness(obj(t, c.obj), c.ignore).IsReady(); got != c.ready {
				t.Errorf("ready = %v, want %v", got, c.ready)
			}
		})
	}
}

func TestNormalizePatch(t *testing.T) {
	cases := map[string]string{
		`{"metadata":{"annotations":{"objectset.rio.cattle.io/applied":"H4sI"}}}`: "",
		`{"status":{"replicas":1}}`:               "",
		`{"metadata":{"creationTimestamp":null}}`: "",
		`{"data":{"a":"1"},"metadata":{"annotations":{"objectset.rio.cattle.io/applied":"x"}}}`: `{"data":{"a":"1"}}`,
		`{"metadata":{"annotations":{"team":"a","objectset.rio.cattle.io/id":"x"}}}`:            `{"metadata":{"annotations":{"team":"a"}}}`,
		`{"spec":{"replicas":3}}`: `{"spec":{"replicas":3}}`,
		// Strategic-merge directives that change no value are no drift (a chart setting only a
		// Deployment's strategy.type, while the apiserver defaulted rollingUpdate).
		`{"spec":{"strategy":{"$retainKeys":["type"]}}}`: "",
		`{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"}],"containers":[{"name":"web","$setElementOrder/env":[{"name":"A"}]}]}}}}`: "",
		`{"spec":{"$setElementOrder/ports":[{"port":80}],"ports":[{"port":80,"targetPort":8080}]}}`:                                                           `{"spec":{"ports":[{"port":80,"targetPort":8080}]}}`,
		`{"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}}`:                                                                                    `{"spec":{"strategy":{"type":"Recreate"}}}`,
		`{"spec":{"template":{"spec":{"containers":[{"$patch":"delete","name":"sidecar"}]}}}}`:                                                                `{"spec":{"template":{"spec":{"containers":[{"$patch":"delete","name":"sidecar"}]}}}}`,
		`{"spec":{"args":["a"]}}`: `{"spec":{"args":["a"]}}`,
	}
	for in, want := range cases {
		if got := NormalizePatch(in); got != want {
			t.Errorf("NormalizePatch(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestSummarize(t *testing.T) {
	cmGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	deployGVK := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	desired := []runtime.Object{
		obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: x}\n"),
		obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: patched, namespace: x}\n"),
		obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: missing, namespace: x}\n"),
		obj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: x}\n"),
	}
	plan := apply.Plan{
		Create: objectset.ObjectKeyByGVK{cmGVK: {{Namespace: "x", Name: "missing"}}},
		Delete: objectset.ObjectKeyByGVK{cmGVK: {{Namespace: "x", Name: "extra"}}},
		Update: apply.PatchByGVK{cmGVK: {
			{Namespace: "x", Name: "patched"}: `{"data":{"a":"1"}}`,
			{Namespace: "x", Name: "ok"}:      `{"metadata":{"annotations":{"objectset.rio.cattle.io/applied":"x"}}}`,
		}},
		Objects: []runtime.Object{
			obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: x}\n"),
			obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: patched, namespace: x}\n"),
			obj(t, unavailable),
		},
	}
	r := summarize(desired, plan, nil)
	if r.Ready {
		t.Error("ready with an unavailable Deployment")
	}
	if r.NonModified {
		t.Error("non-modified with a missing, an extra and a patched object")
	}
	if len(r.NonReady) != 1 || r.NonReady[0].Kind != deployGVK.Kind || r.NonReady[0].Name != "web" {
		t.Errorf("non-ready = %+v", r.NonReady)
	}
	if len(r.Modified) != 3 {
		t.Fatalf("modified = %+v", r.Modified)
	}
	want := fleet.ResourceCounts{Ready: 1, DesiredReady: 4, Modified: 1, Missing: 1, Orphaned: 1, NotReady: 1}
	if r.Counts != want {
		t.Errorf("counts = %+v, want %+v", r.Counts, want)
	}
	for _, m := range r.Modified {
		switch m.Name {
		case "missing":
			if !m.Create {
				t.Errorf("%s not reported missing", m.Name)
			}
		case "extra":
			if !m.Delete {
				t.Errorf("%s not reported extra", m.Name)
			}
		case "patched":
			if !m.Exist || m.Patch != `{"data":{"a":"1"}}` {
				t.Errorf("%s: %+v", m.Name, m)
			}
		default:
			t.Errorf("unexpected modified entry %+v", m)
		}
	}
}

func TestSummarizeBoundsLists(t *testing.T) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	plan := apply.Plan{Create: objectset.ObjectKeyByGVK{}}
	for i := 0; i < 25; i++ {
		plan.Create[gvk] = append(plan.Create[gvk], objectset.ObjectKey{Namespace: "x", Name: string(rune('a' + i))})
	}
	r := summarize(nil, plan, nil)
	if len(r.Modified) != 10 || !r.Incomplete {
		t.Errorf("got %d modified entries, incomplete=%v; want 10 and true", len(r.Modified), r.Incomplete)
	}
	if r.Counts.Missing != 25 {
		t.Errorf("missing count = %d, want 25", r.Counts.Missing)
	}
}

func TestComparePatchOps(t *testing.T) {
	ops := comparePatchOps(fleet.ComparePatch{
		Operations:   []fleet.Operation{{Op: "remove", Path: "/spec/replicas"}, {Op: "replace", Path: "/data/n", Value: `{"x":1}`}},
		JSONPointers: []string{"/metadata/labels"},
	})
	want := []string{
		`[{"op":"remove","path":"/spec/replicas"}]`,
		`[{"op":"replace","path":"/data/n","value":{"x":1}}]`,
		`[{"op":"remove","path":"/metadata/labels"}]`,
	}
	if len(ops) != len(want) {
		t.Fatalf("got %d patches, want %d", len(ops), len(want))
	}
	for i := range want {
		if string(ops[i]) != want[i] {
			t.Errorf("patch %d = %s, want %s", i, ops[i], want[i])
		}
	}
}

func TestNormalizeDesired(t *testing.T) {
	u := obj(t, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: v}
webhooks:
- name: a.example.com
  clientConfig: {caBundle: Zm9v, service: {name: s, namespace: x}}
status: {x: 1}
`)
	normalizeDesired(u)
	hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	cc := hooks[0].(map[string]any)["clientConfig"].(map[string]any)
	if _, ok := cc["caBundle"]; ok {
		t.Error("caBundle kept")
	}
	if _, ok := cc["service"]; !ok {
		t.Error("service dropped")
	}
	if _, ok := u.Object["status"]; ok {
		t.Error("status kept")
	}
}

// A Secret's drift names the keys that drifted, never their values; its stringData compares as
// the data the apiserver stores.
func TestSecretDriftHoldsNoValue(t *testing.T) {
	got := redactSecretPatch(`{"data":{"password":"Y2FuYXJ5"},"stringData":{"token":"canary"},"metadata":{"labels":{"a":"b"}}}`)
	if strings.Contains(got, "canary") || strings.Contains(got, "Y2FuYXJ5") || !strings.Contains(got, `"password":"(redacted)"`) || !strings.Contains(got, `"labels":{"a":"b"}`) {
		t.Errorf("redacted: %s", got)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"data": map[string]any{"a": "b25l"}, "stringData": map[string]any{"password": "canary"}}}
	normalizeDesired(u)
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	if _, has := u.Object["stringData"]; has || data["password"] != "Y2FuYXJ5" || data["a"] != "b25l" {
		t.Errorf("normalized: %v", u.Object)
	}
}
