package bundlevalues

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// DeploymentHash is the valuesHash of a BundleDeployment's options Secret data: the hex SHA-256
// of its values followed by its staged values, as Fleet computes it.
func DeploymentHash(data map[string][]byte) string {
	h := sha256.New()
	h.Write(data[ValuesKey])
	h.Write(data[StagedValuesKey])
	return hex.EncodeToString(h.Sum(nil))
}

// DeploymentValues are the Helm values (of its options, not the staged ones) that s, bd's
// options Secret, holds: nil for none. It fails when s is not of the type or does not match
// bd.Spec.ValuesHash (ErrStale).
func DeploymentValues(bd *fleet.BundleDeployment, s *corev1.Secret) (map[string]any, error) {
	where := fmt.Sprintf("the Helm values of bundledeployment %s: secret %s", bd.Name, s.Name)
	if s.Type != fleet.SecretTypeBundleDeploymentOptions {
		return nil, fmt.Errorf("%s is of type %s, not %s", where, s.Type, fleet.SecretTypeBundleDeploymentOptions)
	}
	if DeploymentHash(s.Data) != bd.Spec.ValuesHash {
		return nil, fmt.Errorf("%s: %w", where, ErrStale)
	}
	raw := s.Data[ValuesKey]
	if isEmptyJSON(raw) {
		return nil, nil
	}
	values := map[string]any{}
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, fmt.Errorf("%s, key %s: %w", where, ValuesKey, err)
	}
	return values, nil
}

func isEmptyJSON(raw []byte) bool {
	s := string(raw)
	return s == "" || s == "null" || s == "{}"
}
