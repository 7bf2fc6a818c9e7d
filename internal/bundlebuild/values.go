package bundlebuild

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/fleetgo/fleet/internal/bundlevalues"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// publish writes want. With o.Secrets set, its Helm values go into its values Secret
// (bundlevalues), written before the Bundle so that the manager finds them when it reads the
// Bundle's valuesHash, and owned by the Bundle once it has a UID; a Bundle that no longer has
// values loses its Secret. The Secrets are written without being read: a GitRepo's Job may
// write values Secrets, not read any.
func publish(ctx context.Context, o Options, bundles fleetcontrollers.BundleClient, want *fleet.Bundle, first readOnce) error {
	if o.Secrets == nil {
		_, err := createOrUpdate(bundles, want, first)
		return err
	}
	b := want.DeepCopy()
	values, err := bundlevalues.TakeFromBundle(b)
	if err != nil {
		return err
	}
	var uid types.UID
	had := false
	existing, err := first.get(bundles)(b.Namespace, b.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		// Another's Bundle is not written, nor its values.
		if err := claimed(existing, b); err != nil {
			return err
		}
		uid, had = existing.UID, existing.Spec.ValuesHash != ""
	case !apierrors.IsNotFound(err):
		return err
	}
	secrets := o.Secrets.Secrets(b.Namespace)
	if values != nil {
		if err := putValues(ctx, secrets, b, uid, values); err != nil {
			return err
		}
	}
	if err == nil {
		first = readOnce{b: existing, ok: true}
	} else {
		first = readOnce{ok: true}
	}
	written, err := createOrUpdate(bundles, b, first)
	if err != nil {
		return err
	}
	if values != nil && written.UID != uid {
		return putValues(ctx, secrets, b, written.UID, values)
	}
	if values == nil && had {
		if err := secrets.Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("bundle %s/%s: deleting its values Secret: %w", b.Namespace, b.Name, err)
		}
	}
	return nil
}

// putValues creates or overwrites b's values Secret, owned by the Bundle of uid (none when
// empty).
func putValues(ctx context.Context, secrets corev1client.SecretInterface, b *fleet.Bundle, uid types.UID, values map[string][]byte) error {
	owner := b.DeepCopy()
	owner.UID = uid
	s := bundlevalues.BundleSecret(owner, values)
	if uid == "" {
		s.OwnerReferences = nil
	}
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A GitRepo's Job may not read it (and the admission policy fleet-bundle-values keeps
		// it to values Secrets); whoever may is told when it is another kind of Secret.
		if cur, getErr := secrets.Get(ctx, s.Name, metav1.GetOptions{}); getErr == nil && cur.Type != s.Type {
			return fmt.Errorf("bundle %s/%s: secret %s/%s is of type %s, not a values Secret (%s): it is not written over",
				b.Namespace, b.Name, cur.Namespace, cur.Name, cur.Type, s.Type)
		}
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("bundle %s/%s: writing its values Secret: %w", b.Namespace, b.Name, err)
	}
	return nil
}
