package v1alpha1

import (
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,shortName=cg
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Clusters-Ready",type=string,JSONPath=`.status.display.readyClusters`
// +kubebuilder:printcolumn:name="Bundles-Ready",type=string,JSONPath=`.status.display.readyBundles`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// ClusterGroup is a named set of the Clusters in its namespace, chosen by labels, that targets
// can refer to.
type ClusterGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterGroupSpec   `json:"spec"`
	Status ClusterGroupStatus `json:"status,omitempty"`
}

// ClusterGroupSpec selects the group's Clusters.
type ClusterGroupSpec struct {
	// Selector matches Clusters of the group's namespace by their labels; an empty selector
	// matches every Cluster.
	// +nullable
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// ClusterGroupStatus is the roll-up of the group's Clusters, written by the manager.
type ClusterGroupStatus struct {
	// ClusterCount is the number of Clusters in the group.
	ClusterCount int `json:"clusterCount"`
	// NonReadyClusterCount is the number of the group's Clusters that are not ready.
	NonReadyClusterCount int `json:"nonReadyClusterCount"`
	// NonReadyClusters names up to ten Clusters that are not ready.
	// +nullable
	NonReadyClusters []string `json:"nonReadyClusters,omitempty"`
	// Conditions: Ready is True when every Cluster of the group is ready.
	// +nullable
	Conditions []genericcondition.GenericCondition `json:"conditions,omitempty"`
	// Summary counts the group's BundleDeployments by state.
	Summary BundleSummary `json:"summary,omitempty"`
	// Display holds short strings for tables and user interfaces.
	Display ClusterGroupDisplay `json:"display,omitempty"`
	// ResourceCounts counts the resources deployed to the group by state.
	ResourceCounts ResourceCounts `json:"resourceCounts,omitempty"`
}

// ClusterGroupDisplay holds a ClusterGroup's status as short strings.
type ClusterGroupDisplay struct {
	// ReadyClusters is "ready/total" Clusters.
	ReadyClusters string `json:"readyClusters,omitempty"`
	// ReadyBundles is "ready/desired" BundleDeployments.
	ReadyBundles string `json:"readyBundles,omitempty"`
	// State is the worst state in the group.
	State string `json:"state,omitempty"`
}
