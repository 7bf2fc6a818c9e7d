// Package content counts the BundleDeployments that use each Content and deletes a Content
// nobody uses any more. (manager)
package content

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetgo/fleet/internal/controller/index"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// DefaultGracePeriod protects a new Content: a Bundle creates its Content before the
// BundleDeployments that refer to it.
const DefaultGracePeriod = 30 * time.Second

// countDelay coalesces the reference counts that BundleDeployment changes trigger.
// The count is informational (collection reads the index), so a wide window keeps a rollout
// to thousands of clusters from rewriting it every second.
const countDelay = 5 * time.Second

type handler struct {
	grace    time.Duration
	contents fleetcontrollers.ContentController
	bdCache  fleetcontrollers.BundleDeploymentCache
	now      func() time.Time
}

// Register starts the Content garbage collector, which spares a Content younger than grace
// (zero: DefaultGracePeriod).
func Register(ctx context.Context, contents fleetcontrollers.ContentController, bds fleetcontrollers.BundleDeploymentController, grace time.Duration) {
	if grace <= 0 {
		grace = DefaultGracePeriod
	}
	h := &handler{grace: grace, contents: contents, bdCache: bds.Cache(), now: time.Now}
	fleetcontrollers.RegisterContentStatusHandler(ctx, contents, "", "content-gc", h.status)
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if bd, ok := obj.(*fleet.BundleDeployment); ok {
			if c := bd.Labels[fleet.ContentNameLabel]; c != "" {
				// Delayed, so a burst of deployment changes makes one count.
				contents.EnqueueAfter(c, countDelay)
			}
		}
	}
	_, _ = bds.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		DeleteFunc: enqueue,
		UpdateFunc: func(old, cur any) { enqueue(old); enqueue(cur) },
	})
}

// status records how many BundleDeployments use the Content, and deletes an unreferenced one
// past its grace period.
func (h *handler) status(c *fleet.Content, status fleet.ContentStatus) (fleet.ContentStatus, error) {
	if c.DeletionTimestamp != nil {
		return status, nil
	}
	refs, err := h.bdCache.GetByIndex(index.ByContent, c.Name)
	if err != nil {
		return status, err
	}
	if len(refs) == 0 {
		if age := h.now().Sub(c.CreationTimestamp.Time); age < h.grace {
			h.contents.EnqueueAfter(c.Name, h.grace-age)
		} else {
			err := h.contents.Delete(c.Name, &metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return status, err
			}
			return status, nil // gone: no count to record
		}
	}
	status.ReferenceCount = len(refs)
	return status, nil
}
