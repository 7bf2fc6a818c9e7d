package v1alpha1

// BundleState is the state of a BundleDeployment, and of roll-ups of many of them.
// +kubebuilder:validation:Enum=Ready;NotReady;WaitApplied;ErrApplied;OutOfSync;Pending;Modified
type BundleState string

// The states, from best to worst as ranked by StateRank.
const (
	// Ready: applied, all resources ready, nothing drifted.
	Ready BundleState = "Ready"
	// NotReady: applied, but some resource is not ready.
	NotReady BundleState = "NotReady"
	// Pending: a target has no BundleDeployment yet (only in summaries).
	Pending BundleState = "Pending"
	// OutOfSync: newer options are staged but not promoted (paused, rollout limits).
	OutOfSync BundleState = "OutOfSync"
	// Modified: applied and ready, but live resources drifted from the desired state.
	Modified BundleState = "Modified"
	// WaitApplied: the agent has not applied the current deployment yet.
	WaitApplied BundleState = "WaitApplied"
	// ErrApplied: the agent tried to apply the current deployment and failed.
	ErrApplied BundleState = "ErrApplied"
)

// StateRank orders states from best (1) to worst; a roll-up shows its worst member's state.
var StateRank = map[BundleState]int{
	ErrApplied:  7,
	WaitApplied: 6,
	Modified:    5,
	OutOfSync:   4,
	Pending:     3,
	NotReady:    2,
	Ready:       1,
}
