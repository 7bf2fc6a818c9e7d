package helmdeployer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// namespaceAllowed enforces allowedTargetNamespaceSelector (set on the Bundles of GitRepos
// restricted by a GitRepoRestriction): the release namespace must already exist in this
// cluster with labels that match. A namespace the bundle would create, or labels it would set
// through namespaceLabels, do not count: otherwise a restricted repository could let itself in.
func (d *Deployer) namespaceAllowed(ctx context.Context, name string, opts *fleet.BundleDeploymentOptions) error {
	if opts.AllowedTargetNamespaceSelector == nil {
		return nil
	}
	ns, err := d.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ns, err = nil, nil
	}
	if err != nil {
		return err
	}
	return checkNamespace(name, ns, opts.AllowedTargetNamespaceSelector)
}

// checkNamespace is namespaceAllowed's decision for the namespace as found (nil: absent).
func checkNamespace(name string, ns *corev1.Namespace, selector *metav1.LabelSelector) error {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return Permanent(fmt.Errorf("allowedTargetNamespaceSelector: %w", err))
	}
	if ns == nil {
		return fmt.Errorf("namespace %s does not exist: allowedTargetNamespaceSelector %q admits only existing namespaces whose labels match", name, sel)
	}
	if !sel.Matches(labels.Set(ns.Labels)) {
		return fmt.Errorf("namespace %s is not allowed: its labels do not match allowedTargetNamespaceSelector %q", name, sel)
	}
	return nil
}
