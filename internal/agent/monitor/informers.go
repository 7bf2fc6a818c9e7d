package monitor

import (
	"context"
	"fmt"
	"sync"

	"github.com/rancher/wrangler/v3/pkg/apply"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// informers starts one watch per deployed kind, restricted to objects with an object-set hash
// label, and serves them to wrangler's apply as its cache (apply.InformerFactory).
type informers struct {
	ctx      context.Context
	factory  dynamicinformer.DynamicSharedInformerFactory
	onChange func(hash string)

	mu      sync.Mutex
	started map[schema.GroupVersionResource]cache.SharedIndexInformer
}

// Get returns the synced informer of a kind, starting it on first use.
func (i *informers) Get(_ schema.GroupVersionKind, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	inf := i.start(gvr)
	ctx, cancel := context.WithTimeout(i.ctx, cacheSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("watch of %s did not sync", gvr)
	}
	return inf, nil
}

// start starts the informer of a kind unless it runs already, without waiting for its sync.
func (i *informers) start(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	i.mu.Lock()
	defer i.mu.Unlock()
	inf, ok := i.started[gvr]
	if !ok {
		inf = i.factory.ForResource(gvr).Informer()
		_ = inf.SetTransform(func(obj any) (any, error) {
			if m, err := meta.Accessor(obj); err == nil {
				m.SetManagedFields(nil)
			}
			return obj, nil
		})
		notify := func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if m, err := meta.Accessor(obj); err == nil {
				if h := m.GetLabels()[apply.LabelHash]; h != "" {
					i.onChange(h)
				}
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    notify,
			UpdateFunc: func(_, obj any) { notify(obj) },
			DeleteFunc: notify,
		})
		i.started[gvr] = inf
		go inf.Run(i.ctx.Done())
	}
	return inf
}
