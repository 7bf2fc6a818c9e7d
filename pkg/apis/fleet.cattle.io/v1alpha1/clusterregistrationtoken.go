package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,shortName=crt
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Secret-Name",type=string,JSONPath=`.status.secretName`

// ClusterRegistrationToken lets agents register into its namespace. The manager creates a
// Secret (status.secretName) holding a credential that can only create ClusterRegistrations,
// plus the values for the fleet-agent chart.
type ClusterRegistrationToken struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterRegistrationTokenSpec   `json:"spec,omitempty"`
	Status ClusterRegistrationTokenStatus `json:"status,omitempty"`
}

// ClusterRegistrationTokenSpec sets the token's lifetime.
type ClusterRegistrationTokenSpec struct {
	// TTL is how long the token is valid after creation, as a duration such as 240h; the token
	// is deleted when it expires. Empty or zero means it never expires.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +nullable
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// ClusterRegistrationTokenStatus is written by the manager.
type ClusterRegistrationTokenStatus struct {
	// Expires is when the token stops being valid.
	// +nullable
	Expires *metav1.Time `json:"expires,omitempty"`
	// SecretName names the Secret with the registration credential and agent values.
	SecretName string `json:"secretName,omitempty"`
}
