package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,shortName=creg
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster-Name",type=string,JSONPath=`.status.clusterName`
// +kubebuilder:printcolumn:name="Labels",type=string,JSONPath=`.spec.clusterLabels`

// ClusterRegistration is an agent's request to join: created with the registration token's
// credential, granted by the manager, which then hands the agent its own credential.
type ClusterRegistration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterRegistrationSpec   `json:"spec,omitempty"`
	Status ClusterRegistrationStatus `json:"status,omitempty"`
}

// ClusterRegistrationSpec is what the agent presents.
type ClusterRegistrationSpec struct {
	// ClientID is the agent's identity; registrations with the same ID map to the same Cluster.
	ClientID string `json:"clientID,omitempty"`
	// ClientRandom is a random value of this request; with ClientID it names the Secret that
	// carries the agent's credential.
	ClientRandom string `json:"clientRandom,omitempty"`
	// ClusterLabels are labels for a new Cluster; fleet.cattle.io/ and management.cattle.io/
	// keys are dropped.
	// +nullable
	ClusterLabels map[string]string `json:"clusterLabels,omitempty"`
}

// ClusterRegistrationStatus is written by the manager.
type ClusterRegistrationStatus struct {
	// ClusterName is the Cluster the registration maps to.
	ClusterName string `json:"clusterName,omitempty"`
	// Granted is true once the agent's credential is ready.
	Granted bool `json:"granted,omitempty"`
}
