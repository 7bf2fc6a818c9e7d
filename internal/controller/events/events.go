// Package events records Kubernetes Events for what happens to GitRepos, Bundles, Clusters and
// BundleDeployments, so `kubectl describe` and `kubectl get events` tell the story. It watches
// the status transitions the controllers (and agents) write, so no controller records from its
// hot path, and records through client-go's recorder, whose correlator aggregates repeats and
// rate-limits each object's events: a loop cannot flood the apiserver. (manager)
//
// Reasons are stable (scripts may select on them):
//
//	GitRepo           GotNewCommit, Applied, ApplyFailed, RestrictionRefused, RolloutHalted
//	Bundle            TargetsChanged, RolloutPaused, RolloutHalted, RolloutComplete (progressive rollouts),
//	                  SecretsRefused (a SOPS file that does not decrypt, a cluster without a sealing key)
//	Cluster           Registered (internal/controller/registration), Offline, BackOnline
//	BundleDeployment  Deployed, DeployFailed, DriftDetected, DriftCorrected
package events

import (
	"context"
	"fmt"
	"strings"

	"github.com/rancher/wrangler/v3/pkg/condition"
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/fleetgo/fleet/internal/controller/cluster"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Reasons.
const (
	GotNewCommit       = "GotNewCommit"
	Applied            = "Applied"
	ApplyFailed        = "ApplyFailed"
	RestrictionRefused = "RestrictionRefused"
	TargetsChanged     = "TargetsChanged"
	RolloutPaused      = "RolloutPaused"
	RolloutHalted      = "RolloutHalted"
	RolloutComplete    = "RolloutComplete"
	SecretsRefused     = "SecretsRefused"
	Registered         = "Registered"
	Offline            = "Offline"
	BackOnline         = "BackOnline"
	Deployed           = "Deployed"
	DeployFailed       = "DeployFailed"
	DriftDetected      = "DriftDetected"
	DriftCorrected     = "DriftCorrected"
)

// NewRecorder records Events as component until ctx ends.
func NewRecorder(ctx context.Context, kube kubernetes.Interface, component string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	scheme := runtime.NewScheme()
	_ = fleet.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	return b.NewRecorder(scheme, corev1.EventSource{Component: component})
}

// Deps are the kinds whose transitions are recorded.
type Deps struct {
	Recorder          record.EventRecorder
	GitRepos          fleetcontrollers.GitRepoController // nil without GitOps
	Bundles           fleetcontrollers.BundleController
	Clusters          fleetcontrollers.ClusterController // nil in a shard
	BundleDeployments fleetcontrollers.BundleDeploymentController
	// Shard selects the GitRepos, Bundles and BundleDeployments whose transitions this
	// controller records (nil: all); another shard records the others'.
	Shard labels.Selector
}

// Register records the transitions of every kind of d.
func Register(d Deps) {
	r, mine := d.Recorder, d.Shard
	if mine == nil {
		mine = labels.Everything()
	}
	if d.GitRepos != nil {
		watch(d.GitRepos.Informer(), mine, func(old, cur *fleet.GitRepo) { gitRepo(r, old, cur) })
	}
	watch(d.Bundles.Informer(), mine, func(old, cur *fleet.Bundle) { bundle(r, old, cur) })
	if d.Clusters != nil {
		watch(d.Clusters.Informer(), labels.Everything(), func(old, cur *fleet.Cluster) { clusterChanged(r, old, cur) })
	}
	watch(d.BundleDeployments.Informer(), mine, func(old, cur *fleet.BundleDeployment) { deployment(r, old, cur) })
}

// watch calls changed for every update of an object of the informer that sel selects (resyncs
// excluded).
func watch[T interface {
	GetResourceVersion() string
	GetLabels() map[string]string
}](inf cache.SharedIndexInformer, sel labels.Selector, changed func(old, cur T)) {
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, c any) {
		old, ok1 := o.(T)
		cur, ok2 := c.(T)
		if ok1 && ok2 && old.GetResourceVersion() != cur.GetResourceVersion() && sel.Matches(labels.Set(cur.GetLabels())) {
			changed(old, cur)
		}
	}})
}

// turned is the condition of type t in cur when it has just become status (or changed its
// message while being it), else nil.
func turned(old, cur []genericcondition.GenericCondition, t condition.Cond, status corev1.ConditionStatus) *genericcondition.GenericCondition {
	c := fleet.FindCondition(cur, t)
	if c == nil || c.Status != status {
		return nil
	}
	if p := fleet.FindCondition(old, t); p != nil && p.Status == status && p.Message == c.Message {
		return nil
	}
	return c
}

func gitRepo(r record.EventRecorder, old, cur *fleet.GitRepo) {
	if c := cur.Status.PollingCommit; c != "" && c != old.Status.PollingCommit && c != cur.Status.Commit {
		r.Eventf(cur, corev1.EventTypeNormal, GotNewCommit, "commit %s on %s", c, ref(cur))
	}
	if c := cur.Status.Commit; c != "" && c != old.Status.Commit {
		r.Eventf(cur, corev1.EventTypeNormal, Applied, "commit %s applied", c)
	}
	if c := turned(old.Status.Conditions, cur.Status.Conditions, fleet.ConditionStalled, corev1.ConditionTrue); c != nil {
		r.Event(cur, corev1.EventTypeWarning, ApplyFailed, c.Message)
	}
	if c := turned(old.Status.Conditions, cur.Status.Conditions, fleet.ConditionAccepted, corev1.ConditionFalse); c != nil {
		r.Event(cur, corev1.EventTypeWarning, RestrictionRefused, c.Message)
	}
	if c := turned(old.Status.Conditions, cur.Status.Conditions, fleet.ConditionRollout, corev1.ConditionFalse); c != nil {
		r.Event(cur, corev1.EventTypeWarning, RolloutHalted, c.Message)
	}
}

func ref(gr *fleet.GitRepo) string {
	switch {
	case gr.Spec.Revision != "":
		return "revision " + gr.Spec.Revision
	case gr.Spec.Branch != "":
		return "branch " + gr.Spec.Branch
	}
	return "the default branch"
}

func bundle(r record.EventRecorder, old, cur *fleet.Bundle) {
	if n, was := cur.Status.Summary.DesiredReady, old.Status.Summary.DesiredReady; n != was {
		r.Eventf(cur, corev1.EventTypeNormal, TargetsChanged, "targets %d clusters (was %d)", n, was)
	}
	if p := pausedAt(cur); p != "" && pausedAt(old) == "" {
		r.Eventf(cur, corev1.EventTypeWarning, RolloutPaused, "%s; %d deployments wait to be promoted", p, cur.Status.Summary.OutOfSync)
	}
	if c := turned(old.Status.Conditions, cur.Status.Conditions, fleet.ConditionRollout, corev1.ConditionFalse); c != nil {
		r.Event(cur, corev1.EventTypeWarning, RolloutHalted, c.Message)
	}
	if msg := secretsProblem(cur); msg != "" && msg != secretsProblem(old) {
		r.Event(cur, corev1.EventTypeWarning, SecretsRefused, msg)
	}
	if c := fleet.FindCondition(cur.Status.Conditions, fleet.ConditionRollout); c != nil && c.Reason == fleet.RolloutComplete {
		if o := fleet.FindCondition(old.Status.Conditions, fleet.ConditionRollout); o != nil && o.Reason != fleet.RolloutComplete {
			r.Event(cur, corev1.EventTypeNormal, RolloutComplete, c.Message)
		}
	}
}

// secretsProblem is why a Bundle's SOPS files hold it back, as its Ready condition says ("":
// they do not).
func secretsProblem(b *fleet.Bundle) string {
	if c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionReady); c != nil && strings.HasPrefix(c.Message, "secrets: ") {
		return c.Message
	}
	return ""
}

// pausedAt says which partition holds the rollout back: one with more unavailable deployments
// than it may have while newer options wait (out of sync) elsewhere. Empty when none does.
func pausedAt(b *fleet.Bundle) string {
	if b.Status.Summary.OutOfSync == 0 {
		return ""
	}
	for _, p := range b.Status.PartitionStatus {
		if p.Unavailable > p.MaxUnavailable {
			return fmt.Sprintf("partition %s has %d unavailable of %d (at most %d)", p.Name, p.Unavailable, p.Count, p.MaxUnavailable)
		}
	}
	return ""
}

func clusterChanged(r record.EventRecorder, old, cur *fleet.Cluster) {
	was, is := old.Status.Display.State == cluster.StateOffline, cur.Status.Display.State == cluster.StateOffline
	switch {
	case is && !was:
		r.Eventf(cur, corev1.EventTypeWarning, Offline, "the agent has not checked in since %s", cur.Status.Agent.LastSeen.UTC().Format("2006-01-02T15:04:05Z"))
	case was && !is:
		r.Event(cur, corev1.EventTypeNormal, BackOnline, "the agent checks in again")
	}
}

func deployment(r record.EventRecorder, old, cur *fleet.BundleDeployment) {
	s, o := &cur.Status, &old.Status
	applied := s.AppliedDeploymentID == cur.Spec.DeploymentID
	// A drift correction rolls the release back (a new revision) and ends the drift.
	corrected := !o.NonModified && s.NonModified && o.Release != s.Release
	if applied && s.AppliedDeploymentID != "" && (o.AppliedDeploymentID != s.AppliedDeploymentID || o.Release != s.Release && !corrected) {
		r.Eventf(cur, corev1.EventTypeNormal, Deployed, "release %s", s.Release)
	}
	if c := turned(o.Conditions, s.Conditions, fleet.ConditionDeployed, corev1.ConditionFalse); c != nil {
		reason := DeployFailed
		if c.Reason == "DriftCorrectionFailed" {
			reason = c.Reason
		}
		r.Event(cur, corev1.EventTypeWarning, reason, c.Message)
	}
	if !applied || o.AppliedDeploymentID != s.AppliedDeploymentID {
		return
	}
	switch {
	case o.NonModified && !s.NonModified:
		r.Event(cur, corev1.EventTypeWarning, DriftDetected, "modified: "+modified(s.ModifiedStatus))
	case corrected:
		r.Eventf(cur, corev1.EventTypeNormal, DriftCorrected, "rolled back to the deployed revision: release %s", s.Release)
	}
}

// modified names up to five modified resources.
func modified(ms []fleet.ModifiedStatus) string {
	var out []string
	for i, m := range ms {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(ms)-5))
			break
		}
		what := "changed"
		switch {
		case m.Create:
			what = "missing"
		case m.Delete:
			what = "extra"
		}
		name := m.Name
		if m.Namespace != "" {
			name = m.Namespace + "/" + m.Name
		}
		out = append(out, fmt.Sprintf("%s %s %s", m.Kind, name, what))
	}
	if len(out) == 0 {
		return "resources differ from the release"
	}
	return strings.Join(out, ", ")
}
