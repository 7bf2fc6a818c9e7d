package v1alpha1

import (
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Bundles-Ready",type=string,JSONPath=`.status.display.readyBundles`
// +kubebuilder:printcolumn:name="Last-Seen",type=string,JSONPath=`.status.agent.lastSeen`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// Cluster is a downstream cluster registered with the manager. Its labels are what targets
// select; its agent reads the BundleDeployments in the Cluster's own namespace (status.namespace)
// and reports back here.
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterSpec   `json:"spec,omitempty"`
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterSpec is set by users or by registration; the agent settings apply when the manager
// deploys the agent.
type ClusterSpec struct {
	// Paused stops new deployments to this cluster; BundleDeployments keep their current version.
	Paused bool `json:"paused,omitempty"`

	// ClientID is the agent's identity (by default the downstream kube-system namespace's UID);
	// a registration presenting it maps to this Cluster.
	ClientID string `json:"clientID,omitempty"`

	// KubeConfigSecret names a Secret (key "value") with a kubeconfig for the cluster: the
	// manager then installs the agent itself.
	KubeConfigSecret string `json:"kubeConfigSecret,omitempty"`

	// KubeConfigSecretNamespace is the namespace of KubeConfigSecret; default the Cluster's.
	KubeConfigSecretNamespace string `json:"kubeConfigSecretNamespace,omitempty"`

	// RedeployAgentGeneration redeploys the agent when increased.
	RedeployAgentGeneration int64 `json:"redeployAgentGeneration,omitempty"`

	// AgentEnvVars are extra environment variables of the agent.
	// +nullable
	AgentEnvVars []corev1.EnvVar `json:"agentEnvVars,omitempty"`

	// AgentNamespace is the downstream namespace the agent runs in.
	AgentNamespace string `json:"agentNamespace,omitempty"`

	// PrivateRepoURL prefixes the agent's image with a private registry.
	PrivateRepoURL string `json:"privateRepoURL,omitempty"`

	// TemplateValues are values available to templated Helm values as .ClusterValues.
	// +nullable
	TemplateValues *GenericMap `json:"templateValues,omitempty"`

	// AgentTolerations are added to the agent's Pod.
	// +nullable
	AgentTolerations []corev1.Toleration `json:"agentTolerations,omitempty"`

	// AgentAffinity replaces the agent Pod's default affinity.
	// +nullable
	AgentAffinity *corev1.Affinity `json:"agentAffinity,omitempty"`

	// AgentResources are the agent container's resource requests and limits.
	// +nullable
	AgentResources *corev1.ResourceRequirements `json:"agentResources,omitempty"`

	// AgentPullSecrets are image pull Secrets of the agent's Pod.
	// +nullable
	AgentPullSecrets []corev1.LocalObjectReference `json:"agentPullSecrets,omitempty"`

	// AgentSchedulingCustomization adds a PriorityClass and a PodDisruptionBudget for the agent.
	// +nullable
	AgentSchedulingCustomization *AgentSchedulingCustomization `json:"agentSchedulingCustomization,omitempty"`

	// HostNetwork runs the agent in the host's network namespace.
	// +nullable
	HostNetwork *bool `json:"hostNetwork,omitempty"`
}

// AgentSchedulingCustomization tunes how the agent's Pod is scheduled and disrupted.
type AgentSchedulingCustomization struct {
	// PriorityClass, when set, makes the manager create a PriorityClass for the agent.
	// +nullable
	PriorityClass *PriorityClassSpec `json:"priorityClass,omitempty"`
	// PodDisruptionBudget, when set, makes the manager create a PodDisruptionBudget for the agent.
	// +nullable
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`
}

// PriorityClassSpec is the agent's PriorityClass.
type PriorityClassSpec struct {
	// Value is the priority of the agent's Pod.
	Value int `json:"value"`
	// PreemptionPolicy says whether the agent may preempt lower-priority Pods.
	// +kubebuilder:validation:Enum=PreemptLowerPriority;Never
	// +optional
	PreemptionPolicy *corev1.PreemptionPolicy `json:"preemptionPolicy,omitempty"`
}

// PodDisruptionBudgetSpec is the agent's PodDisruptionBudget; set one of the two fields.
type PodDisruptionBudgetSpec struct {
	// MinAvailable is how many agent Pods (a number or a percentage) must stay available.
	MinAvailable string `json:"minAvailable,omitempty"`
	// MaxUnavailable is how many agent Pods (a number or a percentage) may be unavailable.
	MaxUnavailable string `json:"maxUnavailable,omitempty"`
}

// ClusterStatus is written by the manager (roll-ups, namespace, agent deployment) and, for
// Agent, by the cluster's agent.
type ClusterStatus struct {
	// Conditions: Ready (all BundleDeployments ready), Processed and Imported.
	// +nullable
	Conditions []genericcondition.GenericCondition `json:"conditions,omitempty"`
	// Namespace is the cluster's namespace on the manager, holding its BundleDeployments.
	Namespace string `json:"namespace,omitempty"`
	// Summary counts the cluster's BundleDeployments by state.
	Summary BundleSummary `json:"summary,omitempty"`
	// ResourceCounts counts the cluster's deployed resources by state.
	ResourceCounts ResourceCounts `json:"resourceCounts,omitempty"`
	// ReadyGitRepos is the number of GitRepos whose BundleDeployments here are all ready.
	ReadyGitRepos int `json:"readyGitRepos"`
	// DesiredReadyGitRepos is the number of GitRepos deploying here.
	DesiredReadyGitRepos int `json:"desiredReadyGitRepos"`
	// ReadyHelmOps is the number of HelmOps whose BundleDeployments here are all ready.
	ReadyHelmOps int `json:"readyHelmOps"`
	// DesiredReadyHelmOps is the number of HelmOps deploying here.
	DesiredReadyHelmOps int `json:"desiredReadyHelmOps"`
	// Display holds short strings for tables and user interfaces.
	Display ClusterDisplay `json:"display,omitempty"`
	// Agent is written by the agent: its last check-in.
	Agent AgentStatus `json:"agent,omitempty"`

	// AgentEnvVarsHash fingerprints the agent environment last deployed.
	AgentEnvVarsHash string `json:"agentEnvVarsHash,omitempty"`
	// AgentPrivateRepoURL is the private registry prefix last deployed.
	AgentPrivateRepoURL string `json:"agentPrivateRepoURL,omitempty"`
	// AgentDeployedGeneration is the RedeployAgentGeneration last deployed.
	// +nullable
	AgentDeployedGeneration *int64 `json:"agentDeployedGeneration,omitempty"`
	// AgentMigrated records a one-time agent migration.
	AgentMigrated bool `json:"agentMigrated,omitempty"`
	// AgentNamespaceMigrated records a one-time agent namespace migration.
	AgentNamespaceMigrated bool `json:"agentNamespaceMigrated,omitempty"`
	// CattleNamespaceMigrated records a one-time namespace migration.
	CattleNamespaceMigrated bool `json:"cattleNamespaceMigrated,omitempty"`
	// AgentAffinityHash fingerprints the agent affinity last deployed.
	AgentAffinityHash string `json:"agentAffinityHash,omitempty"`
	// AgentResourcesHash fingerprints the agent resources last deployed.
	AgentResourcesHash string `json:"agentResourcesHash,omitempty"`
	// AgentTolerationsHash fingerprints the agent tolerations last deployed.
	AgentTolerationsHash string `json:"agentTolerationsHash,omitempty"`
	// AgentSchedulingCustomizationHash fingerprints the scheduling customization last deployed.
	AgentSchedulingCustomizationHash string `json:"agentSchedulingCustomizationHash,omitempty"`
	// AgentHostNetwork is the host-network setting last deployed.
	AgentHostNetwork bool `json:"agentHostNetwork,omitempty"`
	// AgentConfigChanged is true while a changed agent configuration is being deployed.
	AgentConfigChanged bool `json:"agentConfigChanged,omitempty"`
	// APIServerURL is the manager URL the agent was deployed with.
	APIServerURL string `json:"apiServerURL,omitempty"`
	// APIServerCAHash fingerprints the manager CA the agent was deployed with.
	APIServerCAHash string `json:"apiServerCAHash,omitempty"`
	// AgentTLSMode is how the agent verifies the manager: system-store or strict.
	AgentTLSMode string `json:"agentTLSMode,omitempty"`
	// GarbageCollectionInterval is how often the agent removes releases of deleted deployments.
	// +nullable
	GarbageCollectionInterval *metav1.Duration `json:"garbageCollectionInterval,omitempty"`

	// ActiveSchedule is true when a Schedule applies to this cluster.
	ActiveSchedule bool `json:"activeSchedule,omitempty"`
	// Scheduled is true when deployments are gated by a Schedule.
	Scheduled bool `json:"scheduled,omitempty"`
}

// ClusterDisplay holds a Cluster's status as short strings.
type ClusterDisplay struct {
	// ReadyBundles is "ready/desired", counted in BundleDeployments.
	ReadyBundles string `json:"readyBundles,omitempty"`
	// State is the worst BundleDeployment state, or WaitCheckIn before the agent's first check-in.
	State string `json:"state,omitempty"`
}

// AgentStatus is the agent's check-in.
type AgentStatus struct {
	// LastSeen is when the agent last checked in.
	// +nullable
	LastSeen metav1.Time `json:"lastSeen"`
	// Namespace is the downstream namespace the agent runs in.
	Namespace string `json:"namespace"`
	// ReadyNodes counts the downstream cluster's Ready nodes at the last check-in.
	ReadyNodes int `json:"readyNodes,omitempty"`
	// NonReadyNodes counts its nodes that were not Ready.
	NonReadyNodes int `json:"nonReadyNodes,omitempty"`
	// SealingKey is the public half of the key pair the agent made in its cluster (an age
	// X25519 recipient): secrets for this cluster alone are sealed to it. This
	// implementation's; Fleet's tools ignore it.
	SealingKey string `json:"sealingKey,omitempty"`
}
