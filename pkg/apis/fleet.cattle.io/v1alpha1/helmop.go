package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,path=helmops
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Repo",type=string,JSONPath=`.spec.helm.repo`
// +kubebuilder:printcolumn:name="Chart",type=string,JSONPath=`.spec.helm.chart`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="BundleDeployments-Ready",type=string,JSONPath=`.status.display.readyBundleDeployments`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// HelmOp deploys a Helm chart without git: the chart of a Helm repository, an OCI registry or a
// chart URL, at the newest version a constraint allows, becomes a Bundle whose agents fetch the
// chart themselves.
type HelmOp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HelmOpSpec   `json:"spec,omitempty"`
	Status HelmOpStatus `json:"status,omitempty"`
}

// HelmOpSpec is a Bundle's spec (helm.repo, helm.chart and helm.version name the chart) and how
// the chart source is reached and watched.
type HelmOpSpec struct {
	BundleSpec `json:",inline"`
	// Labels are put on the Bundle.
	Labels map[string]string `json:"labels,omitempty"`
	// PollingInterval is how often the chart source is asked for a newer version matching
	// helm.version; zero does not poll.
	PollingInterval *metav1.Duration `json:"pollingInterval,omitempty"`
	// HelmSecretName names the Secret with the chart source's credentials (username, password,
	// cacerts).
	HelmSecretName string `json:"helmSecretName,omitempty"`
	// InsecureSkipTLSVerify skips verifying the chart source's certificate.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
}

// HelmOpStatus rolls the HelmOp's Bundle up as a GitRepo's status does, with the chart version
// in force.
type HelmOpStatus struct {
	StatusBase `json:",inline"`
	// Version is the chart version the constraint resolved to.
	Version string `json:"version,omitempty"`
	// LastPollingTime is when the chart source was last asked for versions.
	// +nullable
	LastPollingTime metav1.Time `json:"lastPollingTriggered,omitempty"`
}
