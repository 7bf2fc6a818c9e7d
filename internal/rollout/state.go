package rollout

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// GateReady names, in failures, readiness itself (and deploy errors).
const GateReady = "Ready"

// standing is where one target stands with the revision rolling out.
type standing struct {
	// updated: its BundleDeployment carries the revision.
	updated bool
	// passing: updated, deployed, ready, and every gate passed.
	passing bool
	// failed, with the gate and why.
	failed       bool
	gate, reason string
	// deadline is when a target not passing yet fails (zero when not updated).
	deadline time.Time
}

// standingOf reads a target's BundleDeployment.
func standingOf(bd *fleet.BundleDeployment, revision string, gates []fleet.HealthGate, deadline time.Duration, now time.Time) standing {
	if bd == nil || bd.Annotations[fleet.RolloutRevisionAnnotation] != revision {
		return standing{}
	}
	s := standing{updated: true}
	if at, err := time.Parse(time.RFC3339, bd.Annotations[fleet.RolloutPromotedAnnotation]); err == nil {
		s.deadline = at.Add(deadline)
	}
	if bd.Spec.Paused || bd.Spec.OffSchedule {
		// Held on purpose (the cluster is paused or outside its schedule): the stage waits, the
		// deadline does not run out.
		s.deadline = time.Time{}
		return s.pending(now, GateReady, "held: the cluster is paused or outside its schedule")
	}
	st := &bd.Status
	applied := fleet.Applied(&bd.Spec, st)
	if c := fleet.FindCondition(st.Conditions, fleet.ConditionInstalled); c != nil && c.Status == corev1.ConditionFalse && !applied {
		return s.fail(GateReady, "deploy failed: "+c.Message)
	}
	if !applied {
		return s.pending(now, GateReady, "not deployed yet")
	}
	if c := fleet.FindCondition(st.Conditions, fleet.ConditionDeployed); c != nil && c.Status == corev1.ConditionFalse {
		return s.fail(GateReady, "deploy failed: "+c.Message)
	}
	if c := fleet.FindCondition(st.Conditions, fleet.ConditionReady); c == nil || c.Status != corev1.ConditionTrue {
		msg := "not ready"
		if c != nil && c.Message != "" {
			msg = "not ready: " + c.Message
		}
		return s.pending(now, GateReady, msg)
	}
	for _, g := range gates {
		c := fleet.FindCondition(st.Conditions, fleet.GateCondition(g.Name))
		switch {
		case c == nil:
			return s.pending(now, g.Name, "not checked yet")
		case c.Status == corev1.ConditionFalse:
			return s.fail(g.Name, c.Message)
		case c.Status != corev1.ConditionTrue:
			return s.pending(now, g.Name, c.Message)
		}
	}
	s.passing = true
	return s
}

func (s standing) fail(gate, reason string) standing {
	s.failed, s.gate, s.reason = true, gate, reason
	return s
}

// pending is a target not passing yet: failed once its deadline has passed.
func (s standing) pending(now time.Time, gate, reason string) standing {
	s.gate, s.reason = gate, reason
	if !s.deadline.IsZero() && !now.Before(s.deadline) {
		s.failed = true
		s.reason = fmt.Sprintf("%s (still, past the progress deadline)", strings.TrimSpace(reason))
	}
	return s
}
