// Package deployer is the agent's BundleDeployment controller: it deploys each
// BundleDeployment of its cluster namespace on the manager as a Helm release in its own
// cluster, checks readiness and drift, corrects drift when asked, uninstalls releases whose
// BundleDeployment is gone, and writes the BundleDeployment's status back. (agent)
package deployer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/pkg/agent/monitor"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/helmdeployer"
	"github.com/fleetgo/fleet/pkg/logfields"
	"github.com/fleetgo/fleet/pkg/metrics"
	"github.com/fleetgo/fleet/pkg/names"
	"github.com/fleetgo/fleet/pkg/summary"
)

// Requeue intervals.
const (
	// DependsOnRetry is how soon a BundleDeployment waiting for its dependencies looks again.
	DependsOnRetry = 5 * time.Second
	// PermanentRetry is how soon a deploy that failed for a reason only the user can fix is
	// tried again (a change of the BundleDeployment retries at once).
	PermanentRetry = 2 * time.Minute
	// DefaultMonitorInterval is how often a deployed bundle is re-checked besides the watches
	// (and its valuesFrom sources re-read).
	DefaultMonitorInterval = time.Minute
	// changeInterval is the least time between two checks of a BundleDeployment caused by
	// changes of its deployed objects: the first change after a quiet spell is looked at at
	// once, the rest of a burst together when the interval is up (the queue keeps the earliest
	// time of a key already waiting, so this is also the longest a change waits).
	changeInterval = 50 * time.Millisecond
	// staleRetry is how soon a BundleDeployment is looked at again when the cache still holds
	// the version the agent's own last status write replaced.
	staleRetry = 50 * time.Millisecond
)

// Deps are what the controller needs.
type Deps struct {
	// BundleDeployments is the manager's BundleDeployment controller, restricted to the
	// cluster namespace.
	BundleDeployments fleetcontrollers.BundleDeploymentController
	// Contents reads Contents by name on the manager.
	Contents fleetcontrollers.ContentClient
	Deployer *helmdeployer.Deployer
	Monitor  *monitor.Monitor
	// Namespace is the cluster namespace on the manager.
	Namespace string
	// MonitorInterval overrides DefaultMonitorInterval when positive.
	MonitorInterval time.Duration
	// Changes is what the monitor tells of changed objects; the controller records its checks there.
	Changes *Changes
	// Upstream reads, by name, the copies of downstreamResources the manager puts in the
	// cluster namespace.
	Upstream kubernetes.Interface
}

type handler struct {
	// replaced maps a BundleDeployment's key to the resourceVersion its last status write
	// replaced. Seeing that version again means the cache has not caught up with the write yet:
	// working from it would only end in a conflict.
	replaced sync.Map
	ctx      context.Context
	bds      fleetcontrollers.BundleDeploymentController
	contents *contentCache
	deployer *helmdeployer.Deployer
	monitor  *monitor.Monitor
	ns       string
	interval time.Duration
	changes  *Changes
	upstream kubernetes.Interface
}

// Register starts deploying the namespace's BundleDeployments.
func Register(ctx context.Context, d Deps) {
	h := &handler{ctx: ctx, bds: d.BundleDeployments, contents: newContentCache(d.Contents),
		deployer: d.Deployer, monitor: d.Monitor, ns: d.Namespace, interval: d.MonitorInterval, changes: d.Changes, upstream: d.Upstream}
	if h.changes == nil {
		h.changes = NewChanges(d.BundleDeployments, d.Namespace)
	}
	if h.interval <= 0 {
		h.interval = DefaultMonitorInterval
	}
	d.BundleDeployments.OnChange(ctx, "bundledeployment-deploy", h.OnChange)
}

// Changes turns changes of deployed objects into checks of their BundleDeployments, at most one
// per changeInterval each, the first without delay.
type Changes struct {
	bds       fleetcontrollers.BundleDeploymentController
	namespace string
	// last maps a BundleDeployment's name to the time.Time of its last check.
	last sync.Map
}

// NewChanges returns the Changes of the cluster namespace's BundleDeployments.
func NewChanges(bds fleetcontrollers.BundleDeploymentController, namespace string) *Changes {
	return &Changes{bds: bds, namespace: namespace}
}

// Changed asks for a BundleDeployment to be checked again: one of its deployed objects changed.
func (c *Changes) Changed(name string) {
	if t, ok := c.last.Load(name); ok {
		if wait := changeInterval - time.Since(t.(time.Time)); wait > 0 {
			c.bds.EnqueueAfter(c.namespace, name, wait)
			return
		}
	}
	c.bds.Enqueue(c.namespace, name)
}

func (c *Changes) checked(name string, at time.Time) { c.last.Store(name, at) }

func (c *Changes) forget(name string) { c.last.Delete(name) }

func (h *handler) log(name string) *logrus.Entry {
	return logrus.WithFields(logfields.For("agent-bundledeployment", h.ns, name))
}

// OnChange deploys, monitors and reports one BundleDeployment.
func (h *handler) OnChange(key string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
	if bd == nil || bd.DeletionTimestamp != nil {
		h.replaced.Delete(key)
		name := key[strings.LastIndex(key, "/")+1:]
		h.changes.forget(name)
		metrics.ForgetBundleDeployment(name)
		return bd, h.cleanup(name)
	}
	if bd.Spec.DeploymentID == "" {
		return bd, nil
	}
	if rv, ok := h.replaced.Load(key); ok && rv == bd.ResourceVersion {
		h.bds.EnqueueAfter(bd.Namespace, bd.Name, staleRetry)
		return bd, nil
	}
	status := bd.Status.DeepCopy()
	now := time.Now()
	opts := &bd.Spec.Options

	rel, err := h.deployer.Current(h.ctx, bd.Name, opts)
	if err != nil {
		return bd, err
	}
	deployed, requeue, deployErr := h.deploy(bd, rel, status, now)
	if deployed != nil {
		rel = deployed
	}
	if rel != nil && rel.Manifest != "" {
		h.changes.checked(bd.Name, time.Now())
		h.check(bd, rel, status, deployed != nil, now)
	}
	h.display(bd, status, now)

	if !equality.Semantic.DeepEqual(&bd.Status, status) {
		replaced := bd.ResourceVersion
		bd = bd.DeepCopy()
		bd.Status = *status
		updated, err := h.bds.UpdateStatus(bd)
		if err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				h.bds.Enqueue(bd.Namespace, bd.Name)
				return bd, nil
			}
			return bd, err
		}
		if updated.ResourceVersion != replaced {
			// (An update the apiserver found to change nothing keeps the version.)
			h.replaced.Store(key, replaced)
		}
		bd = updated
	}
	switch {
	case deployErr != nil && !helmdeployer.IsPermanent(deployErr):
		return bd, deployErr
	case requeue > 0:
		h.bds.EnqueueAfter(bd.Namespace, bd.Name, requeue)
	default:
		h.bds.EnqueueAfter(bd.Namespace, bd.Name, h.interval)
	}
	return bd, nil
}

// deploy installs or upgrades the release when the BundleDeployment asks for something the
// release does not have yet. It returns the new release (nil when nothing was deployed), how
// soon to look again, and the deploy error, already recorded in status.
func (h *handler) deploy(bd *fleet.BundleDeployment, rel *helmdeployer.Release, status *fleet.BundleDeploymentStatus, now time.Time) (*helmdeployer.Release, time.Duration, error) {
	spec := &bd.Spec
	if spec.Paused || spec.OffSchedule || spec.WaitingForValues {
		return nil, 0, nil
	}
	opts := &spec.Options
	// valuesFrom sources are read on every pass: a change in them is a reason to deploy.
	values, valuesHash, err := h.deployer.Values(h.ctx, opts)
	if err != nil {
		return nil, 0, h.failed(bd, status, err, now)
	}
	// So are the copies of downstreamResources.
	downstream, downstreamHash, err := h.downstream(bd)
	if err != nil {
		return nil, 0, h.failed(bd, status, err, now)
	}
	if downstreamHash != "" {
		sum := sha256.Sum256([]byte(valuesHash + "/" + downstreamHash))
		valuesHash = hex.EncodeToString(sum[:])[:32]
	}
	upToDate := rel != nil && rel.Status == release.StatusDeployed && rel.DeploymentID == spec.DeploymentID &&
		rel.SyncGeneration == opts.ForceSyncGeneration && rel.ValuesHash == valuesHash
	if rel != nil && rel.MadeByFleet {
		// A Fleet agent deployed it before the move: what it reported applying stands until the
		// manager asks for something else, so moving over upgrades each release at most once.
		upToDate = rel.Status == release.StatusDeployed && status.AppliedDeploymentID == spec.DeploymentID &&
			status.Release == rel.String()
	}
	if upToDate && len(opts.OverwrittenResources) > 0 {
		// Resources taken over from another bundle may have gone with that bundle's removal.
		gone, err := h.deployer.MissingOverwritten(h.ctx, rel, opts.OverwrittenResources)
		if err != nil {
			return nil, 0, h.failed(bd, status, err, now)
		}
		if gone != "" {
			h.log(bd.Name).WithField("resource", gone).Info("an overwritten resource is gone: deploying again")
			upToDate = false
		}
	}
	if upToDate {
		// The release is what the spec asks for (perhaps the status write after the deploy was
		// lost): record it without deploying again.
		h.applied(bd, rel, status, now)
		return nil, 0, nil
	}
	if msg := h.waitingFor(bd); msg != "" {
		fleet.SetCondition(&status.Conditions, fleet.ConditionDeployed, corev1.ConditionUnknown, "WaitingForDependencies", msg, now)
		return nil, DependsOnRetry, nil
	}
	files, err := h.contents.Files(manifestID(spec.DeploymentID))
	if err != nil {
		return nil, 0, h.failed(bd, status, err, now)
	}
	h.log(bd.Name).WithField("deploymentID", spec.DeploymentID).Debug("deploying")
	deployed, err := h.deployer.Deploy(h.ctx, helmdeployer.Input{BundleID: bd.Name, Commit: bd.Labels[fleet.CommitLabel],
		DeploymentID: spec.DeploymentID, Files: files, Options: *opts, Values: values, ValuesHash: valuesHash, Downstream: downstream})
	if err != nil {
		err = h.failed(bd, status, err, now)
		if helmdeployer.IsPermanent(err) {
			return nil, PermanentRetry, err
		}
		return nil, 0, err
	}
	h.log(bd.Name).WithField("release", deployed.String()).Info("deployed")
	h.applied(bd, deployed, status, now)
	return deployed, 0, nil
}

// downstream reads the manager's copies of the BundleDeployment's downstreamResources, as the
// objects to create downstream (under their own names), and a hash of their data ("" without
// any). A copy not there yet is an error retried until the manager has made it.
func (h *handler) downstream(bd *fleet.BundleDeployment) ([]metav1.Object, string, error) {
	res := bd.Spec.Options.DownstreamResources
	if len(res) == 0 {
		return nil, "", nil
	}
	if h.upstream == nil {
		return nil, "", fmt.Errorf("downstreamResources: this agent cannot read the manager's copies")
	}
	sum := sha256.New()
	var out []metav1.Object
	for i, r := range res {
		copyName := names.DownstreamCopy(bd.Name, r.Name)
		where := fmt.Sprintf("downstreamResources[%d]: %s %s", i, r.Kind, r.Name)
		missing := fmt.Errorf("%s: no copy in the cluster namespace yet (the manager copies it from namespace %s, where it must exist)",
			where, bd.Labels[fleet.BundleNamespaceLabel])
		var (
			obj     metav1.Object
			version string
			err     error
		)
		switch r.Kind {
		case "Secret":
			var s *corev1.Secret
			if s, err = h.upstream.CoreV1().Secrets(h.ns).Get(h.ctx, copyName, metav1.GetOptions{}); err == nil {
				obj, version = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.Name}, Type: s.Type, Data: s.Data}, s.ResourceVersion
			}
		case "ConfigMap":
			var cm *corev1.ConfigMap
			if cm, err = h.upstream.CoreV1().ConfigMaps(h.ns).Get(h.ctx, copyName, metav1.GetOptions{}); err == nil {
				obj, version = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: r.Name}, Data: cm.Data, BinaryData: cm.BinaryData}, cm.ResourceVersion
			}
		default:
			return nil, "", helmdeployer.Permanent(fmt.Errorf("%s: kind must be Secret or ConfigMap", where))
		}
		if apierrors.IsNotFound(err) {
			return nil, "", missing
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", where, err)
		}
		fmt.Fprintf(sum, "%d:%s/%s:%s:", i, r.Kind, r.Name, version)
		out = append(out, obj)
	}
	return out, hex.EncodeToString(sum.Sum(nil))[:32], nil
}

func (h *handler) applied(bd *fleet.BundleDeployment, rel *helmdeployer.Release, status *fleet.BundleDeploymentStatus, now time.Time) {
	status.AppliedDeploymentID = bd.Spec.DeploymentID
	status.Release = rel.String()
	gen := bd.Spec.Options.ForceSyncGeneration
	status.SyncGeneration = &gen
	status.DownstreamResourcesGeneration = bd.Spec.DownstreamResourcesGeneration
	fleet.SetCondition(&status.Conditions, fleet.ConditionDeployed, corev1.ConditionTrue, "", "", now)
	fleet.SetCondition(&status.Conditions, fleet.ConditionInstalled, corev1.ConditionTrue, "", "", now)
}

// failed records a deploy error: Deployed=False always, Installed=False when only the user can
// fix it. It returns err.
func (h *handler) failed(bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus, err error, now time.Time) error {
	msg := err.Error()
	fleet.SetCondition(&status.Conditions, fleet.ConditionDeployed, corev1.ConditionFalse, "Error", msg, now)
	if helmdeployer.IsPermanent(err) {
		fleet.SetCondition(&status.Conditions, fleet.ConditionInstalled, corev1.ConditionFalse, "Error", msg, now)
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
		status.AppliedDeploymentID == bd.Spec.DeploymentID && !bd.Spec.Paused {
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

// display fills the Ready condition and the display strings from the status just computed.
func (h *handler) display(bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus, now time.Time) {
	view := &fleet.BundleDeployment{Spec: bd.Spec, Status: *status}
	state := summary.State(view)
	status.Display.State = string(state)
	status.Display.Deployed = "Yes"
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionDeployed); c != nil && c.Status != corev1.ConditionTrue {
		status.Display.Deployed = c.Message
		if c.Reason != "" && c.Message == "" {
			status.Display.Deployed = c.Reason
		}
	}
	status.Display.Monitored = "Yes"
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionMonitored); c == nil {
		status.Display.Monitored = ""
	} else if c.Status != corev1.ConditionTrue {
		status.Display.Monitored = c.Message
	}
	if state == fleet.Ready {
		fleet.SetCondition(&status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "", now)
		return
	}
	msg := summary.Message(view, state)
	if msg == "" {
		msg = string(state)
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, string(state), msg, now)
}

// cleanup uninstalls the releases of a BundleDeployment that no longer exists.
func (h *handler) cleanup(name string) error {
	h.monitor.Forget(name)
	rels, err := h.deployer.Releases(name)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rels {
		h.log(name).WithField("release", r.String()).Info("uninstalling: bundledeployment deleted")
		errs = append(errs, h.deployer.Uninstall(h.ctx, r))
	}
	return errors.Join(errs...)
}

// manifestID is the Content name part of a deploymentID ("content:optionsHash").
func manifestID(deploymentID string) string {
	id, _, _ := strings.Cut(deploymentID, ":")
	return id
}
