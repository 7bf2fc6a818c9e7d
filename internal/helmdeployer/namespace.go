package helmdeployer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/helmrelease"
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
		return helmrelease.Permanent(fmt.Errorf("allowedTargetNamespaceSelector: %w", err))
	}
	if ns == nil {
		return fmt.Errorf("namespace %s does not exist: allowedTargetNamespaceSelector %q admits only existing namespaces whose labels match", name, sel)
	}
	if !sel.Matches(labels.Set(ns.Labels)) {
		return fmt.Errorf("namespace %s is not allowed: its labels do not match allowedTargetNamespaceSelector %q", name, sel)
	}
	return nil
}

// ensureNamespace creates the release namespace when missing (unless createNamespace is false)
// and keeps namespaceLabels and namespaceAnnotations on it, writing as kube (the bundle's
// identity: a restricted bundle needs its ServiceAccount's right to create or label namespaces).
func ensureNamespace(ctx context.Context, read, kube kubernetes.Interface, name string, opts *fleet.BundleDeploymentOptions) (created bool, err error) {
	// Looked up as the agent (a namespace's labels are no secret, and a ServiceAccount may not
	// get namespaces), written as the bundle's identity.
	ns, err := read.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && opts.CreateNamespace != nil && !*opts.CreateNamespace {
		return false, fmt.Errorf("namespace %q does not exist, and createNamespace is false", name)
	}
	if apierrors.IsNotFound(err) {
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: opts.NamespaceLabels, Annotations: opts.NamespaceAnnotations}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	changed := false
	ns = ns.DeepCopy()
	for k, v := range opts.NamespaceLabels {
		if ns.Labels[k] != v {
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[k], changed = v, true
		}
	}
	for k, v := range opts.NamespaceAnnotations {
		if ns.Annotations[k] != v {
			if ns.Annotations == nil {
				ns.Annotations = map[string]string{}
			}
			ns.Annotations[k], changed = v, true
		}
	}
	if !changed {
		return false, nil
	}
	_, err = kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	return false, err
}
