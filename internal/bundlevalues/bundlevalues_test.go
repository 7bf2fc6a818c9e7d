package bundlevalues

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func values(m map[string]any) *fleet.HelmOptions {
	return &fleet.HelmOptions{Values: &fleet.GenericMap{Data: m}}
}

// The hashes as the reference states Fleet computes them, spelled out by hand.
func TestHashesAreFleets(t *testing.T) {
	// json.Marshal(map[string][]byte{"prod": `{"a":1}`, "values.yaml": `{}`}): keys sorted,
	// values base64.
	want := sha256.Sum256([]byte(`{"prod":"eyJhIjoxfQ==","values.yaml":"e30="}`))
	if got := BundleHash(map[string][]byte{"values.yaml": []byte(`{}`), "prod": []byte(`{"a":1}`)}); got != hex.EncodeToString(want[:]) {
		t.Errorf("BundleHash = %s, want %s", got, hex.EncodeToString(want[:]))
	}
	want = sha256.Sum256([]byte(`{"a":1}null`))
	if got := DeploymentHash(map[string][]byte{ValuesKey: []byte(`{"a":1}`), StagedValuesKey: []byte("null")}); got != hex.EncodeToString(want[:]) {
		t.Errorf("DeploymentHash = %s, want %s", got, hex.EncodeToString(want[:]))
	}
}

func TestBundleValuesRoundTrip(t *testing.T) {
	b := &fleet.Bundle{Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: values(map[string]any{"replicas": 2})},
		Targets: []fleet.BundleTarget{
			{Name: "prod", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: values(map[string]any{"replicas": 3})}},
			{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: values(map[string]any{"unnamed": true})}},
		}}}
	b.Name, b.Namespace = "app", "fleet-default"
	data, err := TakeFromBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.Helm.Values != nil || b.Spec.Targets[0].Helm.Values != nil {
		t.Fatalf("values left in the Bundle: %+v", b.Spec)
	}
	if b.Spec.Targets[1].Helm.Values == nil {
		t.Error("an unnamed target's values have no key, so stay")
	}
	if len(data) != 2 || string(data[BundleKey]) != `{"replicas":2}` || string(data["prod"]) != `{"replicas":3}` {
		t.Fatalf("data = %q", data)
	}
	s := &corev1.Secret{Type: fleet.SecretTypeBundleValues, Data: data}
	if err := RestoreBundle(b, s); err != nil {
		t.Fatal(err)
	}
	if b.Spec.Helm.Values.Data["replicas"] != float64(2) || b.Spec.Targets[0].Helm.Values.Data["replicas"] != float64(3) {
		t.Errorf("restored %+v", b.Spec)
	}
	// Values written ahead of the Bundle (or behind it) are not used with it.
	s.Data = map[string][]byte{BundleKey: []byte(`{"replicas":9}`)}
	if err := RestoreBundle(b, s); !errors.Is(err, ErrStale) {
		t.Errorf("a Secret not matching valuesHash: %v, want ErrStale", err)
	}
	s.Data, s.Type = data, corev1.SecretTypeOpaque
	if err := RestoreBundle(b, s); err == nil || errors.Is(err, ErrStale) {
		t.Errorf("a Secret of another type: %v", err)
	}
	none := &fleet.Bundle{Spec: fleet.BundleSpec{ValuesHash: "old"}}
	if data, err := TakeFromBundle(none); err != nil || data != nil || none.Spec.ValuesHash != "" {
		t.Errorf("no values: %q %v hash %q", data, err, none.Spec.ValuesHash)
	}
}

func TestDeploymentValuesRoundTrip(t *testing.T) {
	bd := &fleet.BundleDeployment{Spec: fleet.BundleDeploymentSpec{
		Options:       fleet.BundleDeploymentOptions{Helm: values(map[string]any{"replicas": 2})},
		StagedOptions: fleet.BundleDeploymentOptions{Helm: values(map[string]any{"replicas": 3})}}}
	bd.Name = "app"
	data, err := TakeFromDeployment(bd)
	if err != nil {
		t.Fatal(err)
	}
	if bd.Spec.Options.Helm.Values != nil || bd.Spec.StagedOptions.Helm.Values != nil || bd.Spec.ValuesHash == "" {
		t.Fatalf("after taking: %+v", bd.Spec)
	}
	s := &corev1.Secret{Type: fleet.SecretTypeBundleDeploymentOptions, Data: data}
	got, err := DeploymentValues(bd, s)
	if err != nil || got["replicas"] != float64(2) {
		t.Errorf("DeploymentValues = %v, %v", got, err)
	}
	s.Data = map[string][]byte{ValuesKey: []byte(`{"replicas":9}`), StagedValuesKey: data[StagedValuesKey]}
	if _, err := DeploymentValues(bd, s); !errors.Is(err, ErrStale) {
		t.Errorf("a Secret not matching valuesHash: %v, want ErrStale", err)
	}
	empty := &fleet.BundleDeployment{Spec: fleet.BundleDeploymentSpec{ValuesHash: "old",
		Options: fleet.BundleDeploymentOptions{Helm: values(map[string]any{})}}}
	if data, err := TakeFromDeployment(empty); err != nil || data != nil || empty.Spec.ValuesHash != "" {
		t.Errorf("empty values: %q %v hash %q", data, err, empty.Spec.ValuesHash)
	}
}

// The agent retries a Secret being written and gives up on one that is not the deployment's:
// the two errors are told apart.
func TestDeploymentSecretErrorsAreTyped(t *testing.T) {
	bd := &fleet.BundleDeployment{Spec: fleet.BundleDeploymentSpec{Options: fleet.BundleDeploymentOptions{Helm: values(map[string]any{"a": 1})}}}
	bd.Name = "app"
	data, err := TakeFromDeployment(bd)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name           string
		s              *corev1.Secret
		stale, invalid bool
	}{
		{"another type", &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: data}, false, true},
		{"being written", &corev1.Secret{Type: fleet.SecretTypeBundleDeploymentOptions, Data: map[string][]byte{ValuesKey: []byte(`{"a":2}`)}}, true, false},
		{"not an object", &corev1.Secret{Type: fleet.SecretTypeBundleDeploymentOptions, Data: map[string][]byte{ValuesKey: []byte(`[1]`)}}, false, true},
	} {
		if c.name == "not an object" {
			bd.Spec.ValuesHash = DeploymentHash(c.s.Data)
		}
		_, err := DeploymentOptions(bd, c.s)
		if err == nil || errors.Is(err, ErrStale) != c.stale || errors.Is(err, ErrInvalid) != c.invalid {
			t.Errorf("%s: %v (stale %v, invalid %v wanted)", c.name, err, c.stale, c.invalid)
		}
	}
}
