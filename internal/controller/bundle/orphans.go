package bundle

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/fleetgo/fleet/internal/logfields"
)

// orphan is a BundleDeployment (namespace, name) the cache showed only after its Bundle
// (bundleNamespace, bundle) was deleted and handled, so nothing else deletes it.
type orphan struct{ namespace, name, bundleNamespace, bundle string }

// orphanTries bounds the attempts at one orphan: the queue's backoff spaces them from
// orphanRetry to about a minute.
const (
	orphanTries = 7
	orphanRetry = time.Second
)

func newOrphanQueue(first time.Duration) workqueue.TypedRateLimitingInterface[orphan] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[orphan](first, time.Minute),
		workqueue.TypedRateLimitingQueueConfig[orphan]{Name: "bundle-orphans"})
}

// deleteOrphans works the orphan queue until ctx ends: an orphan is deleted unless its Bundle is
// there again (then it is the Bundle's), and a failed attempt goes back with the queue's backoff.
func (h *handler) deleteOrphans(ctx context.Context) {
	go func() {
		<-ctx.Done()
		h.orphans.ShutDown()
	}()
	for {
		o, quit := h.orphans.Get()
		if quit {
			return
		}
		err := h.deleteOrphan(o)
		switch {
		case err == nil:
			h.orphans.Forget(o)
		case h.orphans.NumRequeues(o) < orphanTries-1:
			h.orphans.AddRateLimited(o)
		default:
			logrus.WithFields(logfields.For("bundle", o.namespace, o.name)).WithError(err).Warn("deleting a bundledeployment of a deleted bundle")
			h.orphans.Forget(o)
		}
		h.orphans.Done(o)
	}
}

func (h *handler) deleteOrphan(o orphan) error {
	_, err := h.bundles.Get(o.bundleNamespace, o.bundle, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return err // nil: the Bundle is there again, and the deployment is its
	}
	err = h.bds.Delete(o.namespace, o.name, &metav1.DeleteOptions{})
	if err == nil {
		logrus.WithFields(logfields.For("bundle", o.namespace, o.name)).Info("deleted a bundledeployment the cache showed after its bundle's deletion")
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
