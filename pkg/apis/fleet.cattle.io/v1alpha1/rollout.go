package v1alpha1

import (
	"github.com/rancher/wrangler/v3/pkg/condition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Progressive rollouts are this implementation's own (Fleet has none): two kinds of their own
// and annotations, which Fleet's tools and the Rancher UI ignore. A GitRepo, HelmOp or Bundle
// names a RolloutPolicy of its namespace with RolloutPolicyAnnotation; the manager keeps a
// Rollout per Bundle (same namespace and name) with the rollout's progress, and tells each
// agent, on its BundleDeployment, which gates to evaluate.
const (
	// RolloutPolicyAnnotation, on a GitRepo, HelmOp or Bundle, names the RolloutPolicy of its
	// namespace its Bundles roll out by. A Bundle's own annotation wins over its GitRepo's or
	// HelmOp's.
	RolloutPolicyAnnotation = "fleetgo.io/rollout-policy"
	// RolloutGatesAnnotation, on a BundleDeployment, holds the policy's gates as JSON: the
	// agent evaluates them once the deployment is ready.
	RolloutGatesAnnotation = "fleetgo.io/rollout-gates"
	// RolloutRevisionAnnotation, on a BundleDeployment, is the rollout revision its options
	// belong to.
	RolloutRevisionAnnotation = "fleetgo.io/rollout-revision"
	// RolloutPromotedAnnotation, on a BundleDeployment, is when (RFC 3339) the manager promoted
	// it to its revision.
	RolloutPromotedAnnotation = "fleetgo.io/rollout-promoted-at"
	// RolloutPreviousAnnotation and RolloutPreviousContentLabel held, on BundleDeployments
	// written before 2026-12, what a rollback returned to; that is now the Rollout's
	// status.passed, and the manager removes them from the deployments it writes.
	RolloutPreviousAnnotation   = "fleetgo.io/rollout-previous"
	RolloutPreviousContentLabel = "fleetgo.io/rollout-previous-content"

	// ConditionRollout is a Bundle's (and GitRepo's, HelmOp's) rollout condition: True while
	// the rollout progresses or is complete, False once halted, naming the cluster, the gate
	// and why.
	ConditionRollout condition.Cond = "Rollout"
	// GateConditionPrefix prefixes the BundleDeployment condition an agent writes per gate
	// ("Gate/<name>"): True passed, False failed, Unknown pending; the message says why.
	GateConditionPrefix = "Gate/"
)

// GateCondition is the BundleDeployment condition of the gate with that name.
func GateCondition(name string) condition.Cond { return condition.Cond(GateConditionPrefix + name) }

// Rollout phases.
const (
	RolloutProgressing        = "Progressing"
	RolloutSoaking            = "Soaking"
	RolloutWaitingForApproval = "WaitingForApproval"
	RolloutPaused             = "Paused"
	RolloutComplete           = "Complete"
	RolloutHalted             = "Halted"
	RolloutRolledBack         = "RolledBack"
	RolloutAborted            = "Aborted"
	RolloutInvalid            = "Invalid"
)

// What a RolloutPolicy does when a stage fails more clusters than its budget.
const (
	// OnFailureRollback halts and returns every cluster that received the revision to the
	// last one that passed (the default).
	OnFailureRollback = "Rollback"
	// OnFailurePause halts and leaves every cluster as it is.
	OnFailurePause = "Pause"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,path=rolloutpolicies
// +kubebuilder:printcolumn:name="On-Failure",type=string,JSONPath=`.spec.onFailure`

// RolloutPolicy says how the Bundles that name it reach their clusters: stage by stage, each
// stage soaking healthy before the next starts, halting (and rolling back) once a stage fails
// more clusters than it may.
type RolloutPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RolloutPolicySpec `json:"spec,omitempty"`
}

// RolloutPolicySpec is a RolloutPolicy's content.
type RolloutPolicySpec struct {
	// Stages, in order. A cluster belongs to the first stage that selects it; clusters no stage
	// selects come last, in a stage of their own ("unstaged").
	Stages []RolloutStage `json:"stages"`
	// Gates are the checks every agent runs inside its own cluster once a new revision is
	// ready there, besides readiness itself.
	// +nullable
	Gates []HealthGate `json:"gates,omitempty"`
	// OnFailure is Rollback (default) or Pause.
	// +kubebuilder:validation:Enum=Rollback;Pause;""
	OnFailure string `json:"onFailure,omitempty"`
	// ProgressDeadline is how long a cluster may take, from its promotion, to be ready and pass
	// every gate before it counts as failed (default 10m).
	// +nullable
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`
}

// RolloutStage is one step of a rollout.
type RolloutStage struct {
	// Name names the stage (unique in the policy).
	Name string `json:"name"`
	// ClusterName selects one Cluster by name.
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector selects Clusters by label.
	// +nullable
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup selects the Clusters of a ClusterGroup.
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// Percent takes this share (1-100, rounded up) of the clusters no earlier stage took, in
	// name order; with a selector, of those the selector matches. A stage with no selector and no
	// percent takes all the rest.
	// +nullable
	Percent *int32 `json:"percent,omitempty"`
	// MaxConcurrency is how many clusters of the stage may be updating at once (a number or a
	// percentage of the stage; default all).
	// +nullable
	MaxConcurrency *intstr.IntOrString `json:"maxConcurrency,omitempty"`
	// Soak is how long every cluster of the stage must stay healthy before the next stage
	// starts.
	// +nullable
	Soak *metav1.Duration `json:"soak,omitempty"`
	// FailureBudget is how many clusters of the stage may fail before the rollout halts
	// (default 0: the first failure halts it).
	FailureBudget int `json:"failureBudget,omitempty"`
	// RequireApproval holds the stage until `fleet rollout approve` approves it.
	RequireApproval bool `json:"requireApproval,omitempty"`
}

// HealthGate is a check an agent runs inside its cluster; exactly one kind is set.
type HealthGate struct {
	// Name names the gate in status and events (unique in the policy).
	Name string `json:"name"`
	// HTTPGet passes when a GET of the URL, made from inside the cluster, answers with a 2xx
	// status (or ExpectStatus).
	// +nullable
	HTTPGet *HTTPGate `json:"httpGet,omitempty"`
	// Job passes when a Job the agent creates succeeds.
	// +nullable
	Job *JobGate `json:"job,omitempty"`
	// Prometheus passes when an instant query against an in-cluster Prometheus compares with a
	// threshold as asked.
	// +nullable
	Prometheus *PrometheusGate `json:"prometheus,omitempty"`
	// FailureThreshold is how many failed checks in a row fail the gate (default 3).
	FailureThreshold int `json:"failureThreshold,omitempty"`
	// Interval is how often the agent checks (default 10s).
	// +nullable
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// HTTPGate is an HTTP GET check.
type HTTPGate struct {
	// URL to GET, as seen from inside the cluster (e.g. http://web.demo.svc/healthz).
	URL string `json:"url"`
	// ExpectStatus is the status that passes (default: any 2xx).
	ExpectStatus int `json:"expectStatus,omitempty"`
	// Timeout of one GET (default 5s).
	// +nullable
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// JobGate is a Job that must succeed; the agent makes one per revision.
type JobGate struct {
	// Namespace of the Job (default: the bundle's namespace on the cluster).
	Namespace string `json:"namespace,omitempty"`
	// Image of the Job's one container.
	Image string `json:"image"`
	// Command and Args of the container.
	// +nullable
	Command []string `json:"command,omitempty"`
	// +nullable
	Args []string `json:"args,omitempty"`
	// ServiceAccountName the Job runs as (default: the namespace's default).
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// PrometheusGate compares an instant query's value with a threshold.
type PrometheusGate struct {
	// URL of the Prometheus API as seen from inside the cluster (e.g.
	// http://prometheus.monitoring.svc:9090).
	URL string `json:"url"`
	// Query is a PromQL expression giving one sample (or a scalar).
	Query string `json:"query"`
	// Op is one of <, <=, >, >=, ==, != (the value on the left).
	// +kubebuilder:validation:Enum="<";"<=";">";">=";"==";"!="
	Op string `json:"op"`
	// Threshold is the number compared with.
	Threshold string `json:"threshold"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet,path=rollouts
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.status.policy`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.status.stage`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`

// Rollout is the progress of one Bundle's rollout by its RolloutPolicy; the manager keeps it
// (same namespace and name as the Bundle). Its spec holds what users decide: approvals, pause,
// abort and retry (`fleet rollout`).
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RolloutSpec   `json:"spec,omitempty"`
	Status RolloutStatus `json:"status,omitempty"`
}

// RolloutSpec holds the users' decisions about a rollout.
type RolloutSpec struct {
	// Paused stops promoting clusters (what is deployed stays; soak and gates go on).
	Paused bool `json:"paused,omitempty"`
	// Approved are the approved stages, as "revision/stage".
	// +nullable
	Approved []string `json:"approved,omitempty"`
	// Abort names a revision whose rollout is to stop, its updated clusters rolled back.
	Abort string `json:"abort,omitempty"`
	// Retry, raised above status.retried, starts a halted or aborted rollout again from its
	// first stage.
	Retry int64 `json:"retry,omitempty"`
}

// RolloutStatus is where a rollout stands.
type RolloutStatus struct {
	// Policy is the RolloutPolicy in effect.
	Policy string `json:"policy,omitempty"`
	// Revision is the revision rolling out (a hash of the Bundle's content and options).
	Revision string `json:"revision,omitempty"`
	// PassedRevision is the last revision whose rollout completed.
	PassedRevision string `json:"passedRevision,omitempty"`
	// Hold says the revision rolling out is a user's staged rollback of some clusters (a staged
	// hold of the BundleHistory): complete, it does not become the revision that passed.
	Hold bool `json:"hold,omitempty"`
	// Phase: Progressing, Soaking, WaitingForApproval, Paused, Complete, Halted, RolledBack,
	// Aborted or Invalid.
	Phase string `json:"phase,omitempty"`
	// Stage is the name of the stage in progress (the halted one, once halted).
	Stage string `json:"stage,omitempty"`
	// Message says what the rollout waits for, or why it halted.
	Message string `json:"message,omitempty"`
	// Stages are every stage's counts.
	// +nullable
	Stages []RolloutStageStatus `json:"stages,omitempty"`
	// Failures are the failed clusters (at most 10), with the gate and why.
	// +nullable
	Failures []RolloutFailure `json:"failures,omitempty"`
	// StartedAt is when the revision's rollout started; FinishedAt when it completed or halted.
	// +nullable
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +nullable
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// Retried is the spec.retry last acted on.
	Retried int64 `json:"retried,omitempty"`
	// RolledBack counts the clusters returned to the previous revision.
	RolledBack int `json:"rolledBack,omitempty"`
	// Current is what the revision rolling out deploys; it becomes Passed once that revision
	// completes and another follows.
	// +nullable
	Current *RolloutRevision `json:"current,omitempty"`
	// Passed is what PassedRevision deploys: a rollback returns the updated clusters to it.
	// Empty when no revision completed under the policy: a rollback then has nothing to
	// return to, and the clusters stay where they are.
	// +nullable
	Passed *RolloutRevision `json:"passed,omitempty"`
}

// RolloutRevision is what a revision deploys, kept so that clusters can return to it: the
// Content and the Bundle's options and targets as they were, from which each cluster's options
// are rendered again (with the Bundle's values; who may read a Rollout may read those).
type RolloutRevision struct {
	Revision string `json:"revision"`
	// Content names the Content of the revision's resources.
	Content string `json:"content,omitempty"`
	// ContentsID is the Bundle's spec.contentsID then (its resources in an OCI registry).
	ContentsID string                  `json:"contentsID,omitempty"`
	Options    BundleDeploymentOptions `json:"options"`
	// +nullable
	Targets []BundleTarget `json:"targets,omitempty"`
	// +nullable
	HelmOpOptions *BundleHelmOptions `json:"helmOpOptions,omitempty"`
	// ValuesHash, when set, says the revision's Helm values (of its options and its named
	// targets) are kept outside it, in a Secret of type fleet.cattle.io/revision-values/v1alpha1
	// next to the object that keeps the revision, and fingerprints them as a Bundle's
	// spec.valuesHash does: whoever reads the revision does not read its values.
	ValuesHash string `json:"valuesHash,omitempty"`
	// Seal is the manager's: an HMAC of the revision's Content and its Bundle, under a key only
	// the manager reads. A revision whose seal does not verify is never deployed.
	Seal string `json:"seal,omitempty"`
}

// RolloutStageStatus is one stage's counts.
type RolloutStageStatus struct {
	Name string `json:"name"`
	// Clusters the stage holds, Updated those on the revision, Passing those ready with every
	// gate passed, Failed those failed.
	Clusters int `json:"clusters"`
	Updated  int `json:"updated"`
	Passing  int `json:"passing"`
	Failed   int `json:"failed"`
	// State: Pending, WaitingForApproval, Progressing, Soaking, Complete or Failed.
	State string `json:"state,omitempty"`
	// SoakStartedAt is since when every cluster of the stage has been passing.
	// +nullable
	SoakStartedAt *metav1.Time `json:"soakStartedAt,omitempty"`
	// Message notes a problem with the stage (it selects no clusters).
	Message string `json:"message,omitempty"`
}

// RolloutFailure is a cluster that failed, with the gate and why.
type RolloutFailure struct {
	Cluster string `json:"cluster"`
	Stage   string `json:"stage,omitempty"`
	// Gate is the gate that failed ("Ready" for readiness and deploy errors).
	Gate   string `json:"gate"`
	Reason string `json:"reason,omitempty"`
}
