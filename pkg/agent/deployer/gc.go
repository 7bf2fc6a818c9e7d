package deployer

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/helmdeployer"
)

// DefaultGCInterval is how often releases are matched against BundleDeployments.
const DefaultGCInterval = 15 * time.Minute

// RunGC uninstalls, every interval until ctx ends, the releases this agent made whose
// BundleDeployment no longer exists: deletions the agent missed while it was down. A
// BundleDeployment is only judged gone after the manager confirms it, never from an empty cache.
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
		rels, err := d.Releases("")
		if err != nil {
			logGC().WithError(err).Warn("listing releases")
			continue
		}
		for _, r := range rels {
			if _, err := bds.Cache().Get(namespace, r.BundleID); err == nil {
				continue
			}
			_, err := bds.Get(namespace, r.BundleID, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				continue
			}
			logGC().WithField("release", r.String()).Info("uninstalling release of a deleted bundledeployment")
			if err := d.Uninstall(ctx, r); err != nil {
				logGC().WithError(err).Warn("garbage collection")
			}
		}
	}
}

func logGC() *logrus.Entry {
	return logrus.WithFields(logrus.Fields{"controller": "agent", "handler": "release-gc"})
}
