package bundle

import (
	"bytes"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/ocistorage"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ociStorage is the registry of a Bundle whose contents it keeps: the storage Secret of the
// Bundle's GitRepo (ociRegistrySecret), or its namespace's Secret ocistorage; nil for a Bundle
// holding its resources.
func (h *handler) ociStorage(b *fleet.Bundle) (*ocistorage.Storage, error) {
	if b.Spec.ContentsID == "" {
		return nil, nil
	}
	name := ocistorage.DefaultSecretName
	if repo := b.Labels[fleet.RepoLabel]; repo != "" && h.gitrepos != nil {
		if gr, err := h.gitrepos.Get(b.Namespace, repo); err == nil && gr.Spec.OCIRegistrySecret != "" {
			name = gr.Spec.OCIRegistrySecret
		}
	}
	s, err := h.secrets.Get(b.Namespace, name)
	if err == nil {
		// A tenant names it (ociRegistrySecret): never a credential of the manager or a cluster,
		// whose data would be copied next to the BundleDeployments.
		err = h.guard.Check(s, "Bundle of namespace "+b.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("the contents of bundle %s/%s are in a registry (spec.contentsId %s): secret %s/%s: %w",
			b.Namespace, b.Name, b.Spec.ContentsID, b.Namespace, name, err)
	}
	st, err := ocistorage.FromSecret(s.Data)
	if err != nil {
		return nil, fmt.Errorf("the contents of bundle %s/%s: secret %s/%s: %w", b.Namespace, b.Name, b.Namespace, name, err)
	}
	return &st, nil
}

// ensureOCISecret writes the agent's copy of the registry's Secret next to bd, owned by bd (it
// goes with it), and labelled as the manager's own (no GitRepo or Bundle may name it).
func (h *handler) ensureOCISecret(bd *fleet.BundleDeployment, data map[string][]byte) error {
	name := ocistorage.AgentSecretName(bd.Name)
	cur, err := h.secrets.Get(bd.Namespace, name)
	if err == nil && maps.EqualFunc(cur.Data, data, bytes.Equal) {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err == nil {
		upd := cur.DeepCopy()
		upd.Data = data
		_, err = h.secretWriter.Update(upd)
		return err
	}
	_, err = h.secretWriter.Create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: bd.Namespace, Labels: map[string]string{fleet.ManagedLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fleet.SchemeGroupVersion.String(), Kind: "BundleDeployment", Name: bd.Name, UID: bd.UID}}},
		Type: ocistorage.SecretType, Data: data})
	if apierrors.IsAlreadyExists(err) {
		return nil // the cache shows it soon; the next write compares
	}
	return err
}
