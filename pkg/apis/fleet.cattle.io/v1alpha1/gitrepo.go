package v1alpha1

import (
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,path=gitrepos
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Repo",type=string,JSONPath=`.spec.repo`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.status.commit`
// +kubebuilder:printcolumn:name="BundleDeployments-Ready",type=string,JSONPath=`.status.display.readyBundleDeployments`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// GitRepo is a git repository the manager watches. Every new commit of the branch (or the pinned
// revision) is cloned, and the folders under Paths become Bundles deployed to the Targets.
type GitRepo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GitRepoSpec   `json:"spec,omitempty"`
	Status GitRepoStatus `json:"status,omitempty"`
}

// GitRepoSpec says which repository to watch, how to reach it and where its bundles go.
type GitRepoSpec struct {
	// Repo is the repository's URL (https://, http:// or an SSH address).
	Repo string `json:"repo,omitempty"`

	// Branch is the branch to follow; "master" when neither Branch nor Revision is set.
	Branch string `json:"branch,omitempty"`

	// Revision pins a commit or tag; it takes precedence over Branch.
	Revision string `json:"revision,omitempty"`

	// TargetNamespace forces every resource of every bundle into this namespace; bundles with
	// cluster-scoped resources then fail.
	TargetNamespace string `json:"targetNamespace,omitempty"`

	// ClientSecretName names a Secret in the GitRepo's namespace with the git credentials: type
	// kubernetes.io/basic-auth or kubernetes.io/ssh-auth (optionally with known_hosts).
	ClientSecretName string `json:"clientSecretName,omitempty"`

	// HelmSecretName names a Secret with credentials for Helm chart repositories and registries.
	HelmSecretName string `json:"helmSecretName,omitempty"`

	// HelmSecretNameForPaths names a Secret holding Helm credentials per bundle path.
	HelmSecretNameForPaths string `json:"helmSecretNameForPaths,omitempty"`

	// HelmRepoURLRegex limits the Helm credentials to chart URLs matching this regular expression.
	HelmRepoURLRegex string `json:"helmRepoURLRegex,omitempty"`

	// CABundle is a PEM bundle of CAs to trust for the git server (and Helm repositories).
	CABundle []byte `json:"caBundle,omitempty"`

	// InsecureSkipTLSVerify turns off TLS verification for the git server.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`

	// Paths are the folders of the repository to turn into bundles, relative to its root; globs
	// are allowed. Empty means the root.
	// +nullable
	Paths []string `json:"paths,omitempty"`

	// Paused stops changes from reaching the clusters: bundles are updated but their
	// BundleDeployments stay OutOfSync until unpaused.
	Paused bool `json:"paused,omitempty"`

	// ServiceAccount is the downstream ServiceAccount agents deploy as.
	ServiceAccount string `json:"serviceAccount,omitempty"`

	// Targets choose the clusters to deploy to. With none, the cluster group "default" of the
	// GitRepo's namespace is targeted.
	// +nullable
	Targets []GitTarget `json:"targets,omitempty"`

	// PollingInterval is how often the remote is asked for a new commit; default 15s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +nullable
	PollingInterval *metav1.Duration `json:"pollingInterval,omitempty"`

	// DisablePolling stops polling: only webhooks start new runs.
	DisablePolling bool `json:"disablePolling,omitempty"`

	// ForceSyncGeneration reruns the clone-and-apply and redeploys when increased.
	ForceSyncGeneration int64 `json:"forceSyncGeneration,omitempty"`

	// ImageScanInterval is how often image scans of this repository run.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +nullable
	ImageScanInterval *metav1.Duration `json:"imageScanInterval,omitempty"`

	// ImageScanCommit is the author and message of commits written by image scans.
	ImageScanCommit CommitSpec `json:"imageScanCommit,omitempty"`

	// KeepResources keeps the deployed resources when the GitRepo or one of its bundles is deleted.
	KeepResources bool `json:"keepResources,omitempty"`

	// DeleteNamespace deletes the namespaces the bundles created when they are removed.
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`

	// CorrectDrift puts drifted resources back to their desired state.
	// +nullable
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`

	// OCIRegistrySecret names a Secret describing an OCI registry that stores the bundles'
	// contents instead of the cluster.
	OCIRegistrySecret string `json:"ociRegistrySecret,omitempty"`

	// WebhookSecret names a Secret with the token that webhook calls for this GitRepo must carry.
	WebhookSecret string `json:"webhookSecret,omitempty"`

	// Bundles lists bundle folders explicitly, with their options files, instead of scanning Paths.
	// +nullable
	Bundles []BundlePath `json:"bundles,omitempty"`
}

// GitTarget selects clusters for a GitRepo's bundles. Its fields combine with AND.
type GitTarget struct {
	// Name identifies the target; fleet.yaml target customizations may refer to it.
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

// BundlePath is one explicitly listed bundle folder.
type BundlePath struct {
	// Base is the bundle's folder, relative to the repository's root.
	Base string `json:"base,omitempty"`
	// Options is the path of the fleet.yaml-like options file, relative to Base.
	Options string `json:"options,omitempty"`
}

// CommitSpec describes commits written back to the repository.
type CommitSpec struct {
	// AuthorName is the commits' author name.
	AuthorName string `json:"authorName,omitempty"`
	// AuthorEmail is the commits' author e-mail address.
	AuthorEmail string `json:"authorEmail,omitempty"`
	// MessageTemplate is a Go template for the commit message.
	MessageTemplate string `json:"messageTemplate,omitempty"`
}

// GitRepoStatus is written by the manager: the commits seen, the last run's outcome and the
// roll-up of every BundleDeployment of the repository.
type GitRepoStatus struct {
	StatusBase `json:",inline"`

	// ObservedGeneration is the generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration"`
	// UpdateGeneration is the generation whose bundles were last written.
	UpdateGeneration int64 `json:"updateGeneration,omitempty"`
	// Commit is the commit whose bundles are current.
	Commit string `json:"commit,omitempty"`
	// PollingCommit is the branch head the last poll saw.
	PollingCommit string `json:"pollingCommit,omitempty"`
	// WebhookCommit is the commit the last webhook announced.
	WebhookCommit string `json:"webhookCommit,omitempty"`
	// GitJobStatus is the last run's state: Current, InProgress or Failed.
	GitJobStatus string `json:"gitJobStatus,omitempty"`
	// LastSyncedImageScanTime is when image scans last wrote to the repository.
	// +nullable
	LastSyncedImageScanTime metav1.Time `json:"lastSyncedImageScanTime,omitempty"`
	// LastPollingTime is when the remote was last polled.
	// +nullable
	LastPollingTime metav1.Time `json:"lastPollingTriggered,omitempty"`
	// LastWebhookTime is when the last webhook for this GitRepo arrived.
	// +nullable
	LastWebhookTime metav1.Time `json:"lastWebhookTime,omitempty"`
}

// StatusBase is the roll-up status shared by kinds that produce Bundles.
type StatusBase struct {
	// ReadyClusters is the number of clusters where every BundleDeployment is ready.
	ReadyClusters int `json:"readyClusters"`
	// DesiredReadyClusters is the number of clusters that should be ready.
	DesiredReadyClusters int `json:"desiredReadyClusters"`
	// Summary counts the BundleDeployments by state.
	Summary BundleSummary `json:"summary,omitempty"`
	// Display holds short strings for tables and user interfaces.
	Display StatusDisplay `json:"display,omitempty"`
	// Conditions: Ready, Accepted, GitPolling, Reconciling and Stalled.
	// +nullable
	Conditions []genericcondition.GenericCondition `json:"conditions,omitempty"`
	// Resources lists the deployed resources and their state on each cluster.
	// +nullable
	Resources []GitRepoResource `json:"resources,omitempty"`
	// ResourceCounts counts the deployed resources by state, over all clusters.
	ResourceCounts ResourceCounts `json:"resourceCounts,omitempty"`
	// PerClusterResourceCounts counts the deployed resources by state, per cluster.
	// +nullable
	PerClusterResourceCounts map[string]*ResourceCounts `json:"perClusterResourceCounts,omitempty"`
}

// StatusDisplay holds a roll-up as short strings.
type StatusDisplay struct {
	// ReadyBundleDeployments is "ready/desired", counted in BundleDeployments.
	ReadyBundleDeployments string `json:"readyBundleDeployments,omitempty"`
	// State is the worst state among the BundleDeployments, or GitUpdating during a run.
	State string `json:"state,omitempty"`
	// Message explains the state.
	Message string `json:"message,omitempty"`
	// Error is true when the state is an error.
	Error bool `json:"error,omitempty"`
}

// GitRepoResource is one deployed resource and its state across clusters.
type GitRepoResource struct {
	// APIVersion is the resource's API version.
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind is the resource's kind.
	Kind string `json:"kind,omitempty"`
	// Type is the resource's type as user interfaces name it.
	Type string `json:"type,omitempty"`
	// ID is "namespace/name", identifying the resource across clusters.
	ID string `json:"id,omitempty"`
	// Namespace is the resource's namespace.
	Namespace string `json:"namespace,omitempty"`
	// Name is the resource's name.
	Name string `json:"name,omitempty"`
	// State is the resource's worst state across clusters.
	State string `json:"state,omitempty"`
	// Error is true when the state is an error.
	Error bool `json:"error,omitempty"`
	// Transitioning is true while the resource is converging.
	Transitioning bool `json:"transitioning,omitempty"`
	// Message explains the state.
	Message string `json:"message,omitempty"`
	// PerClusterState lists, per state, the clusters where the resource is in it.
	PerClusterState PerClusterState `json:"perClusterState,omitempty"`
	// IncompleteState is true when the per-cluster lists were cut at their limit.
	IncompleteState bool `json:"incompleteState,omitempty"`
}

// PerClusterState lists clusters (as namespace/name) by the state a resource has there.
type PerClusterState struct {
	// Ready lists clusters where the resource is ready.
	Ready []string `json:"ready,omitempty"`
	// WaitApplied lists clusters where it is not applied yet.
	WaitApplied []string `json:"waitApplied,omitempty"`
	// Pending lists clusters where it is pending.
	Pending []string `json:"pending,omitempty"`
	// Modified lists clusters where it drifted.
	Modified []string `json:"modified,omitempty"`
	// NotReady lists clusters where it is not ready.
	NotReady []string `json:"notReady,omitempty"`
	// Orphaned lists clusters where it is deployed but no longer desired.
	Orphaned []string `json:"orphaned,omitempty"`
	// Missing lists clusters where it is desired but absent.
	Missing []string `json:"missing,omitempty"`
	// Unknown lists clusters where its state is unknown.
	Unknown []string `json:"unknown,omitempty"`
}
