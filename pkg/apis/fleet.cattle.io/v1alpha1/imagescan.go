package v1alpha1

import (
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,path=imagescans
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Repository",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Latest",type=string,JSONPath=`.status.latestTag`

// ImageScan watches an image repository's tags. When a newer tag matches its policy, the fields
// marked with the scan's tag name in its GitRepo's repository are rewritten and committed.
type ImageScan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ImageScanSpec   `json:"spec,omitempty"`
	Status ImageScanStatus `json:"status,omitempty"`
}

// ImageScanSpec is the repository to scan, how often, how to pick the newest tag and which
// GitRepo to write it to.
type ImageScanSpec struct {
	// TagName is the name the markers in the repository's files use for this scan.
	TagName string `json:"tagName,omitempty"`
	// GitRepoName is the GitRepo (same namespace) whose repository gets the commits.
	GitRepoName string `json:"gitrepoName,omitempty"`
	// Image is the image repository, without a tag.
	Image string `json:"image,omitempty"`
	// Interval is how often the registry is asked for tags.
	Interval metav1.Duration `json:"interval,omitempty"`
	// SecretRef names the Secret with the registry's credentials.
	// +nullable
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// Suspend stops scanning.
	Suspend bool `json:"suspend,omitempty"`
	// Policy picks the newest tag.
	Policy ImageScanPolicy `json:"policy,omitempty"`
}

// ImageScanStatus is what the last scan found.
type ImageScanStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions say whether the scan and the commit worked.
	Conditions []genericcondition.GenericCondition `json:"conditions,omitempty"`
	// LastScanTime is when the registry was last asked.
	// +nullable
	LastScanTime metav1.Time `json:"lastScanTime,omitempty"`
	// CanonicalImageName is the image repository as the registry names it.
	CanonicalImageName string `json:"canonicalImageName,omitempty"`
	// LatestImage is image:tag of the newest tag.
	LatestImage string `json:"latestImage,omitempty"`
	// LatestTag is the newest tag the policy picked.
	LatestTag string `json:"latestTag,omitempty"`
	// LatestDigest is that tag's manifest digest.
	LatestDigest string `json:"latestDigest,omitempty"`
}
