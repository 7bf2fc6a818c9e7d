package bundle

import (
	"encoding/json"
	"fmt"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ValuesSecretType is the type of the Secret Fleet 0.13 and later keep a Bundle's Helm values in
// (named as the Bundle, in its namespace; spec.valuesHash says it is there).
const ValuesSecretType = "fleet.cattle.io/bundle-values/v1alpha1"

// storedValues puts back into b (the handler's copy) the Helm values Fleet keeps outside the
// Bundle: key values.yaml holds spec.helm.values, and a key named as a target that target's
// helm.values (JSON each). A Bundle without valuesHash holds its values itself.
func storedValues(secrets corecontrollers.SecretCache, b *fleet.Bundle) error {
	if b.Spec.ValuesHash == "" || secrets == nil {
		return nil
	}
	s, err := secrets.Get(b.Namespace, b.Name)
	if err != nil {
		return fmt.Errorf("the Helm values of bundle %s/%s (spec.valuesHash): secret %s/%s: %w", b.Namespace, b.Name, b.Namespace, b.Name, err)
	}
	if s.Type != ValuesSecretType {
		return fmt.Errorf("the Helm values of bundle %s/%s: secret %s/%s is of type %s, not %s", b.Namespace, b.Name, s.Namespace, s.Name, s.Type, ValuesSecretType)
	}
	values := func(key string) (*fleet.GenericMap, error) {
		data, ok := s.Data[key]
		if !ok || len(data) == 0 {
			return nil, nil
		}
		m := map[string]any{}
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("the Helm values of bundle %s/%s: secret %s/%s, key %s: %w", b.Namespace, b.Name, s.Namespace, s.Name, key, err)
		}
		return &fleet.GenericMap{Data: m}, nil
	}
	v, err := values("values.yaml")
	if err != nil {
		return err
	}
	if v != nil {
		if b.Spec.Helm == nil {
			b.Spec.Helm = &fleet.HelmOptions{}
		}
		b.Spec.Helm.Values = v
	}
	for i := range b.Spec.Targets {
		t := &b.Spec.Targets[i]
		if t.Name == "" {
			continue
		}
		v, err := values(t.Name)
		if err != nil {
			return err
		}
		if v != nil {
			if t.Helm == nil {
				t.Helm = &fleet.HelmOptions{}
			}
			t.Helm.Values = v
		}
	}
	return nil
}
