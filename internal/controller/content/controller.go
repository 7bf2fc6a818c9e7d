// Package content counts the BundleDeployments that use each Content and deletes a Content
// nobody uses any more: no BundleDeployment deploys it, no Rollout keeps it for a rollback and
// no revision of the deployment history keeps it.
// (manager)
package content

import (
	"context"
	"slices"
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

// rolloutByContent indexes Rollouts by the Contents of the revisions they keep.
const rolloutByContent = "fleetgo.io/rollout-by-content"

type handler struct {
	grace    time.Duration
	contents fleetcontrollers.ContentController
	bdCache  fleetcontrollers.BundleDeploymentCache
	// rollouts are nil where progressive rollouts are not served.
	rollouts fleetcontrollers.RolloutCache
	// revisions are the deployment history's (nil: none kept).
	revisions fleetcontrollers.BundleRevisionCache
	now       func() time.Time
}

// Register starts the Content garbage collector, which spares a Content younger than grace
// (zero: DefaultGracePeriod). rollouts and revisions may be nil.
func Register(ctx context.Context, contents fleetcontrollers.ContentController, bds fleetcontrollers.BundleDeploymentController,
	rollouts fleetcontrollers.RolloutController, revisions fleetcontrollers.BundleRevisionController, grace time.Duration) {
	if grace <= 0 {
		grace = DefaultGracePeriod
	}
	h := &handler{grace: grace, contents: contents, bdCache: bds.Cache(), now: time.Now}
	if rollouts != nil {
		h.rollouts = rollouts.Cache()
		watchRollouts(contents, rollouts)
	}
	if revisions != nil {
		h.revisions = revisions.Cache()
		watchRevisions(contents, revisions)
	}
	fleetcontrollers.RegisterContentStatusHandler(ctx, contents, "", "content-gc", h.status)
	// Counted after countDelay, so a burst of deployment changes makes one count.
	watchKeepers(contents, bds.Informer(), func(bd *fleet.BundleDeployment) []string {
		if c := bd.Labels[fleet.ContentNameLabel]; c != "" {
			return []string{c}
		}
		return nil
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
	kept := 0
	if h.rollouts != nil {
		rs, err := h.rollouts.GetByIndex(rolloutByContent, c.Name)
		if err != nil {
			return status, err
		}
		kept = len(rs)
	}
	byRevisions, err := h.keptByRevisions(c.Name)
	if err != nil {
		return status, err
	}
	kept += byRevisions
	if len(refs) == 0 && kept == 0 {
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

// rolloutContents are the Contents of the revisions a Rollout keeps.
func rolloutContents(r *fleet.Rollout) []string {
	var out []string
	for _, rev := range []*fleet.RolloutRevision{r.Status.Current, r.Status.Passed} {
		if rev != nil && rev.Content != "" && !slices.Contains(out, rev.Content) {
			out = append(out, rev.Content)
		}
	}
	return out
}

// watchRollouts indexes Rollouts by the Contents they keep and counts a Content again when a
// Rollout starts or stops keeping it.
func watchRollouts(contents fleetcontrollers.ContentController, rollouts fleetcontrollers.RolloutController) {
	rollouts.Cache().AddIndexer(rolloutByContent, func(r *fleet.Rollout) ([]string, error) { return rolloutContents(r), nil })
	watchKeepers(contents, rollouts.Informer(), rolloutContents)
}

// watchKeepers counts a Content again when an object of a kind that keeps Contents (kept says
// which) starts or stops keeping it: created, deleted, or updated to keep others. Most updates
// (a Rollout's stage counts) keep the same ones, and count none again.
func watchKeepers[T any](contents fleetcontrollers.ContentController, informer cache.SharedIndexInformer, kept func(T) []string) {
	keptBy := keptByOf(kept)
	enqueue := func(obj any) {
		for _, c := range keptBy(obj) {
			contents.EnqueueAfter(c, countDelay)
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		DeleteFunc: enqueue,
		UpdateFunc: func(old, cur any) {
			if !slices.Equal(keptBy(old), keptBy(cur)) {
				enqueue(old)
				enqueue(cur)
			}
		},
	})
}

// keptByOf reads the Contents an informer's object keeps (a deletion's final state included).
func keptByOf[T any](kept func(T) []string) func(any) []string {
	return func(obj any) []string {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(T); ok {
			return kept(o)
		}
		return nil
	}
}
