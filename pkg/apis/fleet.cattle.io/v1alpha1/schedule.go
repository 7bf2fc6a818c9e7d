package v1alpha1

import (
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,path=schedules
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.spec.duration`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.active`
// +kubebuilder:printcolumn:name="NextStart",type=string,JSONPath=`.status.nextStartTime`

// Schedule opens deployment windows for the clusters it targets: a window starts at each time
// the cron expression names and lasts Duration. Outside their windows clusters get nothing new.
type Schedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ScheduleSpec   `json:"spec,omitempty"`
	Status ScheduleStatus `json:"status,omitempty"`
}

// ScheduleSpec is when the windows open, for how long, in which time zone and for which
// clusters.
type ScheduleSpec struct {
	// Schedule is a cron expression (with seconds as an optional first field) naming each
	// window's start.
	Schedule string `json:"schedule,omitempty"`
	// Duration is how long each window stays open.
	Duration metav1.Duration `json:"duration,omitempty"`
	// Location is the IANA time zone the expression is read in; UTC when empty.
	Location string `json:"location,omitempty"`
	// Targets are the clusters the windows apply to.
	Targets ScheduleTargets `json:"targets,omitempty"`
}

// ScheduleTargets select the clusters of a Schedule.
type ScheduleTargets struct {
	// Clusters are matched as Bundle targets are; a cluster matching any one is scheduled.
	Clusters []ScheduleTarget `json:"clusters,omitempty"`
}

// ScheduleTarget matches clusters by name, labels, group or group labels.
type ScheduleTarget struct {
	// Name identifies the target.
	Name string `json:"name,omitempty"`
	// ClusterName matches the Cluster of that name.
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector matches Clusters by label.
	// +nullable
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup matches the Clusters of that ClusterGroup.
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector matches the Clusters of the ClusterGroups it selects.
	// +nullable
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// ScheduleStatus says whether a window is open, when the next opens and which clusters follow
// the Schedule.
type ScheduleStatus struct {
	// Active is true while a window is open.
	Active bool `json:"active,omitempty"`
	// NextStartTime is when the next window opens.
	// +nullable
	NextStartTime metav1.Time `json:"nextStartTime,omitempty"`
	// MatchingClusters are the names of the clusters the Schedule applies to.
	// +nullable
	MatchingClusters []string `json:"matchingClusters,omitempty"`
	// Conditions say whether the Schedule was accepted.
	Conditions []genericcondition.GenericCondition `json:"conditions,omitempty"`
}
