package bundle

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/bundlevalues"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// putValues makes bd's options Secret hold data (bundlevalues.TakeFromDeployment's), or deletes
// it when data is nil and bd had values before. had is the valuesHash bd had ("" for a new one or
// none): a Secret that already holds data (the same hash) is not written again. The manager does
// not cache these Secrets (one per deployment): it writes them by name.
func (h *handler) putValues(bd *fleet.BundleDeployment, data map[string][]byte, had string) error {
	if data == nil {
		if had == "" {
			return nil
		}
		err := h.secretWriter.Delete(bd.Namespace, bd.Name, &metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the values of bundledeployment %s/%s: %w", bd.Namespace, bd.Name, err)
		}
		return nil
	}
	if had == bundlevalues.DeploymentHash(data) {
		return nil
	}
	want := bundlevalues.DeploymentSecret(bd, data)
	_, err := h.secretWriter.Create(want)
	if apierrors.IsAlreadyExists(err) {
		err = h.updateValues(want)
	}
	if err != nil {
		return fmt.Errorf("writing the values of bundledeployment %s/%s: %w", bd.Namespace, bd.Name, err)
	}
	return nil
}

// updateValues writes want over the Secret of its name. One of another type is not the
// deployment's: it is not written over.
func (h *handler) updateValues(want *corev1.Secret) error {
	cur, err := h.secretWriter.Get(want.Namespace, want.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cur.Type != want.Type {
		return fmt.Errorf("secret %s/%s is of type %s, not %s", cur.Namespace, cur.Name, cur.Type, want.Type)
	}
	cur = cur.DeepCopy()
	cur.Data, cur.OwnerReferences = want.Data, want.OwnerReferences
	_, err = h.secretWriter.Update(cur)
	return err
}
