package summary

import (
	corev1 "k8s.io/api/core/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Rollout rolls the Rollout conditions of Bundles up into their GitRepo's or HelmOp's: False
// when one halted (naming the Bundle), else the first rollout still under way, else complete.
// ok is false when no Bundle rolls out by a policy.
func Rollout(bundles []*fleet.Bundle) (status corev1.ConditionStatus, reason, message string, ok bool) {
	var progressing *fleet.Bundle
	var reasonOf string
	for _, b := range bundles {
		c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionRollout)
		if c == nil {
			continue
		}
		ok = true
		if c.Status == corev1.ConditionFalse {
			return corev1.ConditionFalse, c.Reason, "bundle " + b.Name + ": " + c.Message, true
		}
		if progressing == nil && c.Reason != fleet.RolloutComplete {
			progressing, reasonOf, message = b, c.Reason, "bundle "+b.Name+": "+c.Message
		}
	}
	if !ok {
		return "", "", "", false
	}
	if progressing != nil {
		return corev1.ConditionTrue, reasonOf, message, true
	}
	return corev1.ConditionTrue, fleet.RolloutComplete, "", true
}
