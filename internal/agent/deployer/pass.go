package deployer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/agent/gates"
	"github.com/fleetgo/fleet/internal/bdstatus"
	"github.com/fleetgo/fleet/internal/bundlevalues"
	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/helmrelease"
	"github.com/fleetgo/fleet/internal/metrics"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A pass over one BundleDeployment: decide what the release needs, deploy when it needs that,
// check the deployed objects, and report it all in the status, which the generated status
// handler writes once. next then says when to look again.

// inputs are what a deploy uses besides the bundle's files, read afresh on every pass: a change
// in valuesFrom sources or downstreamResources copies is a reason to deploy.
type inputs struct {
	values     map[string]any
	valuesHash string
	downstream []metav1.Object
}

// outcome is what a pass leaves for next: when to look again, the deploy error to retry with
// backoff, and the resourceVersion its status write replaces.
type outcome struct {
	requeue  time.Duration
	err      error
	replaces string
	stale    bool
}

// reconcile is the pass of one BundleDeployment; it returns the status to write.
func (h *handler) reconcile(bd *fleet.BundleDeployment, status fleet.BundleDeploymentStatus) (fleet.BundleDeploymentStatus, error) {
	if bd.DeletionTimestamp != nil || bd.Spec.DeploymentID == "" {
		return status, nil
	}
	key := bd.Namespace + "/" + bd.Name
	if h.mem.stale(key, bd) {
		h.mem.record(key, outcome{requeue: staleRetry, stale: true})
		return status, nil
	}
	now := time.Now()
	rel, err := h.deployer.Current(h.ctx, bd.Name, &bd.Spec.Options)
	if err != nil {
		return status, err
	}
	deployed, requeue, deployErr := h.deploy(bd, rel, &status, now)
	if deployed != nil {
		rel = deployed
	}
	if rel != nil {
		// (A release that renders nothing is checked too: nothing to wait for, nothing modified.)
		h.changes.checked(bd.Name, time.Now())
		h.check(bd, rel, &status, deployed != nil, now)
	}
	bdstatus.Report(bd, &status, now)
	if deployed != nil {
		gates.Clear(&status) // a new deployment is gated afresh
	}
	if every := h.gates.Evaluate(h.ctx, bd, &status, now); every > 0 && (requeue == 0 || every < requeue) {
		requeue = every
	}
	h.mem.record(key, outcome{requeue: requeue, err: deployErr, replaces: bd.ResourceVersion})
	return status, nil
}

// next records the version the pass's status write replaced (so a cache still showing it is
// waited out) and schedules the next look: a deploy error that may pass is returned for the
// controller's backoff.
func (h *handler) next(key string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
	o, ok := h.mem.written(key, bd)
	if !ok || bd == nil {
		return bd, nil
	}
	switch {
	case o.err != nil && !helmrelease.IsPermanent(o.err):
		return bd, o.err
	case o.requeue > 0:
		h.bds.EnqueueAfter(bd.Namespace, bd.Name, o.requeue)
	default:
		h.bds.EnqueueAfter(bd.Namespace, bd.Name, h.interval)
	}
	return bd, nil
}

// cleanupDeleted uninstalls what a deleted BundleDeployment deployed.
func (h *handler) cleanupDeleted(key string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
	if bd != nil && bd.DeletionTimestamp == nil {
		return bd, nil
	}
	h.mem.forget(key)
	name := key[strings.LastIndex(key, "/")+1:]
	h.changes.forget(name)
	h.gates.Forget(name)
	metrics.ForgetBundleDeployment(name)
	return bd, h.cleanup(name)
}

// deploy installs or upgrades the release when decide says so. It returns the new release (nil
// when nothing was deployed), how soon to look again, and the deploy error, already recorded in
// status.
func (h *handler) deploy(bd *fleet.BundleDeployment, rel *helmdeployer.Release, status *fleet.BundleDeploymentStatus, now time.Time) (*helmdeployer.Release, time.Duration, error) {
	if bdstatus.Held(bd) {
		return nil, 0, nil // (before reading any input)
	}
	in, err := h.inputs(bd)
	if err != nil {
		return nil, 0, h.failed(bd, status, err, now)
	}
	act := bdstatus.Decide(bd, rel, status, in.valuesHash)
	if act == bdstatus.Record {
		if act, err = h.overwrittenGone(bd, rel); err != nil {
			return nil, 0, h.failed(bd, status, err, now)
		}
	}
	if act == bdstatus.Record {
		bdstatus.Applied(bd, rel, status, now)
		return nil, 0, nil
	}
	if msg := h.waitingFor(bd); msg != "" {
		fleet.SetCondition(&status.Conditions, fleet.ConditionDeployed, corev1.ConditionUnknown, "WaitingForDependencies", msg, now)
		return nil, DependsOnRetry, nil
	}
	files, opts, err := h.files(bd)
	if err != nil {
		return nil, 0, h.failed(bd, status, err, now)
	}
	h.log(bd.Name).WithField("deploymentID", bd.Spec.DeploymentID).Debug("deploying")
	deployed, err := h.deployer.Deploy(h.ctx, helmdeployer.Input{BundleID: bd.Name, Commit: bd.Labels[fleet.CommitLabel],
		DeploymentID: bd.Spec.DeploymentID, Files: files, Options: opts, Values: in.values, ValuesHash: in.valuesHash,
		Downstream: in.downstream})
	if err != nil {
		err = h.failed(bd, status, err, now)
		switch {
		case takeoverPending(err, opts.OverwrittenResources):
			return nil, TakeoverRetry, err
		case helmrelease.IsPermanent(err):
			return nil, PermanentRetry, err
		}
		return nil, 0, err
	}
	h.log(bd.Name).WithField("release", deployed.String()).Info("deployed")
	bdstatus.Applied(bd, deployed, status, now)
	return deployed, 0, nil
}

// inputs reads the valuesFrom sources and the downstreamResources copies.
func (h *handler) inputs(bd *fleet.BundleDeployment) (inputs, error) {
	opts, err := h.StoredValues(bd)
	if err != nil {
		return inputs{}, err
	}
	values, valuesHash, err := h.deployer.Values(h.ctx, opts)
	if err != nil {
		return inputs{}, err
	}
	downstream, downstreamHash, err := h.downstream(bd)
	if err != nil {
		return inputs{}, err
	}
	if downstreamHash != "" {
		sum := sha256.Sum256([]byte(valuesHash + "/" + downstreamHash))
		valuesHash = hex.EncodeToString(sum[:])[:32]
	}
	return inputs{values: values, valuesHash: valuesHash, downstream: downstream}, nil
}

// StoredValues is the BundleDeployment's options with the Helm values of its options Secret
// (bundlevalues) when the manager keeps them there, as it and Fleet 0.13 and later do. A Secret
// that cannot be read or does not match spec.valuesHash (being written) retries the pass; one
// that is not the deployment's is a permanent error.
func (h *handler) StoredValues(bd *fleet.BundleDeployment) (*fleet.BundleDeploymentOptions, error) {
	if h.upstream == nil {
		return &bd.Spec.Options, nil
	}
	opts, err := bundlevalues.ReadDeploymentOptions(h.ctx, func(ctx context.Context, ns, name string) (*corev1.Secret, error) {
		return h.upstream.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	}, bd)
	if errors.Is(err, bundlevalues.ErrInvalid) {
		return nil, helmrelease.Permanent(err)
	}
	return opts, err
}

// overwrittenGone turns record into upgrade when a resource taken over from another bundle has
// gone with that bundle's removal.
func (h *handler) overwrittenGone(bd *fleet.BundleDeployment, rel *helmdeployer.Release) (bdstatus.Action, error) {
	if len(bd.Spec.Options.OverwrittenResources) == 0 {
		return bdstatus.Record, nil
	}
	gone, err := h.deployer.MissingOverwritten(h.ctx, rel, bd.Spec.Options.OverwrittenResources)
	if err != nil {
		return bdstatus.Record, err
	}
	if gone != "" {
		h.log(bd.Name).WithField("resource", gone).Info("an overwritten resource is gone: deploying again")
		return bdstatus.Upgrade, nil
	}
	return bdstatus.Record, nil
}

// takeoverPending says whether err is Helm refusing a resource another release owns that the
// deployment lists as taken over: the other release is on its way out (or its resources gone
// with it soon), and the deploy succeeds once it is.
func takeoverPending(err error, overwritten []fleet.OverwrittenResource) bool {
	msg := err.Error()
	if !strings.Contains(msg, "invalid ownership metadata") {
		return false
	}
	return slices.ContainsFunc(overwritten, func(o fleet.OverwrittenResource) bool {
		return strings.Contains(msg, o.Kind+" \""+o.Name+"\"")
	})
}

// failed records a deploy error: Deployed=False always, Installed=False when only the user can
// fix it. It returns err.
func (h *handler) failed(bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus, err error, now time.Time) error {
	bdstatus.MarkFailed(status, err, now)
	switch {
	case takeoverPending(err, bd.Spec.Options.OverwrittenResources):
		h.log(bd.Name).WithError(err).Info("waiting for the release that owns a resource listed in overwrites to go")
	case helmrelease.IsPermanent(err):
		h.log(bd.Name).WithError(err).Warn("deploy failed; fix the bundle")
	}
	return err
}

// check records readiness and drift of the release and corrects drift when asked.
func (h *handler) check(bd *fleet.BundleDeployment, rel *helmdeployer.Release, status *fleet.BundleDeploymentStatus, fresh bool, now time.Time) {
	opts := &bd.Spec.Options
	res, err := h.monitor.Check(h.ctx, bd.Name, rel, opts, fresh)
	if err == nil && !res.NonModified && status.NonModified {
		metrics.DriftDetected(bd.Name)
	}
	cd := driftCorrection(bd)
	if err == nil && !res.NonModified && cd != nil && cd.Enabled &&
		fleet.Applied(&bd.Spec, status) && !bd.Spec.Paused {
		h.log(bd.Name).WithField("release", rel.String()).Info("correcting drift")
		maxHistory := 0
		if opts.Helm != nil {
			maxHistory = opts.Helm.MaxHistory
		}
		if rerr := h.deployer.Rollback(h.ctx, rel, opts.ServiceAccount, cd.Force, cd.KeepFailHistory, maxHistory); rerr != nil {
			h.log(bd.Name).WithError(rerr).Warn("drift correction failed")
			fleet.SetCondition(&status.Conditions, fleet.ConditionDeployed, corev1.ConditionFalse, "DriftCorrectionFailed", rerr.Error(), now)
		} else if cur, cerr := h.deployer.Current(h.ctx, bd.Name, opts); cerr == nil && cur != nil {
			metrics.DriftCorrected(bd.Name)
			status.Release = cur.String()
			res, err = h.monitor.Check(h.ctx, bd.Name, cur, opts, true)
		}
	}
	if err != nil {
		fleet.SetCondition(&status.Conditions, fleet.ConditionMonitored, corev1.ConditionFalse, "Error", err.Error(), now)
		return
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionMonitored, corev1.ConditionTrue, "", "", now)
	h.log(bd.Name).WithFields(logrus.Fields{"ready": res.Ready, "nonModified": res.NonModified, "fresh": fresh, "counts": res.Counts}).Debug("checked")
	res.Apply(status)
}

func driftCorrection(bd *fleet.BundleDeployment) *fleet.CorrectDrift {
	if bd.Spec.CorrectDrift != nil {
		return bd.Spec.CorrectDrift
	}
	return bd.Spec.Options.CorrectDrift
}
