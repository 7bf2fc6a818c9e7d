package v1alpha1

import corev1 "k8s.io/api/core/v1"

// FleetYAML is the content of a bundle folder's fleet.yaml: the Bundle's options, with the
// targets split into per-target customizations. It is never stored in the cluster.
// +kubebuilder:object:generate=false
// +k8s:deepcopy-gen=false
type FleetYAML struct {
	// Name overrides the Bundle's name, which otherwise derives from the GitRepo and the folder.
	Name string `json:"name,omitempty"`
	// Labels are set on the Bundle; dependsOn selectors match them.
	Labels map[string]string `json:"labels,omitempty"`
	// BundleSpec holds the options (defaultNamespace, helm, kustomize, ...) and rollout settings.
	BundleSpec `json:",inline"`
	// TargetCustomizations override options for the clusters they match; they become the
	// Bundle's first targets.
	TargetCustomizations []BundleTarget `json:"targetCustomizations,omitempty"`
	// ImageScans declares image scans for this bundle.
	ImageScans []ImageScanYAML `json:"imageScans,omitempty"`
	// OverrideTargets replace the GitRepo's targets for this bundle.
	OverrideTargets []GitTarget `json:"overrideTargets,omitempty"`
}

// ImageScanYAML declares an image scan in fleet.yaml; scans run only where enabled.
// +k8s:deepcopy-gen=false
type ImageScanYAML struct {
	// Name identifies the scan.
	Name string `json:"name,omitempty"`
	// Image is the image repository to scan.
	Image string `json:"image,omitempty"`
	// TagName is the tag placeholder name used in manifests.
	TagName string `json:"tagName,omitempty"`
	// Interval is how often the registry is scanned.
	Interval string `json:"interval,omitempty"`
	// SecretRef names the registry credential Secret, as Fleet's {name: ...}.
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// Policy chooses the newest tag: by semver range or alphabetically.
	Policy ImageScanPolicy `json:"policy,omitempty"`
	// Suspend stops scanning.
	Suspend bool `json:"suspend,omitempty"`
}

// ImageScanPolicy orders image tags.
type ImageScanPolicy struct {
	// SemVer picks the highest tag in a semver range.
	SemVer *SemVerPolicy `json:"semver,omitempty"`
	// Alphabetical picks the first or last tag in alphabetical order.
	Alphabetical *AlphabeticalPolicy `json:"alphabetical,omitempty"`
}

// SemVerPolicy picks the highest tag that is a semantic version within Range.
type SemVerPolicy struct {
	// Range is a semver constraint such as ">=1.0.0 <2".
	Range string `json:"range,omitempty"`
}

// AlphabeticalPolicy picks the last tag in alphabetical order (Order "asc", the default) or the
// first ("desc").
type AlphabeticalPolicy struct {
	// Order is "asc" or "desc".
	Order string `json:"order,omitempty"`
}
