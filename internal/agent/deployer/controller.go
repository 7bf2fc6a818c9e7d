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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/agent/gates"
	"github.com/fleetgo/fleet/internal/agent/monitor"
	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/helmrelease"
	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Requeue intervals.
const (
	// DependsOnRetry is how soon a BundleDeployment waiting for its dependencies looks again.
	DependsOnRetry = 5 * time.Second
	// PermanentRetry is how soon a deploy that failed for a reason only the user can fix is
	// tried again (a change of the BundleDeployment retries at once).
	PermanentRetry = 2 * time.Minute
	// TakeoverRetry is how soon a deploy is tried again that failed on a resource another
	// release still owns and this one lists as taken over (options.overwrites): that release is
	// going, as when fleet apply moves a resource between bundles.
	TakeoverRetry = 3 * time.Second
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
	// Gates runs the health gates progressive rollouts ask for (nil: none are run).
	Gates *gates.Checker
	// Sealing unseals the bundles' SOPS files the manager sealed to this cluster.
	Sealing SealingKey
}

type handler struct {
	// mem hands each pass's outcome to its status write, and remembers what that write
	// replaced (memory.go).
	mem      passMemory
	ctx      context.Context
	bds      fleetcontrollers.BundleDeploymentController
	contents *contentCache
	deployer *helmdeployer.Deployer
	monitor  *monitor.Monitor
	ns       string
	interval time.Duration
	changes  *Changes
	upstream kubernetes.Interface
	gates    *gates.Checker
	sealing  SealingKey
}

// Register starts deploying the namespace's BundleDeployments.
func Register(ctx context.Context, d Deps) {
	h := &handler{ctx: ctx, bds: d.BundleDeployments, contents: newContentCache(d.Contents),
		deployer: d.Deployer, monitor: d.Monitor, ns: d.Namespace, interval: d.MonitorInterval, changes: d.Changes, upstream: d.Upstream, gates: d.Gates, sealing: d.Sealing}
	if h.changes == nil {
		h.changes = NewChanges(d.BundleDeployments, d.Namespace)
	}
	// A gate check runs off the deploy workers; its end brings its BundleDeployment back.
	d.Gates.Notify(func(name string) { d.BundleDeployments.Enqueue(d.Namespace, name) })
	if h.interval <= 0 {
		h.interval = DefaultMonitorInterval
	}
	// One pass per change: cleanup of a deleted one, then decide -> deploy -> check -> report,
	// whose status the generated handler writes once, then when to look again.
	d.BundleDeployments.OnChange(ctx, "bundledeployment-cleanup", h.cleanupDeleted)
	fleetcontrollers.RegisterBundleDeploymentStatusHandler(ctx, d.BundleDeployments, "", "bundledeployment-deploy", h.reconcile)
	d.BundleDeployments.OnChange(ctx, "bundledeployment-next", h.next)
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
			return nil, "", helmrelease.Permanent(fmt.Errorf("%s: kind must be Secret or ConfigMap", where))
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

// cleanup uninstalls the releases of a BundleDeployment that no longer exists.
func (h *handler) cleanup(name string) error {
	h.monitor.Forget(name)
	rels, err := h.deployer.Releases(h.ctx, name)
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
