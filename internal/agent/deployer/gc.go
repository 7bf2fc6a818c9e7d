package deployer

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/render"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// DefaultGCInterval is how often releases are matched against BundleDeployments.
const DefaultGCInterval = 15 * time.Minute

// RunGC uninstalls, every interval until ctx ends, the releases this agent made that no
// BundleDeployment deploys any more: those of BundleDeployments deleted while the agent missed it
// (it was down), and those a BundleDeployment left behind when its release name or namespace
// changed (as Fleet's agent does). A BundleDeployment is only judged gone after the manager
// confirms it, never from an empty cache.
func RunGC(ctx context.Context, interval time.Duration, bds fleetcontrollers.BundleDeploymentController, namespace string, d *helmdeployer.Deployer) {
	if interval <= 0 {
		interval = DefaultGCInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rels, err := d.Releases(ctx, "")
		if err != nil {
			logGC().WithError(err).Warn("listing releases")
			continue
		}
		for _, r := range rels {
			why := stale(r, bds, namespace)
			if why == "" {
				continue
			}
			logGC().WithField("release", r.String()).Info("uninstalling release of " + why)
			if err := d.Uninstall(ctx, r); err != nil {
				logGC().WithError(err).Warn("garbage collection")
			}
		}
	}
}

// stale says why release r is no longer deployed by its BundleDeployment ("" when it is).
func stale(r *helmdeployer.Release, bds fleetcontrollers.BundleDeploymentController, namespace string) string {
	bd, err := bds.Cache().Get(namespace, r.BundleID)
	if err != nil {
		if bd, err = bds.Get(namespace, r.BundleID, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return "a deleted bundledeployment"
		}
		if err != nil {
			return ""
		}
	}
	if bd.DeletionTimestamp != nil || bd.Spec.DeploymentID == "" {
		return ""
	}
	opts := &bd.Spec.Options
	if name, ns := render.ReleaseName(opts, bd.Name), render.Namespace(opts); name != r.Name || ns != r.Namespace {
		return "a bundledeployment now deploying release " + ns + "/" + name
	}
	return ""
}

func logGC() *logrus.Entry {
	return logrus.WithFields(logrus.Fields{"controller": "agent", "handler": "release-gc"})
}
