package v1alpha1

import (
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="BundleDeployments-Ready",type=string,JSONPath=`.status.display.readyClusters`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// Bundle is one deployable unit: a set of Kubernetes manifests or a Helm chart with its options,
// and the clusters it targets. `fleet apply` creates Bundles from the folders of a git
// repository; the manager turns each into one BundleDeployment per targeted cluster.
type Bundle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BundleSpec   `json:"spec,omitempty"`
	Status BundleStatus `json:"status,omitempty"`
}

// BundleSpec is what to deploy, how, and where.
type BundleSpec struct {
	// BundleDeploymentOptions are the options every target gets unless a target customizes them.
	BundleDeploymentOptions `json:",inline"`

	// Paused stages new versions on every target without promoting them; the BundleDeployments
	// show OutOfSync until the Bundle is unpaused.
	Paused bool `json:"paused,omitempty"`

	// RolloutStrategy limits how many targets are updated at once.
	// +nullable
	RolloutStrategy *RolloutStrategy `json:"rolloutStrategy,omitempty"`

	// Resources are the files of the bundle (manifests, chart files, values, overlays).
	// +nullable
	Resources []BundleResource `json:"resources,omitempty"`

	// Targets select clusters and the option overrides each gets. Targets from fleet.yaml's
	// targetCustomizations come first, then the GitRepo's targets.
	// +nullable
	Targets []BundleTarget `json:"targets,omitempty"`

	// TargetRestrictions, when set, is an allow-list: a cluster is targeted only if it also
	// matches one of these. The GitRepo's targets become restrictions so a fleet.yaml cannot widen
	// where its GitRepo deploys.
	// +nullable
	TargetRestrictions []BundleTargetRestriction `json:"targetRestrictions,omitempty"`

	// TargetCustomizationMode decides how target customizations combine for a cluster matched by
	// several: FirstMatch (the default) applies only the first, AllMatches merges all in order.
	// +kubebuilder:validation:Enum=FirstMatch;AllMatches
	// +kubebuilder:default=FirstMatch
	// +optional
	TargetCustomizationMode string `json:"targetCustomizationMode,omitempty"`

	// DependsOn lists Bundles that must reach an accepted state on a cluster before this one is
	// deployed there.
	// +nullable
	DependsOn []BundleRef `json:"dependsOn,omitempty"`

	// ContentsID names contents stored in an OCI registry instead of Resources.
	ContentsID string `json:"contentsId,omitempty"`

	// ValuesHash is the sha256 of the Helm values moved from this Bundle into its values Secret.
	ValuesHash string `json:"valuesHash,omitempty"`

	// HelmOpOptions are set on Bundles created from a HelmOp: the agent downloads the chart itself.
	// +nullable
	HelmOpOptions *BundleHelmOptions `json:"helmOpOptions,omitempty"`
}

// BundleResource is one file of a Bundle.
type BundleResource struct {
	// Name is the file's path relative to the bundle's folder.
	Name string `json:"name,omitempty"`
	// Content is the file's data, encoded as Encoding says.
	Content string `json:"content,omitempty"`
	// Encoding is empty for plain text, "base64" or "base64+gz" for gzip-compressed base64.
	Encoding string `json:"encoding,omitempty"`
}

// BundleTarget selects clusters and customizes the options they get. Selection fields are
// combined with AND; an empty target matches nothing.
type BundleTarget struct {
	// BundleDeploymentOptions override the Bundle's options for matching clusters.
	BundleDeploymentOptions `json:",inline"`

	// Name identifies the target; target customizations and rollout partitions refer to it.
	Name string `json:"name,omitempty"`
	// ClusterName matches the Cluster with this name.
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector matches Clusters by their labels.
	// +nullable
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup matches the Clusters of the ClusterGroup with this name.
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector matches the Clusters of every ClusterGroup whose labels match.
	// +nullable
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
	// DoNotDeploy excludes the matching clusters: they get no BundleDeployment.
	DoNotDeploy bool `json:"doNotDeploy,omitempty"`
}

// BundleTargetRestriction is a selection a target must also match; see BundleSpec.TargetRestrictions.
type BundleTargetRestriction struct {
	// Name identifies the restriction, usually after the GitRepo target it came from.
	Name string `json:"name,omitempty"`
	// ClusterName matches the Cluster with this name.
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector matches Clusters by their labels.
	// +nullable
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup matches the Clusters of the ClusterGroup with this name.
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector matches the Clusters of every ClusterGroup whose labels match.
	// +nullable
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// BundleRef names a Bundle this one depends on, by name or by labels.
type BundleRef struct {
	// Name is the name of a Bundle in the same namespace.
	Name string `json:"name,omitempty"`
	// Selector matches Bundles in the same namespace by their labels.
	// +nullable
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// AcceptedStates are the states of the dependency that let this Bundle deploy; the default
	// is Ready only.
	// +kubebuilder:default={Ready}
	// +optional
	AcceptedStates []BundleState `json:"acceptedStates,omitempty"`
}

// BundleHelmOptions tell the agent where to download a HelmOp's chart.
type BundleHelmOptions struct {
	// SecretName names the Secret with credentials for the chart repository.
	SecretName string `json:"helmOpSecretName,omitempty"`
	// InsecureSkipTLSVerify disables TLS verification for the chart repository.
	InsecureSkipTLSVerify bool `json:"helmOpInsecureSkipTLSVerify,omitempty"`
	// CABundle is the PEM CA bundle that signs the chart repository's certificate.
	CABundle []byte `json:"helmOpCABundle,omitempty"`
}

// RolloutStrategy limits how fast a new version spreads over the targeted clusters. Targets are
// split into partitions (given, or made automatically); the manager promotes staged options
// partition by partition while the unavailable counts stay within the limits.
type RolloutStrategy struct {
	// MaxUnavailable is how many targets (a number or a percentage) may be unavailable before
	// promotions stop. Default 100%.
	// +nullable
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// MaxUnavailablePartitions is how many partitions (a number or a percentage) may be
	// unavailable before promotions stop. Default 0.
	// +nullable
	MaxUnavailablePartitions *intstr.IntOrString `json:"maxUnavailablePartitions,omitempty"`
	// AutoPartitionSize is the size of automatic partitions (a number or a percentage of the
	// targets). Default 25%.
	// +nullable
	AutoPartitionSize *intstr.IntOrString `json:"autoPartitionSize,omitempty"`
	// AutoPartitionThreshold is the number of targets from which automatic partitions are made;
	// below it all targets form one partition. Default 200.
	// +nullable
	AutoPartitionThreshold *int `json:"autoPartitionThreshold,omitempty"`
	// MaxNew is the largest number of BundleDeployments created in one pass. Default 50.
	// +nullable
	MaxNew *int `json:"maxNew,omitempty"`
	// Partitions are processed in order; clusters matched by none form a last partition.
	// +nullable
	Partitions []Partition `json:"partitions,omitempty"`
}

// Partition is a group of targeted clusters rolled out together.
type Partition struct {
	// Name identifies the partition in the Bundle's status.
	Name string `json:"name,omitempty"`
	// MaxUnavailable is how many clusters of this partition (a number or a percentage) may be
	// unavailable before the rollout stops at this partition; defaults to the strategy's.
	// +nullable
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// ClusterName matches the Cluster with this name.
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector matches Clusters by their labels.
	// +nullable
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup matches the Clusters of the ClusterGroup with this name.
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector matches the Clusters of every ClusterGroup whose labels match.
	// +nullable
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// BundleStatus is the roll-up of a Bundle's BundleDeployments, written by the manager.
type BundleStatus struct {
	// Conditions: Ready is True when every BundleDeployment is Ready; its message names the first
	// clusters that are not.
	// +nullable
	Conditions []genericcondition.GenericCondition `json:"conditions,omitempty"`
	// Summary counts the BundleDeployments by state.
	Summary BundleSummary `json:"summary,omitempty"`
	// NewlyCreated is the number of BundleDeployments created in the last pass.
	NewlyCreated int `json:"newlyCreated,omitempty"`
	// Unavailable is the number of targets not yet on the current version or not ready.
	Unavailable int `json:"unavailable"`
	// UnavailablePartitions is the number of partitions with too many unavailable targets.
	UnavailablePartitions int `json:"unavailablePartitions"`
	// MaxUnavailable is the rollout strategy's limit resolved to a number of targets.
	MaxUnavailable int `json:"maxUnavailable"`
	// MaxUnavailablePartitions is the rollout strategy's partition limit resolved to a number.
	MaxUnavailablePartitions int `json:"maxUnavailablePartitions"`
	// PartitionStatus reports each rollout partition.
	// +nullable
	PartitionStatus []PartitionStatus `json:"partitions,omitempty"`
	// Display holds short strings for tables and user interfaces.
	Display BundleDisplay `json:"display,omitempty"`
	// ResourceKey lists the resources this Bundle deploys.
	// +nullable
	ResourceKey []ResourceKey `json:"resourceKey,omitempty"`
	// ObservedGeneration is the Bundle generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration"`
	// ResourcesSHA256Sum is the sha256 of the Bundle's resources, for change detection.
	ResourcesSHA256Sum string `json:"resourcesSha256Sum,omitempty"`
	// OCIReference is where the contents are stored when an OCI registry holds them.
	OCIReference string `json:"ociReference,omitempty"`
}

// BundleDisplay holds a Bundle's status as short strings.
type BundleDisplay struct {
	// ReadyClusters is "ready/desired", counted in BundleDeployments.
	ReadyClusters string `json:"readyClusters,omitempty"`
	// State is the worst state among the BundleDeployments, empty when all are Ready.
	State string `json:"state,omitempty"`
}

// PartitionStatus reports one rollout partition.
type PartitionStatus struct {
	// Name is the partition's name.
	Name string `json:"name,omitempty"`
	// Count is the number of targets in the partition.
	Count int `json:"count,omitempty"`
	// MaxUnavailable is the partition's limit resolved to a number of targets.
	MaxUnavailable int `json:"maxUnavailable,omitempty"`
	// Unavailable is the number of the partition's targets that are unavailable.
	Unavailable int `json:"unavailable,omitempty"`
	// Summary counts the partition's BundleDeployments by state.
	Summary BundleSummary `json:"summary,omitempty"`
}

// ResourceKey identifies one deployed resource.
type ResourceKey struct {
	// Kind is the resource's kind.
	Kind string `json:"kind,omitempty"`
	// APIVersion is the resource's API version.
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace is the resource's namespace; empty for cluster-scoped resources.
	Namespace string `json:"namespace,omitempty"`
	// Name is the resource's name.
	Name string `json:"name,omitempty"`
}
