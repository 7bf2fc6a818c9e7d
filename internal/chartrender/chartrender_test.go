package chartrender

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/releaseutil"

	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/version"
)

// kinds counts the kinds of the manifest's objects.
func kinds(t *testing.T, manifest string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var obj struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if obj.Kind != "" {
			out[obj.Kind]++
		}
	}
	return out
}

func TestControllerManifest(t *testing.T) {
	out, err := Controller(ControllerOptions{ControllerImage: "registry.local:5000/fleet:v9", SystemNamespace: "fleet-sys"})
	if err != nil {
		t.Fatal(err)
	}
	k := kinds(t, out)
	if k["CustomResourceDefinition"] < 10 || k["Deployment"] != 1 || k["Namespace"] != 1 || k["ClusterRole"] != 1 || k["ConfigMap"] != 2 {
		t.Fatalf("kinds: %v", k)
	}
	for _, want := range []string{"image: registry.local:5000/fleet:v9", "namespace: fleet-sys", "- --namespace=fleet-sys"} {
		if !strings.Contains(out, want) {
			t.Errorf("manifest lacks %q", want)
		}
	}
	crds, err := Controller(ControllerOptions{CRDsOnly: true, SystemNamespace: "fleet-sys"})
	if err != nil {
		t.Fatal(err)
	}
	// The CRD chart also holds the admission policies that keep agents to status.agent,
	// registrations to the token they came with, named Secrets to ones their writer may read, and
	// claims on a GitRepo or HelmOp to its owner.
	if k := kinds(t, crds); len(k) != 3 || k["CustomResourceDefinition"] < 10 || k["ValidatingAdmissionPolicy"] != 5 || k["ValidatingAdmissionPolicyBinding"] != 5 {
		t.Fatalf("--crds-only kinds: %v", k)
	}
}

func TestAgentConfigManifest(t *testing.T) {
	out, err := AgentConfig(AgentConfigOptions{Labels: map[string]string{"env": "dev"}, SystemNamespace: "cattle-fleet-system"})
	if err != nil {
		t.Fatal(err)
	}
	if k := kinds(t, out); k["ConfigMap"] != 1 || k["Deployment"] != 0 || k["Secret"] != 0 {
		t.Fatalf("kinds: %v", k)
	}
	if !strings.Contains(out, `{"clientID":"","labels":{"env":"dev"}}`) {
		t.Fatalf("config:\n%s", out)
	}
}

func TestSetImage(t *testing.T) {
	for in, want := range map[string][2]string{
		"fleet":                  {"fleet", ""},
		"reg:5000/fleet":         {"reg:5000/fleet", ""},
		"reg:5000/team/fleet:v2": {"reg:5000/team/fleet", "v2"},
	} {
		v := map[string]any{}
		if err := SetImage(v, "image", in); err != nil {
			t.Fatal(err)
		}
		got := v["image"].(map[string]any)
		if got["repository"] != want[0] || got["tag"] != want[1] {
			t.Errorf("%s: got %v, want %v", in, got, want)
		}
	}
}

// A released binary's manifests default to its own image tag, the appVersion `make charts`
// stamps into the packaged charts.
func TestDefaultImageTagIsTheBinaryVersion(t *testing.T) {
	old := version.Version
	version.Version = "v9.8.7"
	t.Cleanup(func() { version.Version = old })
	out, err := Controller(ControllerOptions{SystemNamespace: "fleet-sys"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"image: ghcr.io/fleetgo/fleet:v9.8.7", "--agent-image=ghcr.io/fleetgo/fleet:v9.8.7"} {
		if !strings.Contains(out, want) {
			t.Errorf("manifest lacks %q", want)
		}
	}
}
