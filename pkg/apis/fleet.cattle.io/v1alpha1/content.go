package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=fleet
// +kubebuilder:subresource:status

// Content holds the manifest of a Bundle once, shared by every BundleDeployment that deploys it.
// It is cluster-scoped and named after the sha256 of its data, so agents can read it by name
// without being able to list what other clusters deploy.
type Content struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Content is the gzip-compressed manifest: the Bundle's resources as JSON.
	// +nullable
	Content []byte `json:"content,omitempty"`

	// SHA256Sum is the hex sha256 of the uncompressed manifest; the object's name derives from it.
	SHA256Sum string `json:"sha256sum,omitempty"`

	// Status counts the BundleDeployments that still refer to this Content.
	Status ContentStatus `json:"status,omitempty"`
}

// ContentStatus is maintained by the manager's Content garbage collector.
type ContentStatus struct {
	// ReferenceCount is the number of BundleDeployments whose deploymentID names this Content;
	// the Content is deleted when it drops to zero.
	ReferenceCount int `json:"referenceCount,omitempty"`
}
