package v1alpha1

import (
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,shortName=bd
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Deployed",type=string,JSONPath=`.status.display.deployed`
// +kubebuilder:printcolumn:name="Monitored",type=string,JSONPath=`.status.display.monitored`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// BundleDeployment is a Bundle bound to one cluster. It lives in that cluster's namespace on the
// manager, where the cluster's agent reads it, deploys it and writes its status back.
type BundleDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BundleDeploymentSpec   `json:"spec,omitempty"`
	Status BundleDeploymentStatus `json:"status,omitempty"`
}

// BundleDeploymentSpec is written by the manager. A rollout first stages new options, then
// promotes them to Options and DeploymentID when the strategy allows.
type BundleDeploymentSpec struct {
	// Paused stops the agent from deploying changes.
	Paused bool `json:"paused,omitempty"`

	// StagedOptions are the newest options, not necessarily promoted yet.
	StagedOptions BundleDeploymentOptions `json:"stagedOptions,omitempty"`

	// StagedDeploymentID identifies the staged manifest and options ("contentID:optionsHash").
	StagedDeploymentID string `json:"stagedDeploymentID,omitempty"`

	// Options are the options the agent deploys with.
	Options BundleDeploymentOptions `json:"options,omitempty"`

	// DeploymentID identifies what the agent must deploy: the Content name and the hash of
	// Options. The agent deploys whenever it differs from status.appliedDeploymentID.
	DeploymentID string `json:"deploymentID,omitempty"`

	// DependsOn lists Bundles that must be in an accepted state on this cluster first.
	// +nullable
	DependsOn []BundleRef `json:"dependsOn,omitempty"`

	// CorrectDrift puts drifted resources back to their desired state.
	// +nullable
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`

	// OCIContents is true when the manifest is stored in an OCI registry, not in a Content.
	OCIContents bool `json:"ociContents,omitempty"`

	// HelmChartOptions tell the agent where to download a HelmOp's chart.
	// +nullable
	HelmChartOptions *BundleHelmOptions `json:"helmChartOptions,omitempty"`

	// OffSchedule is true while the cluster is outside its deployment schedule window.
	OffSchedule bool `json:"offSchedule,omitempty"`

	// ValuesHash is the sha256 of the Helm values held in the options Secret.
	ValuesHash string `json:"valuesHash,omitempty"`

	// WaitingForValues is true until the options Secret with the values exists.
	WaitingForValues bool `json:"waitingForValues,omitempty"`

	// DownstreamResourcesGeneration changes when a copied downstream resource changes, so the
	// agent copies it again.
	DownstreamResourcesGeneration int `json:"downstreamResourcesGeneration,omitempty"`

	// SealedFiles are the bundle's SOPS-encrypted files, decrypted by the manager and sealed to
	// this cluster's sealing key (its agent's status.agent.sealingKey): the agent unseals each
	// in place of the file's ciphertext. This implementation's; Fleet's tools ignore it.
	// +nullable
	SealedFiles []SealedFile `json:"sealedFiles,omitempty"`
}

// SealedFile is one SOPS file of a bundle sealed to one cluster (internal/sealing), bound to its
// BundleDeployment and name: it unseals nowhere else.
type SealedFile struct {
	// Name is the file's name in the bundle.
	Name string `json:"name"`
	// Sealed is the decrypted file, sealed.
	Sealed []byte `json:"sealed"`
	// Source fingerprints what was sealed (the file's ciphertext, the key sealed to, the
	// binding, the Context): the manager seals again only when it changes.
	Source string `json:"source"`
	// Context fingerprints what the file's "${ }" templates saw of the cluster (empty: it has
	// none).
	Context string `json:"context,omitempty"`
}

// BundleDeploymentStatus is written by the agent (deploy results, readiness, drift) and by the
// manager (display strings).
type BundleDeploymentStatus struct {
	// Conditions: Deployed (the last deploy succeeded), Installed (Helm accepted the release),
	// Monitored (readiness and drift were checked) and Ready.
	// +nullable
	Conditions []genericcondition.GenericCondition `json:"conditions,omitempty"`

	// AppliedDeploymentID is the deploymentID the agent last deployed successfully.
	AppliedDeploymentID string `json:"appliedDeploymentID,omitempty"`

	// Release is the Helm release as "namespace/name:revision".
	Release string `json:"release,omitempty"`

	// Ready is true when every deployed resource is ready.
	Ready bool `json:"ready,omitempty"`

	// NonModified is true when no deployed resource drifted from its desired state.
	NonModified bool `json:"nonModified,omitempty"`

	// NonReadyStatus lists up to ten resources that are not ready.
	// +nullable
	NonReadyStatus []NonReadyStatus `json:"nonReadyStatus,omitempty"`

	// ModifiedStatus lists up to ten resources that drifted.
	// +nullable
	ModifiedStatus []ModifiedStatus `json:"modifiedStatus,omitempty"`

	// IncompleteState is true when the lists above were cut at their limit.
	IncompleteState bool `json:"incompleteState,omitempty"`

	// Display holds short strings for tables and user interfaces.
	Display BundleDeploymentDisplay `json:"display,omitempty"`

	// SyncGeneration is the forceSyncGeneration the agent last deployed.
	// +nullable
	SyncGeneration *int64 `json:"syncGeneration,omitempty"`

	// Resources lists the deployed resources.
	// +nullable
	Resources []BundleDeploymentResource `json:"resources,omitempty"`

	// ResourceCounts counts the deployed resources by state.
	// +nullable
	ResourceCounts *ResourceCounts `json:"resourceCounts,omitempty"`

	// DownstreamResourcesGeneration is the spec's value the agent last copied resources for.
	DownstreamResourcesGeneration int `json:"downstreamResourcesGeneration,omitempty"`
}

// BundleDeploymentDisplay holds a BundleDeployment's status as short strings.
type BundleDeploymentDisplay struct {
	// Deployed is "Yes" or the deploy error.
	Deployed string `json:"deployed,omitempty"`
	// Monitored is "Yes" or why monitoring failed.
	Monitored string `json:"monitored,omitempty"`
	// State is the BundleDeployment's state; the apiserver refuses any other (an agent's
	// garbage is rejected with the field's path).
	// +kubebuilder:validation:Enum=Ready;NotReady;Pending;OutOfSync;Modified;WaitApplied;ErrApplied
	State string `json:"state,omitempty"`
}

// BundleDeploymentResource is one deployed resource.
type BundleDeploymentResource struct {
	// Kind is the resource's kind.
	Kind string `json:"kind,omitempty"`
	// APIVersion is the resource's API version.
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace is the resource's namespace; empty for cluster-scoped resources.
	Namespace string `json:"namespace,omitempty"`
	// Name is the resource's name.
	Name string `json:"name,omitempty"`
	// CreatedAt is when the resource was created.
	CreatedAt metav1.Time `json:"createdAt,omitempty"`
}

// Applied says the agent deployed what spec asks for: spec has a deploymentID (one held back
// by its Bundle has none) and status reports that one applied. Fleet's states compare the two
// IDs alone (an empty one included); the rollout, gates, the monitor and agent management ask
// this.
func Applied(spec *BundleDeploymentSpec, status *BundleDeploymentStatus) bool {
	return spec.DeploymentID != "" && status.AppliedDeploymentID == spec.DeploymentID
}
