package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,shortName=bnm
// +kubebuilder:subresource:status

// BundleNamespaceMapping lets Bundles of its namespace target Clusters in other namespaces: the
// Bundles matching BundleSelector may target Clusters in namespaces matching NamespaceSelector.
type BundleNamespaceMapping struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// BundleSelector matches the Bundles of this namespace the mapping applies to.
	// +nullable
	BundleSelector *metav1.LabelSelector `json:"bundleSelector"`
	// NamespaceSelector matches the namespaces whose Clusters those Bundles may target.
	// +nullable
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
}
