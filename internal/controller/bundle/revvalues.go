package bundle

import (
	"fmt"
	"maps"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/bundlevalues"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// WriteRevisionValues makes the revision-values Secret want (bundlevalues.RevisionSecret) hold
// its data: created, or its data replaced when the Secret of that name is of the type and its
// owner's. One of another type or owner is not touched, and named in the error.
func WriteRevisionValues(secrets corecontrollers.SecretClient, want *corev1.Secret) error {
	_, err := secrets.Create(want)
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("writing the Helm values of the revisions of %s: secret %s/%s: %w", ownerOf(want), want.Namespace, want.Name, err)
		}
		return nil
	}
	cur, err := secrets.Get(want.Namespace, want.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("secret %s/%s: %w", want.Namespace, want.Name, err)
	}
	if cur.Type != fleet.SecretTypeRevisionValues || !sameOwner(cur, want) {
		return fmt.Errorf("the Helm values of the revisions of %s: secret %s/%s exists and is not theirs (type %s)", ownerOf(want), want.Namespace, want.Name, cur.Type)
	}
	if maps.EqualFunc(cur.Data, want.Data, func(a, b []byte) bool { return string(a) == string(b) }) {
		return nil
	}
	cur = cur.DeepCopy()
	cur.Data = want.Data
	if _, err := secrets.Update(cur); err != nil {
		return fmt.Errorf("writing the Helm values of the revisions of %s: secret %s/%s: %w", ownerOf(want), want.Namespace, want.Name, err)
	}
	return nil
}

// RevisionValues is kept with its Helm values put back from the revision-values Secret of the
// object ownerName keeps it in (namespace ns): as the cache has it, else (the cache may not show
// its last write yet) as the apiserver has it (live; nil: the cache only). kept itself when its
// values are not kept outside it.
func RevisionValues(cache corecontrollers.SecretCache, live corecontrollers.SecretClient, ns, ownerName string, kept *fleet.RolloutRevision) (*fleet.RolloutRevision, error) {
	if kept == nil || kept.ValuesHash == "" {
		return kept, nil
	}
	name := bundlevalues.RevisionSecretName(ownerName)
	var out *fleet.RolloutRevision
	err := fmt.Errorf("secret %s/%s is not read here", ns, name)
	if cache != nil {
		var s *corev1.Secret
		if s, err = cache.Get(ns, name); err == nil {
			if out, err = bundlevalues.RestoreRevision(kept, s); err == nil {
				return out, nil
			}
		}
	}
	if live != nil {
		var s *corev1.Secret
		if s, err = live.Get(ns, name, metav1.GetOptions{}); err == nil {
			return bundlevalues.RestoreRevision(kept, s)
		}
	}
	return nil, fmt.Errorf("the Helm values of revision %s: secret %s/%s: %w", kept.Revision, ns, name, err)
}

func sameOwner(a, b *corev1.Secret) bool {
	ra, rb := metav1.GetControllerOf(a), metav1.GetControllerOf(b)
	return ra != nil && rb != nil && ra.UID == rb.UID
}

func ownerOf(s *corev1.Secret) string {
	if r := metav1.GetControllerOf(s); r != nil {
		return fmt.Sprintf("%s %s/%s", r.Kind, s.Namespace, r.Name)
	}
	return s.Namespace
}
