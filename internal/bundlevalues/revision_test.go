package bundlevalues

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func revision(name string, replicas int) *fleet.RolloutRevision {
	return &fleet.RolloutRevision{Revision: name, Content: "s-" + name,
		Options: fleet.BundleDeploymentOptions{Helm: values(map[string]any{"replicas": replicas})},
		Targets: []fleet.BundleTarget{{Name: "prod", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: values(map[string]any{"tier": "gold"})}}}}
}

// Two revisions (a Rollout's current and passed) in one Secret: each comes back with its own
// values, none is readable from the revision, and values that do not match are refused.
func TestRevisionValuesRoundTrip(t *testing.T) {
	a, b := revision("a", 1), revision("b", 2)
	da, err := TakeFromRevision(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := TakeFromRevision(b)
	if err != nil {
		t.Fatal(err)
	}
	if a.Options.Helm.Values != nil || a.Targets[0].Helm.Values != nil || a.ValuesHash == "" || a.ValuesHash == b.ValuesHash {
		t.Fatalf("taken: %+v", a)
	}
	s := RevisionSecret("fleet-default", RevisionOwner("Rollout", "app", "uid-1"), RevisionData(map[string]map[string][]byte{a.ValuesHash: da, b.ValuesHash: db}))
	if s.Name != "app.values" || s.Type != fleet.SecretTypeRevisionValues || s.OwnerReferences[0].UID != "uid-1" {
		t.Fatalf("secret %+v", s.ObjectMeta)
	}
	for _, r := range []struct {
		rev      *fleet.RolloutRevision
		replicas float64
	}{{a, 1}, {b, 2}} {
		got, err := RestoreRevision(r.rev, s)
		if err != nil {
			t.Fatal(err)
		}
		if got.Options.Helm.Values.Data["replicas"] != r.replicas || got.Targets[0].Helm.Values.Data["tier"] != "gold" {
			t.Errorf("revision %s restored as %+v", r.rev.Revision, got.Options.Helm.Values)
		}
		if r.rev.Options.Helm.Values != nil {
			t.Error("RestoreRevision changed its argument")
		}
	}
	// A revision taken already keeps naming its values.
	if again, err := TakeFromRevision(a); err != nil || again != nil || a.ValuesHash == "" {
		t.Errorf("taken twice: %q %v %q", again, err, a.ValuesHash)
	}
	// Values written for another hash, or changed, are not used.
	s.Data[b.ValuesHash+"."+BundleKey] = []byte(`{"replicas":9}`)
	if _, err := RestoreRevision(b, s); err == nil || !strings.Contains(err.Error(), "app.values") {
		t.Errorf("changed values: %v", err)
	}
	s.Type = corev1.SecretTypeOpaque
	if _, err := RestoreRevision(a, s); err == nil || !strings.Contains(err.Error(), "type") {
		t.Errorf("another type: %v", err)
	}
	// A revision without values needs no Secret.
	none := &fleet.RolloutRevision{Revision: "c"}
	if data, err := TakeFromRevision(none); data != nil || err != nil || none.ValuesHash != "" {
		t.Errorf("no values: %q %v", data, err)
	}
	if got, err := RestoreRevision(none, nil); got != none || err != nil {
		t.Errorf("restoring none: %v", err)
	}
}
