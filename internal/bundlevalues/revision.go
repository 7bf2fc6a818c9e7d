package bundlevalues

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A revision kept for a rollback (a BundleRevision's inputs, a Rollout's current and passed
// revisions) holds its Helm values outside it too: whoever may read those kinds in a namespace
// would otherwise read the values the Bundle keeps in its values Secret. The values of the
// revisions an object keeps are in one Secret of type fleet.cattle.io/revision-values/v1alpha1
// named RevisionSecretName(object), owned by it; each revision's values are under keys
// "<its valuesHash>.<key>", key as in a Bundle's values Secret, so a revision that moves from
// current to passed keeps its keys.

// RevisionSecretName is the name of the Secret holding the values of the revisions the object
// named owner keeps. The suffix keeps it apart from the values Secret of the Bundle of the same
// name; one of a Bundle named so is refused by its type.
func RevisionSecretName(owner string) string {
	return owner + ".values"
}

// TakeFromRevision moves r's Helm values (of its options and its named targets) out of r, sets
// r.ValuesHash and returns them: nil when r holds none, r.ValuesHash then left as it is (a
// revision taken before still names its values).
func TakeFromRevision(r *fleet.RolloutRevision) (map[string][]byte, error) {
	if r == nil {
		return nil, nil
	}
	data, err := takeValues(&r.Options.Helm, r.Targets)
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", r.Revision, err)
	}
	if len(data) == 0 {
		return nil, nil
	}
	r.ValuesHash = BundleHash(data)
	return data, nil
}

// RevisionData is the data of a revision-values Secret holding each of values (by valuesHash).
func RevisionData(values map[string]map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for hash, data := range values {
		for k, v := range data {
			out[hash+"."+k] = v
		}
	}
	return out
}

// RevisionValues are the values data (a revision-values Secret's) holds for valuesHash hash:
// nil when it holds none that match it.
func RevisionValues(data map[string][]byte, hash string) map[string][]byte {
	if hash == "" {
		return nil
	}
	out := map[string][]byte{}
	for k, v := range data {
		if key, ok := strings.CutPrefix(k, hash+"."); ok {
			out[key] = v
		}
	}
	if len(out) == 0 || BundleHash(out) != hash {
		return nil
	}
	return out
}

// RevisionSecret is the revision-values Secret of the object owner (namespace ns), holding data.
func RevisionSecret(ns string, owner metav1.OwnerReference, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: RevisionSecretName(owner.Name), Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{owner}},
		Type: fleet.SecretTypeRevisionValues,
		Data: maps.Clone(data),
	}
}

// RevisionOwner is a controller reference to the object of kind and name, UID uid.
func RevisionOwner(kind, name string, uid types.UID) metav1.OwnerReference {
	return controllerRef(kind, name, uid)
}

// RestoreRevision is r with its Helm values put back from s, the revision-values Secret of the
// object keeping it (r itself when its values are not kept outside it). It fails, naming s, when
// s is not of the type or holds no values matching r.ValuesHash.
func RestoreRevision(r *fleet.RolloutRevision, s *corev1.Secret) (*fleet.RolloutRevision, error) {
	if r == nil || r.ValuesHash == "" {
		return r, nil
	}
	where := fmt.Sprintf("the Helm values of revision %s: secret %s/%s", r.Revision, s.Namespace, s.Name)
	if s.Type != fleet.SecretTypeRevisionValues {
		return nil, fmt.Errorf("%s is of type %s, not %s", where, s.Type, fleet.SecretTypeRevisionValues)
	}
	data := RevisionValues(s.Data, r.ValuesHash)
	if data == nil {
		return nil, fmt.Errorf("%s holds none with valuesHash %s", where, r.ValuesHash)
	}
	return WithValues(r, data, where)
}

// WithValues is a copy of r with data (its values as TakeFromRevision took them, matching
// r.ValuesHash) put back; where names data in errors.
func WithValues(r *fleet.RolloutRevision, data map[string][]byte, where string) (*fleet.RolloutRevision, error) {
	out := r.DeepCopy()
	if err := putValues(data, &out.Options.Helm, out.Targets, where); err != nil {
		return nil, err
	}
	return out, nil
}
