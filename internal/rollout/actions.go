package rollout

import (
	"fmt"
	"slices"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The users' decisions about a rollout, as changes of its Rollout's spec (fleet rollout and the
// web UI write them).

// Action is a decision about a rollout; it changes the spec and says what it did, or fails.
type Action func(r *fleet.Rollout) (string, error)

// Approve approves stage (default: the stage waiting for approval) of the revision rolling out.
func Approve(stage string) Action {
	return func(r *fleet.Rollout) (string, error) {
		s := stage
		if s == "" {
			if r.Status.Phase != fleet.RolloutWaitingForApproval {
				return "", fmt.Errorf("rollout %s waits for no approval (%s); name a stage with --stage to approve it ahead", r.Name, r.Status.Phase)
			}
			s = r.Status.Stage
		}
		if !slices.ContainsFunc(r.Status.Stages, func(st fleet.RolloutStageStatus) bool { return st.Name == s }) {
			return "", fmt.Errorf("rollout %s has no stage %q", r.Name, s)
		}
		entry := r.Status.Revision + "/" + s
		if !slices.Contains(r.Spec.Approved, entry) {
			r.Spec.Approved = append(r.Spec.Approved, entry)
		}
		return fmt.Sprintf("approved stage %s of revision %s", s, r.Status.Revision), nil
	}
}

// Pause stops promotions; Resume lets them go on.
func Pause(paused bool) Action {
	return func(r *fleet.Rollout) (string, error) {
		r.Spec.Paused = paused
		if paused {
			return "paused", nil
		}
		return "resumed", nil
	}
}

// Abort stops the revision's rollout and rolls its updated clusters back.
func Abort(r *fleet.Rollout) (string, error) {
	switch r.Status.Phase {
	case fleet.RolloutComplete, fleet.RolloutRolledBack, fleet.RolloutAborted:
		return "", fmt.Errorf("rollout %s of revision %s is %s already", r.Name, r.Status.Revision, r.Status.Phase)
	}
	r.Spec.Abort = r.Status.Revision
	return fmt.Sprintf("aborting revision %s: updated clusters go back", r.Status.Revision), nil
}

// Retry starts a halted or aborted rollout again from its first stage.
func Retry(r *fleet.Rollout) (string, error) {
	switch r.Status.Phase {
	case fleet.RolloutHalted, fleet.RolloutRolledBack, fleet.RolloutAborted:
	default:
		return "", fmt.Errorf("rollout %s is %s: only a halted, rolled back or aborted rollout is retried", r.Name, r.Status.Phase)
	}
	r.Spec.Retry = max(r.Spec.Retry, r.Status.Retried) + 1
	if r.Spec.Abort == r.Status.Revision {
		r.Spec.Abort = ""
	}
	return fmt.Sprintf("retrying revision %s from its first stage", r.Status.Revision), nil
}
