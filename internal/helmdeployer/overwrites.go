package helmdeployer

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// MissingOverwritten returns the first of the resources (options.overwrites) that the release
// deploys and that no longer exists in the cluster, as "Kind namespace/name" ("" when all are
// there): a bundle those resources moved from deleted them on its removal, and deploying the
// release again recreates them.
func (d *Deployer) MissingOverwritten(ctx context.Context, r *Release, list []fleet.OverwrittenResource) (string, error) {
	if len(list) == 0 || r == nil || r.Manifest == "" {
		return "", nil
	}
	objs, err := ParseManifest(r.Manifest)
	if err != nil {
		return "", err
	}
	_, mapper, err := d.Discovery()
	if err != nil {
		return "", err
	}
	dyn, err := dynamic.NewForConfig(d.cfg)
	if err != nil {
		return "", err
	}
	for _, o := range list {
		for _, obj := range objs {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = r.Namespace
			}
			if obj.GetKind() != o.Kind || obj.GetName() != o.Name || (o.Namespace != "" && o.Namespace != ns) {
				continue
			}
			gvk := obj.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return "", fmt.Errorf("overwrites: %s %s: %w", o.Kind, o.Name, err)
			}
			client := dyn.Resource(mapping.Resource)
			var getErr error
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				_, getErr = client.Namespace(ns).Get(ctx, o.Name, metav1.GetOptions{})
			} else {
				ns = ""
				_, getErr = client.Get(ctx, o.Name, metav1.GetOptions{})
			}
			if apierrors.IsNotFound(getErr) {
				return fmt.Sprintf("%s %s/%s", o.Kind, ns, o.Name), nil
			}
			if getErr != nil {
				return "", fmt.Errorf("overwrites: %s %s: %w", o.Kind, o.Name, getErr)
			}
		}
	}
	return "", nil
}
