package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BundleDeploymentOptions are the options of one deployment: they come from fleet.yaml, are
// customized per target, and reach the agent in the BundleDeployment. Their hash is part of the
// deploymentID, so changing any of them redeploys.
type BundleDeploymentOptions struct {
	// DefaultNamespace is the namespace for resources that do not name one. Default "default".
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	DefaultNamespace string `json:"defaultNamespace,omitempty"`

	// TargetNamespace forces every namespaced resource into this namespace; a cluster-scoped
	// resource in the bundle is then an error.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	TargetNamespace string `json:"namespace,omitempty"`

	// Kustomize runs kustomize over the manifests.
	// +nullable
	Kustomize *KustomizeOptions `json:"kustomize,omitempty"`

	// Helm holds the chart source, values and install flags.
	// +nullable
	Helm *HelmOptions `json:"helm,omitempty"`

	// ServiceAccount is the downstream ServiceAccount the agent impersonates to deploy; empty
	// means the agent's own identity.
	ServiceAccount string `json:"serviceAccount,omitempty"`

	// ForceSyncGeneration redeploys when increased, even if nothing else changed.
	ForceSyncGeneration int64 `json:"forceSyncGeneration,omitempty"`

	// YAML selects overlays of raw manifests.
	// +nullable
	YAML *YAMLOptions `json:"yaml,omitempty"`

	// Diff tells drift detection which differences to ignore.
	// +nullable
	Diff *DiffOptions `json:"diff,omitempty"`

	// KeepResources keeps the deployed resources when the bundle is deleted or no longer targets
	// the cluster.
	KeepResources bool `json:"keepResources,omitempty"`

	// DeleteCRDResources deletes the CRDs the bundle installed when it is removed; by default
	// CRDs, and with them every custom resource, are kept.
	DeleteCRDResources bool `json:"deleteCRDResources,omitempty"`

	// IgnoreOptions lists resource conditions to ignore when deciding readiness.
	// +nullable
	IgnoreOptions *IgnoreOptions `json:"ignore,omitempty"`

	// CorrectDrift puts drifted resources back to their desired state.
	// +nullable
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`

	// NamespaceLabels are set on the target namespace.
	// +nullable
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`

	// NamespaceAnnotations are set on the target namespace.
	// +nullable
	NamespaceAnnotations map[string]string `json:"namespaceAnnotations,omitempty"`

	// DeleteNamespace deletes the namespace the bundle created when the bundle is removed.
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`

	// CreateNamespace: the deployment creates its target namespace when missing, unless this is
	// set to false (then a missing namespace fails the deployment).
	CreateNamespace *bool `json:"createNamespace,omitempty"`

	// AllowedTargetNamespaceSelector restricts deployment to namespaces whose labels match, as
	// checked by the agent on the downstream cluster.
	// +nullable
	AllowedTargetNamespaceSelector *metav1.LabelSelector `json:"allowedTargetNamespaceSelector,omitempty"`

	// DownstreamResources are Secrets and ConfigMaps copied from the cluster's namespace on the
	// manager into the target namespace downstream.
	// +nullable
	DownstreamResources []DownstreamResource `json:"downstreamResources,omitempty"`

	// OverwrittenResources are resources that moved here from another bundle: the release is
	// reinstalled so they are recreated if that bundle's removal deleted them.
	// +nullable
	OverwrittenResources []OverwrittenResource `json:"overwrites,omitempty"`
}

// KustomizeOptions run kustomize as a post-renderer.
type KustomizeOptions struct {
	// Dir is the folder, relative to the bundle, holding the kustomization.yaml to use.
	Dir string `json:"dir,omitempty"`
}

// YAMLOptions select overlays for raw manifests.
type YAMLOptions struct {
	// Overlays name folders under overlays/ whose files replace or patch the base manifests,
	// applied in order.
	// +nullable
	Overlays []string `json:"overlays,omitempty"`
}

// DiffOptions tune drift detection.
type DiffOptions struct {
	// ComparePatches remove fields or whole objects from the comparison.
	// +nullable
	ComparePatches []ComparePatch `json:"comparePatches,omitempty"`
}

// ComparePatch selects one resource and the parts of it to ignore.
type ComparePatch struct {
	// Kind is the resource's kind.
	Kind string `json:"kind,omitempty"`
	// APIVersion is the resource's API version.
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace is the resource's namespace.
	Namespace string `json:"namespace,omitempty"`
	// Name is the resource's name.
	Name string `json:"name,omitempty"`
	// Operations are JSON patch operations applied to both sides before comparing.
	// +nullable
	Operations []Operation `json:"operations,omitempty"`
	// JSONPointers are fields (RFC 6901 pointers) removed from both sides before comparing.
	// +nullable
	JSONPointers []string `json:"jsonPointers,omitempty"`
}

// Operation is one JSON patch operation.
type Operation struct {
	// Op is the operation, such as "remove".
	Op string `json:"op,omitempty"`
	// Path is the JSON pointer the operation applies to.
	Path string `json:"path,omitempty"`
	// Value is the operation's value, for operations that take one.
	Value string `json:"value,omitempty"`
}

// IgnoreOptions relax readiness checks.
type IgnoreOptions struct {
	// Conditions lists condition matchers (type, status, ...); a resource condition matching all
	// keys of one of them does not count against readiness.
	// +nullable
	Conditions []map[string]string `json:"conditions,omitempty"`
}

// DownstreamResource names one object copied to the downstream cluster.
type DownstreamResource struct {
	// Kind is Secret or ConfigMap.
	// +kubebuilder:validation:Enum=Secret;ConfigMap
	Kind string `json:"kind,omitempty"`
	// Name is the object's name in the cluster's namespace on the manager.
	Name string `json:"name,omitempty"`
}

// OverwrittenResource identifies a resource taken over from another bundle.
type OverwrittenResource struct {
	// Kind is the resource's kind.
	Kind string `json:"kind,omitempty"`
	// Name is the resource's name.
	Name string `json:"name,omitempty"`
	// Namespace is the resource's namespace; empty for cluster-scoped resources.
	Namespace string `json:"namespace,omitempty"`
}

// HelmOptions say which chart to deploy, with which values and flags. Raw manifests are
// deployed as a generated chart, so these options apply to every bundle.
type HelmOptions struct {
	// Chart is a folder in the bundle, a chart archive URL, an OCI reference (oci://...), or a
	// chart name in Repo.
	Chart string `json:"chart,omitempty"`

	// Repo is the URL of the Helm chart repository holding Chart.
	Repo string `json:"repo,omitempty"`

	// ReleaseName is the Helm release's name; default is derived from the bundle's name.
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	ReleaseName string `json:"releaseName,omitempty"`

	// Version is the chart version or semver constraint, resolved when the bundle is created.
	Version string `json:"version,omitempty"`

	// TimeoutSeconds is how long Helm waits for the release to become ready; 0 means do not wait.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`

	// Values are the chart values; strings may use templates over the cluster's name, labels,
	// annotations and template values.
	// +nullable
	Values *GenericMap `json:"values,omitempty"`

	// ValuesFrom reads more values on the downstream cluster, from ConfigMaps and Secrets.
	// +nullable
	ValuesFrom []ValuesFrom `json:"valuesFrom,omitempty"`

	// Force makes Helm replace resources it cannot update.
	Force bool `json:"force,omitempty"`

	// TakeOwnership lets Helm adopt existing resources that belong to no release.
	TakeOwnership bool `json:"takeOwnership,omitempty"`

	// MaxHistory is the number of release revisions Helm keeps.
	MaxHistory int `json:"maxHistory,omitempty"`

	// ValuesFiles are values files of the bundle, merged in order when the bundle is created.
	// +nullable
	ValuesFiles []string `json:"valuesFiles,omitempty"`

	// WaitForJobs makes Helm wait for Jobs to complete when TimeoutSeconds is set.
	WaitForJobs bool `json:"waitForJobs,omitempty"`

	// Atomic rolls a failed upgrade back.
	Atomic bool `json:"atomic,omitempty"`

	// DisablePreProcess turns off templating of Values.
	DisablePreProcess bool `json:"disablePreProcess,omitempty"`

	// DisableDNS turns off DNS lookups in chart templates.
	DisableDNS bool `json:"disableDNS,omitempty"`

	// SkipSchemaValidation skips validating values against the chart's JSON schema.
	SkipSchemaValidation bool `json:"skipSchemaValidation,omitempty"`

	// DisableDependencyUpdate skips downloading the chart's dependencies.
	DisableDependencyUpdate bool `json:"disableDependencyUpdate,omitempty"`

	// TemplateValues are values whose strings are templates rendered per cluster; they take
	// precedence over Values.
	// +nullable
	TemplateValues map[string]string `json:"templateValues,omitempty"`
}

// ValuesFrom is one source of Helm values on the downstream cluster.
type ValuesFrom struct {
	// ConfigMapKeyRef reads values from a key of a ConfigMap.
	// +nullable
	ConfigMapKeyRef *ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`
	// SecretKeyRef reads values from a key of a Secret.
	// +nullable
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// ConfigMapKeySelector names a key of a ConfigMap in any namespace.
type ConfigMapKeySelector struct {
	// Name is the ConfigMap's name.
	Name string `json:"name,omitempty"`
	// Namespace is the ConfigMap's namespace.
	Namespace string `json:"namespace,omitempty"`
	// Key is the data key holding YAML values; default values.yaml.
	Key string `json:"key,omitempty"`
}

// SecretKeySelector names a key of a Secret in any namespace.
type SecretKeySelector struct {
	// Name is the Secret's name.
	Name string `json:"name,omitempty"`
	// Namespace is the Secret's namespace.
	Namespace string `json:"namespace,omitempty"`
	// Key is the data key holding YAML values; default values.yaml.
	Key string `json:"key,omitempty"`
}
