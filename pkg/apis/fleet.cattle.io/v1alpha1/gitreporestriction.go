package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,shortName=grr
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Default-ServiceAccount",type=string,JSONPath=`.defaultServiceAccount`
// +kubebuilder:printcolumn:name="Allowed-ServiceAccounts",type=string,JSONPath=`.allowedServiceAccounts`

// GitRepoRestriction limits what the GitRepos of its namespace may do and supplies defaults. A
// GitRepo that breaks a restriction is not accepted (condition Accepted is False).
type GitRepoRestriction struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// DefaultServiceAccount is used by GitRepos that name none.
	DefaultServiceAccount string `json:"defaultServiceAccount,omitempty"`
	// AllowedServiceAccounts are the only ServiceAccounts GitRepos may name.
	// +nullable
	AllowedServiceAccounts []string `json:"allowedServiceAccounts,omitempty"`
	// AllowedRepoPatterns are regular expressions; a GitRepo's repo must match one.
	// +nullable
	AllowedRepoPatterns []string `json:"allowedRepoPatterns,omitempty"`
	// DefaultClientSecretName is the git credential Secret of GitRepos that name none.
	DefaultClientSecretName string `json:"defaultClientSecretName,omitempty"`
	// AllowedClientSecretNames are the only git credential Secrets GitRepos may name.
	// +nullable
	AllowedClientSecretNames []string `json:"allowedClientSecretNames,omitempty"`
	// AllowedTargetNamespaces are the only target namespaces GitRepos may deploy into.
	// +nullable
	AllowedTargetNamespaces []string `json:"allowedTargetNamespaces,omitempty"`
	// AllowedTargetNamespaceSelector restricts deployment to downstream namespaces whose labels
	// match; agents check it.
	// +nullable
	AllowedTargetNamespaceSelector *metav1.LabelSelector `json:"allowedTargetNamespaceSelector,omitempty"`
}
