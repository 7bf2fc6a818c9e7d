package v1alpha1

// BundleSummary counts BundleDeployments by state. Bundles, GitRepos, Clusters and ClusterGroups
// roll their BundleDeployments up into one.
type BundleSummary struct {
	// NotReady is the number of BundleDeployments that are applied but have resources that are not
	// ready yet.
	NotReady int `json:"notReady,omitempty"`
	// WaitApplied is the number of BundleDeployments whose current deployment the agent has not
	// applied yet.
	WaitApplied int `json:"waitApplied,omitempty"`
	// ErrApplied is the number of BundleDeployments the agent failed to apply.
	ErrApplied int `json:"errApplied,omitempty"`
	// OutOfSync is the number of BundleDeployments with newer options staged than deployed.
	OutOfSync int `json:"outOfSync,omitempty"`
	// Modified is the number of BundleDeployments whose live resources drifted from the desired ones.
	Modified int `json:"modified,omitempty"`
	// Ready is the number of BundleDeployments that are applied, ready and unmodified.
	Ready int `json:"ready"`
	// Pending is the number of targets that have no BundleDeployment yet.
	Pending int `json:"pending,omitempty"`
	// DesiredReady is the number of BundleDeployments that should be ready.
	DesiredReady int `json:"desiredReady"`
	// NonReadyResources names up to ten BundleDeployments that are not ready, with the reasons.
	// +optional
	NonReadyResources []NonReadyResource `json:"nonReadyResources,omitempty"`
}

// NonReadyResource is one BundleDeployment that is not ready, as listed in a summary.
type NonReadyResource struct {
	// Name is the name of the BundleDeployment, or of the cluster it targets in cluster roll-ups.
	Name string `json:"name,omitempty"`
	// State is the BundleDeployment's state, such as NotReady or Modified.
	State BundleState `json:"bundleState,omitempty"`
	// Message explains the state, for example the deploy error.
	Message string `json:"message,omitempty"`
	// ModifiedStatus lists resources that drifted from the desired state.
	// +optional
	ModifiedStatus []ModifiedStatus `json:"modifiedStatus,omitempty"`
	// NonReadyStatus lists resources that are not ready.
	// +optional
	NonReadyStatus []NonReadyStatus `json:"nonReadyStatus,omitempty"`
}

// ModifiedStatus describes one deployed resource whose live state differs from the desired one.
type ModifiedStatus struct {
	// Kind is the resource's kind.
	Kind string `json:"kind,omitempty"`
	// APIVersion is the resource's API version.
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace is the resource's namespace; empty for cluster-scoped resources.
	Namespace string `json:"namespace,omitempty"`
	// Name is the resource's name.
	Name string `json:"name,omitempty"`
	// Create is true when the resource is missing and would be created.
	Create bool `json:"missing,omitempty"`
	// Delete is true when the resource is not desired any more and would be deleted.
	Delete bool `json:"delete,omitempty"`
	// Exist is true when the resource exists but was not created by this deployment.
	Exist bool `json:"exist,omitempty"`
	// Patch is the JSON patch that would bring the live resource back to the desired state.
	Patch string `json:"patch,omitempty"`
}

// NonReadyStatus describes one deployed resource that is not ready.
type NonReadyStatus struct {
	// UID is the resource's UID.
	UID string `json:"uid,omitempty"`
	// Kind is the resource's kind.
	Kind string `json:"kind,omitempty"`
	// APIVersion is the resource's API version.
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace is the resource's namespace; empty for cluster-scoped resources.
	Namespace string `json:"namespace,omitempty"`
	// Name is the resource's name.
	Name string `json:"name,omitempty"`
	// Summary is the resource's readiness summary.
	Summary Summary `json:"summary,omitempty"`
}

// Summary is the readiness of one resource, derived from its status and conditions.
type Summary struct {
	// State is a short word for the resource's state, such as "in-progress" or "error".
	State string `json:"state,omitempty"`
	// Error is true when the resource reports a failure.
	Error bool `json:"error,omitempty"`
	// Transitioning is true while the resource is still converging.
	Transitioning bool `json:"transitioning,omitempty"`
	// Message holds the messages of the conditions that are not ready.
	// +optional
	Message []string `json:"message,omitempty"`
}

// ResourceCounts counts deployed resources by state, over one or many BundleDeployments.
type ResourceCounts struct {
	// Ready is the number of resources that are ready.
	Ready int `json:"ready"`
	// DesiredReady is the number of resources that should be ready.
	DesiredReady int `json:"desiredReady"`
	// WaitApplied is the number of resources not applied yet.
	WaitApplied int `json:"waitApplied"`
	// Modified is the number of resources that drifted from the desired state.
	Modified int `json:"modified"`
	// Orphaned is the number of resources still deployed though no longer desired.
	Orphaned int `json:"orphaned"`
	// Missing is the number of desired resources that do not exist.
	Missing int `json:"missing"`
	// Unknown is the number of resources whose state cannot be determined.
	Unknown int `json:"unknown"`
	// NotReady is the number of resources that exist but are not ready.
	NotReady int `json:"notReady"`
}

// CorrectDrift configures drift correction: the agent puts modified resources back into their
// desired state.
type CorrectDrift struct {
	// Enabled turns drift correction on.
	Enabled bool `json:"enabled,omitempty"`
	// Force deletes and recreates resources that cannot be patched back (helm rollback --force).
	Force bool `json:"force,omitempty"`
	// KeepFailHistory keeps the Helm history of failed corrections.
	KeepFailHistory bool `json:"keepFailHistory,omitempty"`
}
