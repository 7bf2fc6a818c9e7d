package bundle

import (
	"k8s.io/apimachinery/pkg/util/intstr"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// rollout decides, BundleDeployment by BundleDeployment, whether staged options may be promoted:
// never while the Bundle is paused, and only while the number of unavailable targets stays
// within maxUnavailable (default: all of them).
type rollout struct {
	paused         bool
	maxUnavailable int
	unavailable    int
	// blocked is true when some target kept older options because of the limit.
	blocked bool
}

func newRollout(b *fleet.Bundle, plan []planned, existing map[string]*fleet.BundleDeployment) *rollout {
	targets := 0
	for _, p := range plan {
		if p.desired != nil {
			targets++
		}
	}
	r := &rollout{paused: b.Spec.Paused, maxUnavailable: targets}
	if rs := b.Spec.RolloutStrategy; rs != nil && rs.MaxUnavailable != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(rs.MaxUnavailable, targets, false)
		if err == nil {
			r.maxUnavailable = max(n, 1)
		}
	}
	for _, bd := range existing {
		if unavailable(bd) {
			r.unavailable++
		}
	}
	return r
}

// apply returns the BundleDeployment to write: the desired options always staged, promoted when
// the rollout allows.
func (r *rollout) apply(desired, cur *fleet.BundleDeployment) *fleet.BundleDeployment {
	next := desired.DeepCopy()
	changed := cur == nil || cur.Spec.DeploymentID != desired.Spec.DeploymentID
	if !changed {
		return next
	}
	promote := !r.paused
	// Promoting an available target makes it unavailable until the agent has deployed.
	wasAvailable := cur != nil && !unavailable(cur)
	if promote && (cur == nil || wasAvailable) && r.unavailable >= r.maxUnavailable {
		promote = false
		r.blocked = true
	}
	if promote {
		if cur == nil || wasAvailable {
			r.unavailable++
		}
		return next
	}
	if cur != nil {
		next.Spec.Options = *cur.Spec.Options.DeepCopy()
		next.Spec.DeploymentID = cur.Spec.DeploymentID
		next.Spec.CorrectDrift = cur.Spec.CorrectDrift
		// The content label names what is deployed, so the Content the agent may still need is
		// not collected while the new one waits.
		next.Labels[fleet.ContentNameLabel] = cur.Labels[fleet.ContentNameLabel]
	} else {
		next.Spec.Options = fleet.BundleDeploymentOptions{}
		next.Spec.DeploymentID = ""
	}
	return next
}
