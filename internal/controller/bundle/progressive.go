package bundle

import (
	"cmp"
	"encoding/json"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/metrics"
	"github.com/fleetgo/fleet/internal/rollout"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// progressive is a pass's rollout by a RolloutPolicy: internal/rollout's decisions for the
// plan's targets, applied as their BundleDeployments are written (promote, hold, roll back),
// and the Rollout's new status.
type progressive struct {
	policy   string
	revision string
	result   rollout.Result
	// in is what the pass evaluated; staged is the user's staged rollback the pass rolls out
	// instead of the Bundle's revision (stagedhold.go; nil: none).
	in     rollout.Input
	staged *held
	// roll is the Rollout as cached (nil: none yet).
	roll *fleet.Rollout
	// gates is the policy's gates as JSON ("" when it has none).
	gates string
	now   time.Time
	// bundle is the Bundle passed; passed and passedMatch are its revision that passed, as the
	// Rollout kept it, made once a rollback needs them.
	bundle      *fleet.Bundle
	passed      *fleet.Bundle
	passedMatch *target.Matcher
	// rules checks a Bundle against its namespace's Policies and GitRepoRestrictions, as the
	// pass checked the Bundle (handler.checkRules).
	rules func(*fleet.Bundle) (bool, *refusal, error)
	// verify says why a kept revision may not be deployed for a Bundle (its seal, seal.go); nil
	// checks none.
	verify func(*fleet.Bundle, *fleet.RolloutRevision) error
	// passedErr is why the revision that passed cannot be returned to (made with passed).
	passedErr error
	// firstRefusal says whether a refused rollback to a revision is news (warned once per
	// revision, not per cluster and pass).
	firstRefusal func(revision string) bool
	// restore puts back the Helm values of a revision the Rollout keeps outside its status (nil:
	// it keeps them in it).
	restore func(*fleet.Bundle, *fleet.RolloutRevision) (*fleet.RolloutRevision, error)
}

// policyName is the RolloutPolicy b rolls out by: its own annotation's, else its GitRepo's or
// HelmOp's; "" for none (Fleet's rollout strategy applies).
func (h *handler) policyName(b *fleet.Bundle) string {
	if n := b.Annotations[fleet.RolloutPolicyAnnotation]; n != "" {
		return n
	}
	if repo := b.Labels[fleet.RepoLabel]; repo != "" && h.gitrepos != nil {
		if gr, err := h.gitrepos.Get(b.Namespace, repo); err == nil {
			return gr.Annotations[fleet.RolloutPolicyAnnotation]
		}
	}
	if op := b.Labels[fleet.HelmNameLabel]; op != "" && h.helmops != nil {
		if o, err := h.helmops.Get(b.Namespace, op); err == nil {
			return o.Annotations[fleet.RolloutPolicyAnnotation]
		}
	}
	return ""
}

// progressiveOf decides the pass's rollout when b names a RolloutPolicy (nil when it names
// none); targets and bds are the pass's targets and their deployments (nil: none yet).
func (h *handler) progressiveOf(b *fleet.Bundle, targets []target.ClusterInfo, bds []*fleet.BundleDeployment, contentName string) (*progressive, error) {
	name := h.policyName(b)
	if name == "" || h.rollouts == nil {
		return nil, nil
	}
	current := rollout.Inputs(b, contentName)
	current.Seal = h.seal.seal(b, current)
	in := rollout.Input{PolicyName: name, Revision: current.Revision, Current: current, Now: h.now(), Targets: targets, BDs: bds}
	pol, err := h.rolloutPolicies.Get(b.Namespace, name)
	switch {
	case err == nil:
		in.Policy = &pol.Spec
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	pg := &progressive{policy: name, revision: in.Revision, now: in.Now, bundle: b, rules: h.checkRules, verify: h.seal.verify, restore: h.rolloutOut.restore,
		firstRefusal: func(revision string) bool { return h.mem.rollbackRefused(b, revision) }}
	if roll, err := h.rollouts.Cache().Get(b.Namespace, b.Name); err == nil {
		pg.roll, in.Spec, in.Status = roll, roll.Spec, roll.Status
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	// A status handed to the Rollout's writer and not shown by the cache yet is the newer.
	if st, ok := h.rolloutOut.status(b); ok {
		in.Status = st
	}
	// A paused Bundle (Fleet's spec.paused) promotes nothing, as without a policy.
	in.Spec.Paused = in.Spec.Paused || b.Spec.Paused
	pg.in, pg.result = in, rollout.Evaluate(in)
	if in.Policy != nil && len(in.Policy.Gates) > 0 {
		data, err := json.Marshal(in.Policy.Gates)
		if err != nil {
			return nil, err
		}
		pg.gates = string(data)
	}
	return pg, nil
}

// gatesFor is the gates annotation target k's deployment carries.
func (pg *progressive) gatesFor(k int) string {
	if !pg.result.Gated[k] {
		return ""
	}
	return pg.gates
}

// mustWrite says target k's deployment needs writing though its inputs did not change: it is
// promoted to the revision, rolled back, or its gates change.
func (pg *progressive) mustWrite(k int, cur *fleet.BundleDeployment) bool {
	d := pg.result.Decisions[k]
	switch {
	case cur == nil:
		return true
	case d == rollout.RollBack:
		passed := pg.result.Status.Passed
		return passed != nil && cur.Annotations[fleet.RolloutRevisionAnnotation] != passed.Revision
	case d == rollout.Promote && cur.Annotations[fleet.RolloutRevisionAnnotation] != pg.revision:
		return true
	}
	return cur.Annotations[fleet.RolloutGatesAnnotation] != pg.gatesFor(k)
}

// promote gives the cluster the revision.
func (pg *progressive) promote(desired, cur *fleet.BundleDeployment) *fleet.BundleDeployment {
	next := desired.DeepCopy()
	next.Annotations = rolloutAnnotations(cur)
	if cur != nil && cur.Annotations[fleet.RolloutRevisionAnnotation] == pg.revision {
		return next
	}
	next.Annotations[fleet.RolloutRevisionAnnotation] = pg.revision
	next.Annotations[fleet.RolloutPromotedAnnotation] = pg.now.UTC().Format(time.RFC3339)
	return next
}

// rollBack returns the cluster to the revision that passed, its options rendered again from
// what the Rollout kept of it; nil when nothing is kept, or that revision does not target the
// cluster or does not render for it.
func (pg *progressive) rollBack(ci target.ClusterInfo, desired, cur *fleet.BundleDeployment) *fleet.BundleDeployment {
	passed := pg.result.Status.Passed
	if cur == nil || passed == nil {
		return nil
	}
	old, err := pg.renderPassed(ci)
	if err != nil && (pg.firstRefusal == nil || pg.firstRefusal(passed.Revision)) {
		logrus.WithFields(logfields.For("bundle", pg.bundle.Namespace, pg.bundle.Name)).WithField("cluster", ci.Cluster.Name).
			Warnf("not rolled back to revision %s: %v", passed.Revision, err)
	}
	if old == nil {
		return nil
	}
	next := atKept(desired, old, passed.Content, cur)
	delete(next.Annotations, fleet.RolloutPromotedAnnotation)
	next.Annotations[fleet.RolloutRevisionAnnotation] = passed.Revision
	return next
}

// atKept is desired deploying what old, rendered from a kept revision (of Content content),
// deploys: desired's options stay staged, cur's rollout annotations are kept.
func atKept(desired, old *fleet.BundleDeployment, content string, cur *fleet.BundleDeployment) *fleet.BundleDeployment {
	next := desired.DeepCopy()
	next.Spec.Options, next.Spec.DeploymentID = old.Spec.Options, old.Spec.DeploymentID
	next.Spec.CorrectDrift, next.Spec.HelmChartOptions, next.Spec.OCIContents = old.Spec.CorrectDrift, old.Spec.HelmChartOptions, old.Spec.OCIContents
	next.Labels[fleet.ContentNameLabel] = content
	next.Annotations = rolloutAnnotations(cur)
	return next
}

// renderPassed renders the cluster's BundleDeployment as the revision that passed made it: the
// Bundle with that revision's options, targets and Content. Nil when it did not target the
// cluster. The Rollout's status is input too (who may write rollouts/status wrote it): the
// revision must meet the namespace's Policies and GitRepoRestrictions as they stand, as the
// Bundle itself must.
func (pg *progressive) renderPassed(ci target.ClusterInfo) (*fleet.BundleDeployment, error) {
	if pg.passed == nil && pg.passedErr == nil {
		pg.passed, pg.passedMatch, pg.passedErr = pg.passedBundle()
	}
	if pg.passedErr != nil {
		return nil, pg.passedErr
	}
	m := pg.passedMatch.Match(ci)
	if m == nil {
		return nil, nil
	}
	return render(pg.passed, ci, m, pg.result.Status.Passed.Content)
}

// passedBundle is the Bundle as the revision that passed had it, with its Helm values put
// back, and its matcher (keptBundle).
func (pg *progressive) passedBundle() (*fleet.Bundle, *target.Matcher, error) {
	passed := pg.result.Status.Passed
	if pg.restore != nil {
		var err error
		if passed, err = pg.restore(pg.bundle, passed); err != nil {
			return nil, nil, err
		}
	}
	return keptBundle(pg.bundle, passed, pg.verify, pg.rules)
}

// keptBundle is Bundle b as a revision kept of it had it (its options, targets and contents),
// with its matcher: once its seal verifies (only a manager of this installation recorded it, for
// this Bundle) and it meets the namespace's rules as they stand. A rollout's rollback and a
// user's (holds.go) both deploy a kept revision this way.
func keptBundle(b *fleet.Bundle, kept *fleet.RolloutRevision, verify func(*fleet.Bundle, *fleet.RolloutRevision) error,
	rules func(*fleet.Bundle) (bool, *refusal, error)) (*fleet.Bundle, *target.Matcher, error) {
	if verify != nil {
		if err := verify(b, kept); err != nil {
			return nil, nil, err
		}
	}
	out := rollout.BundleAt(b, kept)
	if rules != nil {
		if _, refused, err := rules(out); err != nil || refused != nil {
			return nil, nil, cmp.Or(err, refusedErr(refused))
		}
	}
	m, err := target.NewMatcher(out)
	if err != nil {
		return nil, nil, err
	}
	return out, m, nil
}

func refusedErr(r *refusal) error {
	if r == nil {
		return nil
	}
	return r.err
}

// hold keeps what the cluster has, the new options staged (none yet for a new deployment).
func hold(desired, cur *fleet.BundleDeployment) *fleet.BundleDeployment {
	next := desired.DeepCopy()
	next.Annotations = rolloutAnnotations(cur)
	if cur == nil {
		next.Spec.Options, next.Spec.DeploymentID = fleet.BundleDeploymentOptions{}, ""
		return next
	}
	next.Spec.Options, next.Spec.DeploymentID = *cur.Spec.Options.DeepCopy(), cur.Spec.DeploymentID
	next.Spec.CorrectDrift, next.Spec.HelmChartOptions = cur.Spec.CorrectDrift, cur.Spec.HelmChartOptions.DeepCopy()
	next.Labels[fleet.ContentNameLabel] = cur.Labels[fleet.ContentNameLabel]
	return next
}

// rolloutAnnotations are cur's rollout annotations (a new map).
func rolloutAnnotations(cur *fleet.BundleDeployment) map[string]string {
	out := map[string]string{}
	if cur == nil {
		return out
	}
	for _, k := range ownedAnnotations[:3] {
		if v, ok := cur.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

// ownedAnnotations are the BundleDeployment annotations progressive rollouts write; a write
// makes them exactly what the pass wants (none for a Bundle without a policy). rolloutAnnotations
// carries the first three over; the last, of earlier versions, goes with the next write.
var ownedAnnotations = []string{fleet.RolloutGatesAnnotation, fleet.RolloutRevisionAnnotation,
	fleet.RolloutPromotedAnnotation, fleet.RolloutPreviousAnnotation}

func setOrDelete(m map[string]string, k, v string) {
	if v == "" {
		delete(m, k)
		return
	}
	m[k] = v
}

// ownedMatch says cur's owned annotations and label are what next wants.
func ownedMatch(cur, next *fleet.BundleDeployment) bool {
	for _, k := range ownedAnnotations {
		if cur.Annotations[k] != next.Annotations[k] {
			return false
		}
	}
	return cur.Labels[fleet.RolloutPreviousContentLabel] == next.Labels[fleet.RolloutPreviousContentLabel]
}

// syncOwned makes upd's owned annotations and label next's.
func syncOwned(upd, next *fleet.BundleDeployment) {
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	for _, k := range ownedAnnotations {
		setOrDelete(upd.Annotations, k, next.Annotations[k])
	}
	setOrDelete(upd.Labels, fleet.RolloutPreviousContentLabel, next.Labels[fleet.RolloutPreviousContentLabel])
}

// record hands the Rollout's status to its writer (rollouts.go) when it changed, sets the
// Bundle's Rollout condition, and asks for the next pass the rollout needs.
func (h *handler) record(b *fleet.Bundle, pg *progressive, status *fleet.BundleStatus) error {
	st := pg.result.Status
	if pg.passedErr != nil && !strings.Contains(st.Message, "not rolled back: ") {
		st.Message = strings.TrimPrefix(st.Message+"; ", "; ") + "not rolled back: " + pg.passedErr.Error()
	}
	cond, reason := corev1.ConditionTrue, st.Phase
	switch st.Phase {
	case fleet.RolloutHalted, fleet.RolloutRolledBack, fleet.RolloutAborted, fleet.RolloutInvalid:
		cond = corev1.ConditionFalse
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionRollout, cond, reason, st.Message, h.now())
	if pg.result.Requeue > 0 {
		h.bundles.EnqueueAfter(b.Namespace, b.Name, pg.result.Requeue)
	}
	if pg.result.Halted {
		metrics.RolloutHalted(b.Namespace, b.Name)
	}
	if prev := pg.rolledBackBefore(); st.RolledBack > prev {
		metrics.RolledBack(b.Namespace, b.Name, st.RolledBack-prev)
	}
	return h.rolloutOut.publish(b, pg.roll, st)
}

// rolloutLabels name the Rollout's Bundle and where it came from, for `fleet rollout`.
func rolloutLabels(b *fleet.Bundle) map[string]string {
	out := map[string]string{fleet.BundleLabel: b.Name}
	for _, k := range []string{fleet.RepoLabel, fleet.HelmNameLabel} {
		if v := b.Labels[k]; v != "" {
			out[k] = v
		}
	}
	return out
}

func (pg *progressive) rolledBackBefore() int {
	if pg.roll == nil || pg.roll.Status.Revision != pg.result.Status.Revision {
		return 0
	}
	return pg.roll.Status.RolledBack
}
