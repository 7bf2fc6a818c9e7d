// Package cluster gives every Cluster its namespace on the manager and rolls the cluster's
// BundleDeployments up into its status, marking clusters whose agent stopped checking in as
// Offline rather than showing a stale Ready. (manager)
package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/summary"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Display states beyond the bundle states.
const (
	// StateWaitCheckIn: the agent has never checked in.
	StateWaitCheckIn = "WaitCheckIn"
	// StateOffline: the agent has not checked in for more than summary.OfflineAfter intervals.
	StateOffline = "Offline"
	// statusDelay coalesces the roll-ups that agents' reports (status changes) trigger.
	statusDelay = 500 * time.Millisecond
	// specDelay coalesces the roll-ups that new, re-specified or deleted BundleDeployments
	// trigger: they only add targets waiting to be applied (or take them away), and while
	// Bundles roll out to (or leave) thousands of clusters a longer window saves one status
	// write per cluster and Bundle. An agent's report within the window brings the roll-up
	// forward.
	specDelay = 5 * time.Second
	// busyDelay replaces specDelay for a cluster whose status was written within the last
	// busyDelay: under a rollout of many Bundles a cluster's roll-up then follows its new
	// deployments at most every busyDelay, rather than once per Bundle.
	busyDelay = 30 * time.Second
	// busyReportDelay: the roll-ups that reports trigger for a cluster whose status was written
	// within the last busyDelay wait until busyReportDelay has passed since that write. While a
	// rollout of many Bundles reaches a cluster, its status then follows its agent's reports at
	// most every busyReportDelay, not once per report (each such write also raced the agent's
	// check-in and was refused as a conflict); a report after a quiet spell still shows within
	// statusDelay.
	busyReportDelay = 10 * time.Second
	// smallInstallation: with at most this many Clusters, every roll-up waits statusDelay only.
	// The longer windows above save status writes while Bundles roll out to thousands of
	// clusters; on a small installation they would only leave a Cluster's status seconds behind
	// its BundleDeployments (and behind the GitRepos and Bundles that report them Ready).
	smallInstallation = 100
)

// Deps are what the controller reads and writes.
type Deps struct {
	Clusters          fleetcontrollers.ClusterController
	BundleDeployments fleetcontrollers.BundleDeploymentController
	Namespaces        corecontrollers.NamespaceController
	// CheckinInterval is the agents' check-in interval, read on every reconcile so a config
	// change applies at once.
	CheckinInterval func() time.Duration
	// Revoke, when set, takes a deleted Cluster's agent identity away before its namespace goes.
	Revoke func(*fleet.Cluster) error
	// StatusSteps add what other controllers know to the status (the agent's configuration, the
	// import), after the roll-up: the status is written once per reconcile.
	StatusSteps []StatusStep
}

// StatusStep returns the status with what it knows of the Cluster added.
type StatusStep func(*fleet.Cluster, fleet.ClusterStatus) (fleet.ClusterStatus, error)

type handler struct {
	clusters   fleetcontrollers.ClusterController
	bdCache    fleetcontrollers.BundleDeploymentCache
	namespaces corecontrollers.NamespaceController
	interval   func() time.Duration
	revoke     func(*fleet.Cluster) error
	steps      []StatusStep
	now        func() time.Time
	// mem is what the controller remembers between passes (memory.go).
	mem *memory
}

// rollup is what a roll-up was made from and what it showed.
type rollup struct {
	// events is the cluster's count of BundleDeployment events when it listed them.
	events uint64
	// phase is the agent's: StateWaitCheckIn, StateOffline or "" (checking in); offline is the
	// check-in an Offline message names.
	phase    string
	offline  time.Time
	interval time.Duration
	// state and ready are the Display it produced.
	state, ready string
}

// Register starts reconciling Clusters, again whenever a BundleDeployment in a cluster's
// namespace changes.
func Register(ctx context.Context, d Deps) {
	h := &handler{clusters: d.Clusters, bdCache: d.BundleDeployments.Cache(), namespaces: d.Namespaces,
		interval: d.CheckinInterval, revoke: d.Revoke, steps: d.StatusSteps, now: time.Now,
		mem: &memory{clusters: &atomic.Int64{}}}
	d.Clusters.OnChange(ctx, "cluster", h.OnChange)
	fleetcontrollers.RegisterClusterStatusHandler(ctx, d.Clusters, "", "cluster-status", h.statusHandler)
	enqueue := func(obj any, delay time.Duration) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if bd, ok := obj.(*fleet.BundleDeployment); ok {
			if ns, name := bd.Labels[fleet.ClusterNamespaceLabel], bd.Labels[fleet.ClusterLabel]; ns != "" && name != "" {
				h.mem.changed(ns + "/" + name)
				d.Clusters.EnqueueAfter(ns, name, h.delay(ns+"/"+name, delay))
			}
		}
	}
	_, _ = d.Clusters.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { h.mem.clusters.Add(1) },
		DeleteFunc: func(any) { h.mem.clusters.Add(-1) },
	})
	_, _ = d.BundleDeployments.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { enqueue(obj, changeDelay(nil, obj)) },
		DeleteFunc: func(obj any) { enqueue(obj, changeDelay(obj, nil)) },
		UpdateFunc: func(old, cur any) { enqueue(cur, changeDelay(old, cur)) },
	})
}

// changeDelay is the base delay (specDelay or statusDelay) of the roll-up that a BundleDeployment
// change asks for: old is nil for a new one, cur nil for a deleted one. A report of its agent
// (a status change) shows soon; what the manager did (a new deployment, a new spec, a deletion)
// comes in numbers, one per cluster of a Bundle, and is coalesced: a cluster whose Bundles go
// one after the other has its status written once or twice, not once each.
func changeDelay(old, cur any) time.Duration {
	o, ok1 := old.(*fleet.BundleDeployment)
	c, ok2 := cur.(*fleet.BundleDeployment)
	if ok1 && ok2 && o.Generation == c.Generation {
		return statusDelay
	}
	return specDelay
}

// delay is how long a roll-up that a BundleDeployment change asks for with base waits (memory.go).
func (h *handler) delay(key string, base time.Duration) time.Duration {
	return h.mem.delay(key, base, h.now())
}

// OnChange keeps the Cluster's finalizer and namespace, and takes both away when it is deleted.
func (h *handler) OnChange(key string, c *fleet.Cluster) (*fleet.Cluster, error) {
	if c == nil {
		h.mem.forget(key)
		return nil, nil
	}
	if c.DeletionTimestamp != nil {
		return h.finalize(c)
	}
	if !slices.Contains(c.Finalizers, fleet.ClusterFinalizer) {
		c = c.DeepCopy()
		c.Finalizers = append(c.Finalizers, fleet.ClusterFinalizer)
		updated, err := h.clusters.Update(c)
		if err != nil {
			return c, err
		}
		// On to the namespace in the same pass: the status handler that follows then finds it,
		// and a registering agent's credential waits on it.
		c = updated
	}
	// Staleness is a matter of time passing: look again when the agent would count as offline.
	// Each check-in comes as an event of its own, so looking every interval (as this did) ran
	// every Cluster's handlers twice per interval for nothing.
	if d, ok := h.recheckIn(c); ok {
		h.clusters.EnqueueAfter(c.Namespace, c.Name, d)
	}
	return c, h.ensureNamespace(c, target.ClusterNamespace(c))
}

// recheckIn is how long until the Cluster turns Offline if its agent does not check in again
// (summary.Offline), just past that moment. There is none for a cluster whose agent never checked
// in or that is Offline already: only a check-in changes those.
func (h *handler) recheckIn(c *fleet.Cluster) (time.Duration, bool) {
	seen, interval := c.Status.Agent.LastSeen, h.interval()
	if seen.IsZero() || interval <= 0 {
		return 0, false
	}
	now := h.now()
	if summary.Offline(c, interval, now) {
		return 0, false
	}
	return seen.Add(summary.OfflineAfter*interval).Sub(now) + time.Second, true
}

// Recheck brings every Cluster back, for a new check-in interval to decide their staleness.
func Recheck(clusters fleetcontrollers.ClusterController) func() {
	return func() {
		all, err := clusters.Cache().List("", labels.Everything())
		if err != nil {
			return
		}
		for _, c := range all {
			clusters.Enqueue(c.Namespace, c.Name)
		}
	}
}

// statusHandler rolls the cluster's BundleDeployments up once its namespace exists, then runs the
// other controllers' steps (the generated status handler writes the status when it changed).
func (h *handler) statusHandler(c *fleet.Cluster, status fleet.ClusterStatus) (fleet.ClusterStatus, error) {
	if ns := target.ClusterNamespace(c); c.DeletionTimestamp == nil && h.namespaceExists(ns) {
		var err error
		if status, err = h.rollUp(c, ns, status); err != nil {
			return status, err
		}
	}
	for _, step := range h.steps {
		var err error
		if status, err = step(c, status); err != nil {
			return status, err
		}
	}
	return status, nil
}

// rollUp returns the status with the cluster's BundleDeployments rolled up into it. When nothing
// the roll-up reads changed since the last one that found the status as it should be (no
// BundleDeployment event, the same agent phase and interval, and the status still showing what
// that roll-up produced), status already is the roll-up: most Cluster events are check-ins,
// and at thousands of clusters listing and summing each cluster's deployments again for every
// one of them was a good part of the manager's idle work.
func (h *handler) rollUp(c *fleet.Cluster, ns string, status fleet.ClusterStatus) (fleet.ClusterStatus, error) {
	key := c.Namespace + "/" + c.Name
	// Read before listing: an event after this makes the remembered roll-up stale.
	was := rollup{events: h.mem.eventCount(key), interval: h.interval()}
	was.phase = h.phase(c)
	if was.phase == StateOffline {
		was.offline = c.Status.Agent.LastSeen.Time
	}
	if h.mem.unchanged(key, was, status, ns) {
		return status, nil
	}
	rolled, err := h.status(c, ns)
	if err != nil {
		return status, err
	}
	h.mem.rolledUp(key, was, rolled, !equality.Semantic.DeepEqual(rolled, c.Status), h.now())
	return rolled, nil
}

// phase is the agent's as the roll-up shows it: StateWaitCheckIn before its first check-in,
// StateOffline when it stopped checking in, "" while it checks in.
func (h *handler) phase(c *fleet.Cluster) string {
	switch {
	case c.Status.Agent.LastSeen.IsZero():
		return StateWaitCheckIn
	case summary.Offline(c, h.interval(), h.now()):
		return StateOffline
	}
	return ""
}

// namespaceExists looks in the cache, then (for one just created) on the apiserver.
func (h *handler) namespaceExists(ns string) bool {
	if _, err := h.namespaces.Cache().Get(ns); err == nil {
		return true
	}
	_, err := h.namespaces.Get(ns, metav1.GetOptions{})
	return err == nil
}

func (h *handler) ensureNamespace(c *fleet.Cluster, ns string) error {
	if _, err := h.namespaces.Cache().Get(ns); err == nil {
		return nil
	}
	_, err := h.namespaces.Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns,
		Labels: map[string]string{
			fleet.ManagedLabel:          "true",
			fleet.ClusterLabel:          c.Name,
			fleet.ClusterNamespaceLabel: c.Namespace,
		},
	}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s for cluster %s/%s: %w", ns, c.Namespace, c.Name, err)
	}
	return nil
}

// status rolls up the BundleDeployments in the cluster's namespace.
func (h *handler) status(c *fleet.Cluster, ns string) (fleet.ClusterStatus, error) {
	status := *c.Status.DeepCopy()
	status.Namespace = ns
	bds, err := h.bdCache.List(ns, labels.Everything())
	if err != nil {
		return status, err
	}
	slices.SortFunc(bds, func(a, b *fleet.BundleDeployment) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	var s fleet.BundleSummary
	var counts fleet.ResourceCounts
	repoReady, opReady := map[string]bool{}, map[string]bool{}
	for _, bd := range bds {
		name := bd.Labels[fleet.BundleNamespaceLabel] + "/" + bd.Labels[fleet.BundleLabel]
		state := summary.Add(&s, name, bd)
		// A GitRepo (HelmOp) is ready on the cluster when all its deployments there are.
		for label, into := range map[string]map[string]bool{fleet.RepoLabel: repoReady, fleet.HelmNameLabel: opReady} {
			if owner := bd.Labels[label]; owner != "" {
				key := bd.Labels[fleet.BundleNamespaceLabel] + "/" + owner
				ready, seen := into[key]
				into[key] = (ready || !seen) && state == fleet.Ready
			}
		}
		if rc := bd.Status.ResourceCounts; rc != nil {
			summary.AddCounts(&counts, *rc)
		}
	}
	status.Summary = s
	status.ResourceCounts = counts
	status.DesiredReadyGitRepos, status.ReadyGitRepos = len(repoReady), countTrue(repoReady)
	status.DesiredReadyHelmOps, status.ReadyHelmOps = len(opReady), countTrue(opReady)
	status.Display.ReadyBundles = fmt.Sprintf("%d/%d", s.Ready, s.DesiredReady)

	ready, reason, message := corev1.ConditionTrue, "", ""
	state := string(summary.WorstState(s))
	lastSeen := c.Status.Agent.LastSeen
	switch phase := h.phase(c); {
	case phase == StateWaitCheckIn:
		state = StateWaitCheckIn
		ready, reason, message = corev1.ConditionFalse, StateWaitCheckIn, "the agent has not checked in yet"
	case phase == StateOffline:
		state = StateOffline
		ready, reason = corev1.ConditionUnknown, StateOffline
		message = fmt.Sprintf("the agent has not checked in since %s", lastSeen.UTC().Format(time.RFC3339))
	case state != "":
		ready, reason, message = corev1.ConditionFalse, state, summary.ReadyMessage(s)
	}
	status.Display.State = state
	fleet.SetCondition(&status.Conditions, fleet.ConditionReady, ready, reason, message, h.now())
	return status, nil
}

// deleteNamespace deletes the cluster's namespace: the one derived from its name, and only when
// it carries the labels the manager gave it for this Cluster, so that a namespace made by anyone
// else under that name is never taken down with the Cluster.
func (h *handler) deleteNamespace(c *fleet.Cluster) error {
	name := target.ClusterNamespace(c)
	ns, err := h.namespaces.Get(name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !createdFor(ns, c) {
		logrus.WithFields(logfields.For("cluster", c.Namespace, c.Name)).
			Warnf("namespace %s was not created by the manager for this cluster: left in place", name)
		return nil
	}
	if err := h.namespaces.Delete(name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ns.UID}}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// createdFor reports whether ns carries the labels ensureNamespace gives a cluster's namespace.
func createdFor(ns *corev1.Namespace, c *fleet.Cluster) bool {
	return ns.Labels[fleet.ManagedLabel] == "true" && ns.Labels[fleet.ClusterLabel] == c.Name &&
		ns.Labels[fleet.ClusterNamespaceLabel] == c.Namespace
}

// finalize revokes the cluster's agent identity, deletes the cluster's namespace (and with it
// its BundleDeployments), then lets the Cluster go.
func (h *handler) finalize(c *fleet.Cluster) (*fleet.Cluster, error) {
	if h.revoke != nil {
		if err := h.revoke(c); err != nil {
			return c, err
		}
	}
	if err := h.deleteNamespace(c); err != nil {
		return c, err
	}
	if !slices.Contains(c.Finalizers, fleet.ClusterFinalizer) {
		return c, nil
	}
	c = c.DeepCopy()
	c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == fleet.ClusterFinalizer })
	return h.clusters.Update(c)
}

func countTrue(m map[string]bool) int {
	n := 0
	for _, ok := range m {
		if ok {
			n++
		}
	}
	return n
}
