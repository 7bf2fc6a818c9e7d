package v1alpha1

// Label and annotation keys, namespaces, Secret types and finalizers. Their values are Fleet's,
// so objects written by Fleet and by this implementation are interchangeable.
const (
	// RepoLabel names the GitRepo a Bundle (and its BundleDeployments) came from.
	RepoLabel = "fleet.cattle.io/repo-name"
	// CommitLabel is the git commit a Bundle was built from.
	CommitLabel = "fleet.cattle.io/commit"
	// BundleLabel names the Bundle of a BundleDeployment.
	BundleLabel = "fleet.cattle.io/bundle-name"
	// BundleNamespaceLabel is the namespace of the Bundle of a BundleDeployment.
	BundleNamespaceLabel = "fleet.cattle.io/bundle-namespace"
	// ClusterLabel names the Cluster a BundleDeployment or cluster namespace belongs to.
	ClusterLabel = "fleet.cattle.io/cluster"
	// ClusterNamespaceLabel is the namespace of that Cluster.
	ClusterNamespaceLabel = "fleet.cattle.io/cluster-namespace"
	// ContentNameLabel names the Content a BundleDeployment deploys, so Contents can be
	// reference-counted from an index.
	ContentNameLabel = "fleet.cattle.io/content-name"
	// ManagedLabel marks namespaces and objects the manager created and may delete.
	ManagedLabel = "fleet.cattle.io/managed"
	// HelmNameLabel is the Helm release name of a BundleDeployment.
	HelmNameLabel = "fleet.cattle.io/fleet-helm-name"
	// ShardLabel assigns an object to the controller shard with that ID.
	ShardLabel = "fleet.cattle.io/shard-ref"
	// ClusterRegistrationLabel names the ClusterRegistration a ServiceAccount was made for.
	ClusterRegistrationLabel = "fleet.cattle.io/cluster-registration"
	// ClusterRegistrationNamespaceLabel is that ClusterRegistration's namespace.
	ClusterRegistrationNamespaceLabel = "fleet.cattle.io/cluster-registration-namespace"
	// CreatedByAgentPodLabel is the one fleet.cattle.io label an agent may set on its Cluster.
	CreatedByAgentPodLabel = "fleet.cattle.io/created-by-agent-pod"

	// BundleIDAnnotation is set on deployed Helm charts: the BundleDeployment's bundle ID.
	BundleIDAnnotation = "fleet.cattle.io/bundle-id"
	// CommitAnnotation is set on deployed Helm charts: the commit they were built from.
	CommitAnnotation = "fleet.cattle.io/commit"
	// AgentNamespaceAnnotation records the namespace the agent runs in.
	AgentNamespaceAnnotation = "fleet.cattle.io/agent-namespace"
)

// Namespaces with fixed roles.
const (
	// LocalNamespace holds the manager cluster's own Cluster ("local") and its GitRepos.
	LocalNamespace = "fleet-local"
	// DefaultNamespace holds downstream Clusters and the GitRepos that target them.
	DefaultNamespace = "fleet-default"
	// SystemNamespace is where the manager and the agent run.
	SystemNamespace = "cattle-fleet-system"
	// ClustersSystemNamespace holds registration Secrets handed to agents.
	ClustersSystemNamespace = "cattle-fleet-clusters-system"
	// DefaultClusterGroup is the ClusterGroup targeted when a GitRepo names no target.
	DefaultClusterGroup = "default"
)

// Secret types.
const (
	// SecretTypeBundleValues holds a Bundle's Helm values outside the Bundle object.
	SecretTypeBundleValues = "fleet.cattle.io/bundle-values/v1alpha1"
	// SecretTypeBundleDeploymentOptions holds a BundleDeployment's options and values.
	SecretTypeBundleDeploymentOptions = "fleet.cattle.io/bundle-deployment/v1alpha1"
	// SecretTypeRevisionValues holds the Helm values of revisions a BundleRevision or a Rollout
	// keeps (ours).
	SecretTypeRevisionValues = "fleet.cattle.io/revision-values/v1alpha1"
)

// Finalizers that order cleanup.
const (
	// GitRepoFinalizer lets the manager delete a GitRepo's Bundles first.
	GitRepoFinalizer = "fleet.cattle.io/gitrepo-finalizer"
	// BundleFinalizer lets the manager delete a Bundle's BundleDeployments first.
	BundleFinalizer = "fleet.cattle.io/bundle-finalizer"
	// BundleDeploymentFinalizer lets the agent uninstall the release first.
	BundleDeploymentFinalizer = "fleet.cattle.io/bundle-deployment-finalizer"
	// ClusterFinalizer lets the manager delete a Cluster's namespace and BundleDeployments first.
	ClusterFinalizer = "fleet.cattle.io/cluster-finalizer"
)
