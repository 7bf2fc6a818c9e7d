package controller

import (
	"context"

	lassocache "github.com/rancher/lasso/pkg/cache"
	lassocontroller "github.com/rancher/lasso/pkg/controller"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Sharding splits the GitOps work between controller processes as Fleet users configure it: a
// controller started with --shard-id ID handles the GitRepos, Bundles, BundleDeployments,
// HelmOps and ImageScans labelled fleet.cattle.io/shard-ref=ID (the label goes from a GitRepo or
// HelmOp to its Bundles and from those to their BundleDeployments), and the unsharded controller
// handles the unlabelled ones. Everything that is one per management cluster (Clusters and their
// groups, registration, Contents, the local cluster's bootstrap, the webhook receiver) is the
// unsharded controller's alone.
//
// A shard's caches of its kinds hold only its own objects (the memory splits with the work).
// The unsharded controller's GitRepo and BundleDeployment caches hold every shard's objects: a
// Cluster's status counts all its BundleDeployments, and a webhook may name any GitRepo; its
// handlers see only unlabelled ones.

// shardedResources are the kinds whose objects belong to a shard.
var shardedResources = map[schema.GroupResource]bool{
	{Group: fleet.SchemeGroupVersion.Group, Resource: "gitrepos"}:          true,
	{Group: fleet.SchemeGroupVersion.Group, Resource: "bundles"}:           true,
	{Group: fleet.SchemeGroupVersion.Group, Resource: "bundledeployments"}: true,
	{Group: fleet.SchemeGroupVersion.Group, Resource: "helmops"}:           true,
	{Group: fleet.SchemeGroupVersion.Group, Resource: "imagescans"}:        true,
}

// ShardSelector selects the objects of shard id: labelled with it, or unlabelled for "".
func ShardSelector(id string) labels.Selector {
	var r *labels.Requirement
	if id == "" {
		r, _ = labels.NewRequirement(fleet.ShardLabel, selection.DoesNotExist, nil)
	} else {
		r, _ = labels.NewRequirement(fleet.ShardLabel, selection.Equals, []string{id})
	}
	return labels.NewSelector().Add(*r)
}

// inShard says whether obj is the shard's (mine selects its objects; the same selector narrows
// its caches, metrics and events). A deleted object (nil) is passed on: its handlers only forget
// what they knew of the key.
func inShard(mine labels.Selector, obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return true
	}
	return mine.Matches(labels.Set(m.GetLabels()))
}

// shardTweaks narrows a shard's caches of the sharded kinds to its own objects, and the
// unsharded controller's Bundle, HelmOp and ImageScan caches to unlabelled ones.
func shardTweaks(id string, t map[schema.GroupVersionKind]lassocache.TweakListOptionsFunc) {
	sel := ShardSelector(id).String()
	narrow := func(lo *metav1.ListOptions) { lo.LabelSelector = sel }
	kinds := []string{"Bundle", "HelmOp", "ImageScan"}
	if id != "" {
		kinds = append(kinds, "GitRepo", "BundleDeployment")
	}
	for _, k := range kinds {
		t[fleet.SchemeGroupVersion.WithKind(k)] = narrow
	}
}

// shardFactory hands out controllers whose handlers see only the shard's objects of the sharded
// kinds; other kinds' controllers are passed through.
type shardFactory struct {
	lassocontroller.SharedControllerFactory
	id string
}

func (f shardFactory) ForResourceKind(gvr schema.GroupVersionResource, kind string, namespaced bool) lassocontroller.SharedController {
	return f.wrap(gvr.GroupResource(), f.SharedControllerFactory.ForResourceKind(gvr, kind, namespaced))
}

func (f shardFactory) ForResource(gvr schema.GroupVersionResource, namespaced bool) lassocontroller.SharedController {
	return f.wrap(gvr.GroupResource(), f.SharedControllerFactory.ForResource(gvr, namespaced))
}

func (f shardFactory) wrap(gr schema.GroupResource, c lassocontroller.SharedController) lassocontroller.SharedController {
	if !shardedResources[gr] {
		return c
	}
	return shardController{SharedController: c, mine: ShardSelector(f.id)}
}

// shardController skips the objects of other shards before any handler sees them.
type shardController struct {
	lassocontroller.SharedController
	mine labels.Selector
}

func (c shardController) RegisterHandler(ctx context.Context, name string, handler lassocontroller.SharedControllerHandler) {
	c.SharedController.RegisterHandler(ctx, name, lassocontroller.SharedControllerHandlerFunc(
		func(key string, obj runtime.Object) (runtime.Object, error) {
			if !inShard(c.mine, obj) {
				return obj, nil
			}
			return handler.OnChange(key, obj)
		}))
}
