package bundlevalues

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// TakeFromDeployment moves the Helm values of bd's options and staged options out of bd, sets
// bd.Spec.ValuesHash, and returns the options Secret's data: nil, with an empty hash, when
// neither has values.
func TakeFromDeployment(bd *fleet.BundleDeployment) (map[string][]byte, error) {
	values, err := takeOptions(&bd.Spec.Options)
	if err != nil {
		return nil, fmt.Errorf("bundledeployment %s/%s: helm values: %w", bd.Namespace, bd.Name, err)
	}
	staged, err := takeOptions(&bd.Spec.StagedOptions)
	if err != nil {
		return nil, fmt.Errorf("bundledeployment %s/%s: staged helm values: %w", bd.Namespace, bd.Name, err)
	}
	if isEmptyJSON(values) && isEmptyJSON(staged) {
		bd.Spec.ValuesHash = ""
		return nil, nil
	}
	data := map[string][]byte{ValuesKey: values, StagedValuesKey: staged}
	bd.Spec.ValuesHash = DeploymentHash(data)
	return data, nil
}

func takeOptions(o *fleet.BundleDeploymentOptions) ([]byte, error) {
	if o.Helm == nil || o.Helm.Values == nil {
		return []byte("null"), nil
	}
	raw, err := json.Marshal(o.Helm.Values)
	if err != nil {
		return nil, err
	}
	o.Helm.Values = nil
	return raw, nil
}

func isEmptyJSON(raw []byte) bool {
	s := string(raw)
	return s == "" || s == "null" || s == "{}"
}

// DeploymentHash is the valuesHash of a BundleDeployment's options Secret data: the hex SHA-256
// of its values followed by its staged values, as Fleet computes it.
func DeploymentHash(data map[string][]byte) string {
	h := sha256.New()
	h.Write(data[ValuesKey])
	h.Write(data[StagedValuesKey])
	return hex.EncodeToString(h.Sum(nil))
}

// DeploymentSecret is bd's options Secret holding data, owned by bd (which must have its UID).
func DeploymentSecret(bd *fleet.BundleDeployment, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bd.Name, Namespace: bd.Namespace,
			OwnerReferences: []metav1.OwnerReference{controllerRef("BundleDeployment", bd.Name, bd.UID)}},
		Type: fleet.SecretTypeBundleDeploymentOptions,
		Data: data,
	}
}

// ErrInvalid says a Secret named as the object is not a values Secret of it (another type, or
// values that are not a JSON object): waiting does not mend it.
var ErrInvalid = errors.New("not a values Secret of the object")

// ErrMissing says the options Secret a BundleDeployment's valuesHash names is not there.
var ErrMissing = errors.New("the options Secret is missing")

// GetSecret reads the Secret namespace/name (a client's Get: this package uses no client).
type GetSecret func(ctx context.Context, namespace, name string) (*corev1.Secret, error)

// ReadDeploymentOptions is what bd deploys, its options with the Helm values of its options
// Secret (read through get) when bd keeps them there (spec.valuesHash): what its agent deploys
// and `fleet plan --live` renders. A Secret that cannot be read fails with the
// apiserver's error (ErrMissing too when it is not there), one being written with ErrStale, one
// that is not bd's with ErrInvalid.
func ReadDeploymentOptions(ctx context.Context, get GetSecret, bd *fleet.BundleDeployment) (*fleet.BundleDeploymentOptions, error) {
	if bd.Spec.ValuesHash == "" {
		return &bd.Spec.Options, nil
	}
	s, err := get(ctx, bd.Namespace, bd.Name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the Helm values of bundledeployment %s/%s (spec.valuesHash): %w: %w", bd.Namespace, bd.Name, ErrMissing, err)
	}
	if err != nil {
		return nil, fmt.Errorf("the Helm values of bundledeployment %s/%s (spec.valuesHash): %w", bd.Namespace, bd.Name, err)
	}
	return DeploymentOptions(bd, s)
}

// DeploymentValues are the Helm values (of its options, not the staged ones) that s, bd's
// options Secret, holds: nil for none. It fails when s is not of the type or does not match
// bd.Spec.ValuesHash (ErrStale).
func DeploymentValues(bd *fleet.BundleDeployment, s *corev1.Secret) (map[string]any, error) {
	where := fmt.Sprintf("the Helm values of bundledeployment %s: secret %s", bd.Name, s.Name)
	if s.Type != fleet.SecretTypeBundleDeploymentOptions {
		return nil, fmt.Errorf("%s is of type %s, not %s: %w", where, s.Type, fleet.SecretTypeBundleDeploymentOptions, ErrInvalid)
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
		return nil, fmt.Errorf("%s, key %s: %w: %w", where, ValuesKey, ErrInvalid, err)
	}
	return values, nil
}

// DeploymentOptions are bd's options with the Helm values s, its options Secret, holds for them
// (bd's own options when it holds none): what bd deploys, as its agent and `fleet plan --live`
// read it. It fails as DeploymentValues does.
func DeploymentOptions(bd *fleet.BundleDeployment, s *corev1.Secret) (*fleet.BundleDeploymentOptions, error) {
	values, err := DeploymentValues(bd, s)
	if err != nil || values == nil {
		return &bd.Spec.Options, err
	}
	opts := bd.Spec.Options.DeepCopy()
	if opts.Helm == nil {
		opts.Helm = &fleet.HelmOptions{}
	}
	opts.Helm.Values = &fleet.GenericMap{Data: values}
	return opts, nil
}
