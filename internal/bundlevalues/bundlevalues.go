// Package bundlevalues keeps Helm values outside Bundles and BundleDeployments, in Secrets, as
// Fleet 0.13 and later do: whoever may read those objects (every tenant of a namespace, the
// Rancher UI's users) does not read the values with them, and Fleet's own agents and tools find
// the values where they look. A Bundle's values Secret is named as the Bundle, in its namespace,
// of type fleet.cattle.io/bundle-values/v1alpha1, and spec.valuesHash fingerprints it; a
// BundleDeployment's options Secret is named as it, in its cluster namespace, of type
// fleet.cattle.io/bundle-deployment/v1alpha1, fingerprinted the same way. A reader checks the
// fingerprint, so values written ahead of or behind their object are never used with it. (shared)
package bundlevalues

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Keys of the Secrets.
const (
	// BundleKey holds a Bundle's spec.helm.values; each named target's values are under the
	// target's name.
	BundleKey = "values.yaml"
	// ValuesKey and StagedValuesKey hold a BundleDeployment's options' and staged options' values.
	ValuesKey       = "values"
	StagedValuesKey = "stagedValues"
)

// ErrStale says a Secret's values do not match the object's valuesHash: one of the two was
// written and the other not yet. Waiting mends it.
var ErrStale = errors.New("the values Secret does not match spec.valuesHash (one of the two is being written)")

// TakeFromBundle moves b's Helm values (spec.helm.values and those of its named targets) out of
// b, sets b.Spec.ValuesHash, and returns the values Secret's data: nil, with an empty hash, when
// b has no values. Targets without a name keep theirs, as no key could hold them.
func TakeFromBundle(b *fleet.Bundle) (map[string][]byte, error) {
	data, err := takeValues(&b.Spec.Helm, b.Spec.Targets)
	if err != nil {
		return nil, fmt.Errorf("bundle %s/%s: %w", b.Namespace, b.Name, err)
	}
	if len(data) == 0 {
		b.Spec.ValuesHash = ""
		return nil, nil
	}
	b.Spec.ValuesHash = BundleHash(data)
	return data, nil
}

// takeValues moves the Helm values of *top (under BundleKey) and of each named target (under
// its name) out into the data it returns (empty: there were none).
func takeValues(top **fleet.HelmOptions, targets []fleet.BundleTarget) (map[string][]byte, error) {
	data := map[string][]byte{}
	take := func(key string, h *fleet.HelmOptions) error {
		if h == nil || h.Values == nil || empty(h.Values) {
			return nil
		}
		raw, err := json.Marshal(h.Values)
		if err != nil {
			return fmt.Errorf("helm values of %s: %w", key, err)
		}
		data[key], h.Values = raw, nil
		return nil
	}
	if err := take(BundleKey, *top); err != nil {
		return nil, err
	}
	for i := range targets {
		if t := &targets[i]; t.Name != "" && t.Name != BundleKey {
			if err := take(t.Name, t.Helm); err != nil {
				return nil, err
			}
		}
	}
	return data, nil
}

func empty(m *fleet.GenericMap) bool {
	return len(m.Data) == 0 && (m.Compacted == "" || m.Compacted == "{}")
}

// BundleHash is the valuesHash of a Bundle's values Secret data: the hex SHA-256 of its JSON
// (keys sorted, values base64), as Fleet computes it.
func BundleHash(data map[string][]byte) string {
	raw, _ := json.Marshal(data)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// BundleSecret is b's values Secret holding data, owned by b (which must have its UID) and
// labelled as b.
func BundleSecret(b *fleet.Bundle, data map[string][]byte) *corev1.Secret {
	labels := map[string]string{}
	for k, v := range b.Labels {
		labels[k] = v
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{controllerRef("Bundle", b.Name, b.UID)}},
		Type: fleet.SecretTypeBundleValues,
		Data: data,
	}
}

// RestoreBundle puts the values of s, b's values Secret, back into b (a copy the caller may
// change). It fails when s is not of the type or does not match b.Spec.ValuesHash (ErrStale).
func RestoreBundle(b *fleet.Bundle, s *corev1.Secret) error {
	where := fmt.Sprintf("the Helm values of bundle %s/%s: secret %s/%s", b.Namespace, b.Name, s.Namespace, s.Name)
	if s.Type != fleet.SecretTypeBundleValues {
		return fmt.Errorf("%s is of type %s, not %s", where, s.Type, fleet.SecretTypeBundleValues)
	}
	if BundleHash(s.Data) != b.Spec.ValuesHash {
		return fmt.Errorf("%s: %w", where, ErrStale)
	}
	return putValues(s.Data, &b.Spec.Helm, b.Spec.Targets, where)
}

// putValues puts the values of data (keyed as takeValues keys them) back into *top and the
// named targets; where names the data in errors.
func putValues(data map[string][]byte, top **fleet.HelmOptions, targets []fleet.BundleTarget, where string) error {
	values := func(key string) (*fleet.GenericMap, error) {
		raw, ok := data[key]
		if !ok || len(raw) == 0 || string(raw) == "null" {
			return nil, nil
		}
		m := map[string]any{}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%s, key %s: %w", where, key, err)
		}
		return &fleet.GenericMap{Data: m}, nil
	}
	put := func(key string, h **fleet.HelmOptions) error {
		v, err := values(key)
		if v != nil {
			if *h == nil {
				*h = &fleet.HelmOptions{}
			}
			(*h).Values = v
		}
		return err
	}
	if err := put(BundleKey, top); err != nil {
		return err
	}
	for i := range targets {
		if t := &targets[i]; t.Name != "" {
			if err := put(t.Name, &t.Helm); err != nil {
				return err
			}
		}
	}
	return nil
}

func controllerRef(kind, name string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: fleet.SchemeGroupVersion.String(), Kind: kind, Name: name, UID: uid, Controller: &yes}
}
