package v1alpha1

import (
	"github.com/rancher/wrangler/v3/pkg/condition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Deployment history is this implementation's own (Fleet keeps none): two kinds of their own,
// which Fleet's tools and the Rancher UI ignore, written by the manager only. A BundleHistory
// (same namespace and name as its Bundle) holds the table of clusters the bundle's revisions
// index into; a BundleRevision per revision holds what that revision deploys and the spans of
// clusters that ran it (internal/history). Both outlive the Bundle, up to the retention.
const (
	// RevisionAnnotation, on a BundleDeployment, is the bundle revision (internal/rollout
	// Revision) its options belong to, as the manager wrote them.
	RevisionAnnotation = "fleetgo.io/revision"
	// HistoryBundleLabel, on a BundleRevision, names its Bundle.
	HistoryBundleLabel = "fleetgo.io/bundle"
	// HeldAnnotation, on a BundleDeployment, is the revision a user's rollback holds it at
	// (BundleHistory spec.holds).
	HeldAnnotation = "fleetgo.io/held"
	// ConditionHeld is a Bundle's (and its GitRepo's) condition while a rollback holds some of
	// its clusters at an earlier revision: True naming them and the revision, False when a hold
	// cannot be kept (why); absent when none is in force.
	ConditionHeld condition.Cond = "Held"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet,path=bundlehistories

// BundleHistory is the table of clusters a Bundle's revisions' spans index into (its status,
// the manager's), and the rollbacks users asked for (its spec, written by `fleet rollback` and
// the UI as the user).
type BundleHistory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BundleHistorySpec   `json:"spec,omitempty"`
	Status BundleHistoryStatus `json:"status,omitempty"`
}

// BundleHistorySpec holds the Bundle's clusters at earlier revisions.
type BundleHistorySpec struct {
	// Holds put clusters back to an earlier revision of the Bundle; where two name a cluster,
	// the later one holds it.
	// +nullable
	Holds []RevisionHold `json:"holds,omitempty"`
}

// RevisionHold is a rollback: the named clusters run an earlier revision again, its content and
// options as recorded, for as long as the Bundle is at the revision it was made over (its next
// revision releases them).
type RevisionHold struct {
	// Revision is the revision they run (a BundleRevision's spec.revision).
	Revision string `json:"revision"`
	// Clusters are "namespace/name" of the clusters held.
	Clusters []string `json:"clusters"`
	// Over is the Bundle's revision when the hold was made.
	Over string `json:"over"`
	// Reason says why, as its author gave it.
	Reason string `json:"reason,omitempty"`
	// Since is when it was made.
	Since metav1.Time `json:"since"`
	// Staged holds go through the Bundle's RolloutPolicy (its stages and gates) as a rollout
	// of the revision over the clusters held; unset, they are held at once.
	Staged bool `json:"staged,omitempty"`
}

// BundleHistoryStatus is a BundleHistory's content.
type BundleHistoryStatus struct {
	// Clusters, in the order they were first seen running the bundle.
	// +nullable
	Clusters []string `json:"clusters,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet,path=bundlerevisions
// +kubebuilder:printcolumn:name="Bundle",type=string,JSONPath=`.spec.bundle`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.spec.revision`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.spec.commit`

// BundleRevision is one revision of a Bundle and the clusters that ran it, when.
type BundleRevision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BundleRevisionSpec   `json:"spec,omitempty"`
	Status BundleRevisionStatus `json:"status,omitempty"`
}

// BundleRevisionSpec says which revision of which Bundle.
type BundleRevisionSpec struct {
	Bundle   string `json:"bundle"`
	Revision string `json:"revision"`
	Commit   string `json:"commit,omitempty"`
	// Order is the revision's place among the Bundle's revisions (first promoted first).
	Order int64 `json:"order"`
	// Inputs are what the revision deploys, as a Rollout keeps a revision (its Content, the
	// Bundle's options and targets, sealed by the manager), recorded when the manager first saw
	// a cluster run it; unset when the Bundle had moved on by then. The Content is kept as long
	// as the revision is.
	// +nullable
	Inputs *RolloutRevision `json:"inputs,omitempty"`
}

// BundleRevisionStatus is where the revision ran.
type BundleRevisionStatus struct {
	// +nullable
	Spans []HistorySpan `json:"spans,omitempty"`
}

// HistorySpan is a set of clusters that ran a revision from one pass of the manager to another.
type HistorySpan struct {
	// Clusters are indexes into the BundleHistory's clusters: sorted runs ("0-165,170") or a
	// bitmap from the first index ("b<first>:<base64 of the bits>").
	Clusters string      `json:"clusters"`
	Promoted metav1.Time `json:"promoted"`
	// Applied and Ready are when the last of the span's clusters reported the revision
	// applied, and ready (unset: not all of them yet).
	// +nullable
	Applied *metav1.Time `json:"applied,omitempty"`
	// +nullable
	Ready *metav1.Time `json:"ready,omitempty"`
	// Until is when the clusters stopped running it (unset: they still do); Ended says how:
	// Replaced, RolledBack or Removed.
	// +nullable
	Until *metav1.Time `json:"until,omitempty"`
	Ended string       `json:"ended,omitempty"`
}
