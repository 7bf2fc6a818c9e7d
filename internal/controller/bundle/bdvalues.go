package bundle

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/bundlevalues"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// takeValues moves next's Helm values out of it (bundlevalues.TakeFromDeployment) and returns
// the data of its options Secret; kept says the Secret cur has already holds them. A deployment
// held at what cur deploys (the same deploymentID, which fingerprints the options with their
// values) deploys cur's values, and the cache's copy of cur, whose options next took, has none:
// they are in cur's options Secret. With the staged options unchanged too, that Secret is kept
// as it is; otherwise its values are read back to go beside the new staged ones.
func (h *handler) takeValues(cur, next *fleet.BundleDeployment) (data map[string][]byte, kept bool, err error) {
	held := cur != nil && cur.Spec.ValuesHash != "" && next.Spec.DeploymentID == cur.Spec.DeploymentID
	if held && next.Spec.StagedDeploymentID == cur.Spec.StagedDeploymentID {
		if _, err := bundlevalues.TakeFromDeployment(next); err != nil {
			return nil, false, err
		}
		next.Spec.ValuesHash = cur.Spec.ValuesHash
		return nil, true, nil
	}
	if held && (next.Spec.Options.Helm == nil || next.Spec.Options.Helm.Values == nil) {
		if err := h.heldValues(cur, next); err != nil {
			return nil, false, err
		}
	}
	data, err = bundlevalues.TakeFromDeployment(next)
	return data, false, err
}

// valuesMissing says cur's agent reported its options Secret missing (deleted by someone with
// Secret rights in the cluster namespace): its values are written again (healValues).
func valuesMissing(cur *fleet.BundleDeployment) bool {
	if cur == nil || cur.Spec.ValuesHash == "" {
		return false
	}
	c := fleet.FindCondition(cur.Status.Conditions, fleet.ConditionDeployed)
	return c != nil && c.Status == corev1.ConditionFalse && c.Reason == fleet.ReasonValuesSecretMissing
}

// healValues writes cur's options Secret again when its agent reported it missing and next (what
// the pass renders for the cluster) holds exactly the values it held (the same valuesHash). A
// deployment held at other inputs (its values only in the lost Secret) is not healed: its error
// stays in its status until its inputs change.
func (h *handler) healValues(cur, next *fleet.BundleDeployment) error {
	if !valuesMissing(cur) {
		return nil
	}
	probe := next.DeepCopy()
	data, err := bundlevalues.TakeFromDeployment(probe)
	if err != nil || data == nil || probe.Spec.ValuesHash != cur.Spec.ValuesHash {
		return err
	}
	return h.putValues(cur, data, "")
}

// heldValues gives next cur's options as cur deploys them, with the Helm values cur's options
// Secret holds (next is held at cur's deploymentID: it has cur's options, without values).
func (h *handler) heldValues(cur, next *fleet.BundleDeployment) error {
	s, err := h.secretWriter.Get(cur.Namespace, cur.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the values of bundledeployment %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	opts, err := bundlevalues.DeploymentOptions(cur, s)
	if err != nil {
		return err
	}
	next.Spec.Options = *opts.DeepCopy()
	return nil
}

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
	if equality.Semantic.DeepEqual(cur.Data, want.Data) && equality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences) {
		return nil
	}
	cur = cur.DeepCopy()
	cur.Data, cur.OwnerReferences = want.Data, want.OwnerReferences
	_, err = h.secretWriter.Update(cur)
	return err
}
