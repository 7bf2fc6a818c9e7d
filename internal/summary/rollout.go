package summary

import (
	"strings"
	"time"

	"github.com/rancher/wrangler/v3/pkg/genericcondition"
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

// Held is what a Bundle's Held condition says of the rollbacks holding some of its clusters at
// an earlier revision ("" when none is in force; docs/history.md).
func Held(b *fleet.Bundle) string {
	if c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionHeld); c != nil {
		return c.Message
	}
	return ""
}

// HeldAt is the revision a rollback holds a deployment at ("": none).
func HeldAt(bd *fleet.BundleDeployment) string {
	return bd.Annotations[fleet.HeldAnnotation]
}

// SetHeld rolls the Held conditions of Bundles up into their GitRepo's or HelmOp's conditions:
// each held Bundle named with what its condition says; none when no rollback is in force.
func SetHeld(conds *[]genericcondition.GenericCondition, bundles []*fleet.Bundle, now time.Time) {
	var msgs []string
	st, reason := corev1.ConditionTrue, "RolledBack"
	for _, b := range bundles {
		c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionHeld)
		if c == nil {
			continue
		}
		msgs = append(msgs, "bundle "+b.Name+": "+c.Message)
		if c.Status == corev1.ConditionFalse {
			st, reason = corev1.ConditionFalse, c.Reason
		}
	}
	if len(msgs) == 0 {
		fleet.RemoveCondition(conds, fleet.ConditionHeld)
		return
	}
	fleet.SetCondition(conds, fleet.ConditionHeld, st, reason, strings.Join(msgs, "; "), now)
}
