package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,path=policies

// Policy sets what the GitRepos, HelmOps and Bundles of its namespace may do, and their
// defaults. Where a namespace has several, an object passes when any one allows it.
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// RequireServiceAccount refuses objects that name no ServiceAccount to deploy as (after
	// defaults).
	RequireServiceAccount bool `json:"requireServiceAccount,omitempty"`
	// AllowedServiceAccounts are the only ServiceAccounts objects may name.
	// +nullable
	AllowedServiceAccounts []string `json:"allowedServiceAccounts,omitempty"`
	// AllowNamespaceCreation lets deployments create their target namespace.
	// +nullable
	AllowNamespaceCreation *bool `json:"allowNamespaceCreation,omitempty"`
	// GitRepo holds the defaults and allow-lists of GitRepos.
	// +nullable
	GitRepo *GitRepoPolicy `json:"gitRepo,omitempty"`
	// HelmOp holds the defaults and allow-lists of HelmOps.
	// +nullable
	HelmOp *HelmOpPolicy `json:"helmOp,omitempty"`
}

// GitRepoPolicy are a Policy's rules for GitRepos.
type GitRepoPolicy struct {
	// DefaultServiceAccount is used by GitRepos that name none.
	DefaultServiceAccount string `json:"defaultServiceAccount,omitempty"`
	// AllowedRepoPatterns are regular expressions; a GitRepo's repo must match one.
	// +nullable
	AllowedRepoPatterns []string `json:"allowedRepoPatterns,omitempty"`
	// DefaultClientSecretName is the git credential Secret of GitRepos that name none.
	DefaultClientSecretName string `json:"defaultClientSecretName,omitempty"`
	// AllowedClientSecretNames are the only git credential Secrets GitRepos may name.
	// +nullable
	AllowedClientSecretNames []string `json:"allowedClientSecretNames,omitempty"`
}

// HelmOpPolicy are a Policy's rules for HelmOps.
type HelmOpPolicy struct {
	// DefaultServiceAccount is used by HelmOps that name none.
	DefaultServiceAccount string `json:"defaultServiceAccount,omitempty"`
	// AllowedHelmRepoPatterns are regular expressions; a HelmOp's helm.repo must match one.
	// +nullable
	AllowedHelmRepoPatterns []string `json:"allowedHelmRepoPatterns,omitempty"`
	// AllowedChartPatterns are regular expressions; a HelmOp's helm.chart must match one.
	// +nullable
	AllowedChartPatterns []string `json:"allowedChartPatterns,omitempty"`
	// DefaultHelmSecretName is the credential Secret of HelmOps that name none.
	DefaultHelmSecretName string `json:"defaultHelmSecretName,omitempty"`
	// AllowedHelmSecretNames are the only credential Secrets HelmOps may name.
	// +nullable
	AllowedHelmSecretNames []string `json:"allowedHelmSecretNames,omitempty"`
}
