package helmdeployer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DownstreamLabel marks the Secrets and ConfigMaps an agent created from a bundle's
// downstreamResources, with the BundleDeployment's name.
const DownstreamLabel = "fleet.cattle.io/downstream-resource-of"

// applyDownstream creates or updates the bundle's downstreamResources in namespace ns; with keep
// (keepResources) they stay when the bundle's release goes, else they go with it.
func applyDownstream(ctx context.Context, kube kubernetes.Interface, ns, bundleID string, keep bool, objs []metav1.Object) error {
	for _, o := range objs {
		o.SetNamespace(ns)
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[DownstreamLabel] = bundleID
		o.SetLabels(labels)
		if keep {
			ann := o.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[KeepPolicyAnnotation] = KeepPolicy
			o.SetAnnotations(ann)
		}
		var err error
		switch obj := o.(type) {
		case *corev1.Secret:
			err = createOrUpdate(ctx, kube.CoreV1().Secrets(ns), obj)
		case *corev1.ConfigMap:
			err = createOrUpdate(ctx, kube.CoreV1().ConfigMaps(ns), obj)
		default:
			err = fmt.Errorf("%T cannot be a downstream resource", o)
		}
		if err != nil {
			return fmt.Errorf("downstream resource %s/%s: %w", ns, o.GetName(), err)
		}
	}
	return nil
}

// namespacedClient is what createOrUpdate needs of a typed client (Secrets, ConfigMaps).
type namespacedClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// createOrUpdate writes obj whole, over what exists under its name.
func createOrUpdate[T metav1.Object](ctx context.Context, c namespacedClient[T], obj T) error {
	cur, err := c.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(cur.GetResourceVersion())
	_, err = c.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// deleteDownstream deletes the copies of bundleID's downstreamResources in namespace ns, but
// those of a keepResources bundle (annotated KeepPolicyAnnotation), as Fleet's agent does with its
// BundleDeployment.
func deleteDownstream(ctx context.Context, kube kubernetes.Interface, ns, bundleID string) error {
	sel := metav1.ListOptions{LabelSelector: DownstreamLabel + "=" + bundleID}
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("listing the downstream resources of %s in %s: %w", bundleID, ns, err)
	}
	cms, err := kube.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err != nil {
		return fmt.Errorf("listing the downstream resources of %s in %s: %w", bundleID, ns, err)
	}
	var objs []metav1.Object
	for i := range secrets.Items {
		objs = append(objs, &secrets.Items[i])
	}
	for i := range cms.Items {
		objs = append(objs, &cms.Items[i])
	}
	for _, o := range objs {
		if o.GetAnnotations()[KeepPolicyAnnotation] == KeepPolicy {
			continue
		}
		if _, isSecret := o.(*corev1.Secret); isSecret {
			err = kube.CoreV1().Secrets(ns).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		} else {
			err = kube.CoreV1().ConfigMaps(ns).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting downstream resource %s/%s: %w", ns, o.GetName(), err)
		}
	}
	return nil
}
