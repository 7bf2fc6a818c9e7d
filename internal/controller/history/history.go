// Package history records each Bundle's deployment history (issue 66): which revision each
// cluster ran, from when until when (internal/history). A change of any of a Bundle's
// BundleDeployments brings one pass over them after PassDelay, which folds what they say
// (revision stamped by the bundle controller, applied, ready) into the Bundle's record: its
// BundleHistory (the cluster table) and a BundleRevision per revision. The record outlives the
// Bundle up to its retention (the configuration's historyRetention and historyRevisions). Each controller (a shard, or the unsharded one) records its own Bundles.
package history

import (
	"context"
	"strings"
	"sync"
	"time"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller/index"
	"github.com/fleetgo/fleet/internal/history"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

const (
	// PassDelay is how long after a change of a Bundle's deployments its history pass runs:
	// the changes of that while are one pass (a move is recorded at the second it was seen;
	// applied and ready at the pass).
	PassDelay = 5 * time.Second
	// retryFirst and retryMost bound the backoff of a failed pass (a write that lost a race).
	retryFirst = time.Second
	retryMost  = time.Minute
)

// byBundle indexes BundleRevisions by "namespace/bundle".
const byBundle = "fleetgo.io/revision-by-bundle"

// Deps are what the recorder reads and writes.
type Deps struct {
	BundleDeployments fleetcontrollers.BundleDeploymentController
	Histories         fleetcontrollers.BundleHistoryController
	Revisions         fleetcontrollers.BundleRevisionController
	// Bundles is read for what a revision deploys (nil: nothing of it is recorded), with the
	// Helm values of their values Secrets (Secrets).
	Bundles fleetcontrollers.BundleCache
	Secrets corecontrollers.SecretCache
	// SecretWriter writes each revision's Helm values into its values Secret, out of the
	// record (nil: they stay in the record, as unit tests of other parts record them).
	SecretWriter corecontrollers.SecretClient
	// SealKey seals the recorded inputs as a Rollout's revisions are (bundle.Seal).
	SealKey []byte
	// Mine selects the BundleDeployments of this controller's shard (nil: all): the
	// unsharded controller's cache holds every shard's.
	Mine labels.Selector
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Retention is how long the record keeps a revision no cluster runs any longer, and how
	// many such revisions at most (0: no cap), as the configuration in force says (nil: the
	// defaults, config.DefaultHistoryRetention and no cap).
	Retention func() (time.Duration, int)
}

type recorder struct {
	Deps
	// histories and revisions are the caches, asked for at registration: the factory starts
	// only the informers asked for before it starts.
	histories fleetcontrollers.BundleHistoryCache
	revisions fleetcontrollers.BundleRevisionCache
	queue     workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// current is what was last seen of each Bundle's deployments (by "namespace/name"), as
	// the watch delivered them; bundleOf is each deployment's Bundle, for the deletions. The
	// passes and snapshots read this, never the cache: the cache can be ahead of the events
	// delivered so far, and a deployment read there with the time of a move not yet seen would
	// put a revision in the record from before it ran.
	current  map[string]map[string]lastSeen
	bundleOf map[string]string
	// moved are the deployments of each Bundle whose revision changed since its last pass, and
	// when they last did (the record's time of the move).
	moved map[string]map[string]time.Time
	// snapshots are, per Bundle, what its deployments ran just before one moved a second time
	// since the last pass: a revision that ran for less than PassDelay is recorded too.
	snapshots map[string][]snapshot
	// captured are, per Bundle, what each revision its deployments moved to deploys, read from
	// the Bundle when the move was seen (nil: it had moved on already), for the pass to record.
	captured map[string]map[string]*fleet.RolloutRevision
}

type lastSeen struct {
	seen history.Seen
	// content and labels are the deployment's Content and labels, going that it is being deleted.
	content string
	labels  map[string]string
	going   bool
}

// snapshot is what a Bundle's deployments ran at a moment.
type snapshot struct {
	seen []history.Seen
	at   time.Time
}

// Register starts recording the history of every Bundle.
func Register(ctx context.Context, d Deps) {
	if d.Now == nil {
		d.Now = time.Now
	}
	r := &recorder{Deps: d, current: map[string]map[string]lastSeen{}, bundleOf: map[string]string{}, moved: map[string]map[string]time.Time{},
		snapshots: map[string][]snapshot{}, captured: map[string]map[string]*fleet.RolloutRevision{}, histories: d.Histories.Cache(), revisions: d.Revisions.Cache(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryFirst, retryMost),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployment-history"})}
	r.revisions.AddIndexer(byBundle, func(o *fleet.BundleRevision) ([]string, error) {
		return []string{o.Namespace + "/" + o.Spec.Bundle}, nil
	})
	// Every event, in order, with the object it carries: a keyed handler reads the cache when
	// its turn comes, so a revision a deployment ran while the shared queue lagged (one slow
	// handler is enough) would never be seen.
	if _, err := d.BundleDeployments.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.observed,
		UpdateFunc: func(_, obj any) { r.observed(obj) },
		DeleteFunc: r.deleted,
	}); err != nil {
		logrus.Errorf("deployment history: %v", err)
		return
	}
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	go r.work()
}

func (r *recorder) observed(obj any) {
	bd, ok := obj.(*fleet.BundleDeployment)
	if !ok || (r.Mine != nil && !r.Mine.Matches(labels.Set(bd.Labels))) {
		return
	}
	r.deploymentChanged(bd.Namespace+"/"+bd.Name, bd)
}

func (r *recorder) deleted(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		r.deploymentChanged(key, nil)
	}
}

func (r *recorder) deploymentChanged(key string, bd *fleet.BundleDeployment) {
	r.mu.Lock()
	bundle := r.bundleOf[key]
	if bd != nil {
		bundle = index.BundleKey(bd)
	}
	prev, had := r.current[bundle][key]
	switch {
	case bundle == "":
	case bd == nil:
		r.forget(bundle, key)
	default:
		ns, _, _ := strings.Cut(bundle, "/")
		cur := lastSeen{seen: seenOf(ns, bd), content: bd.Labels[fleet.ContentNameLabel], labels: bd.Labels, going: bd.DeletionTimestamp != nil}
		// A deployment first seen counts as moved: one made and moved on within a pass
		// delay keeps its first revision.
		if !had || prev.seen.Revision != cur.seen.Revision {
			r.movedAgain(bundle, key)
			r.capture(bundle, cur.seen.Revision, cur.content)
		}
		if r.current[bundle] == nil {
			r.current[bundle] = map[string]lastSeen{}
		}
		r.current[bundle][key] = cur
		r.bundleOf[key] = bundle
	}
	r.mu.Unlock()
	if bundle != "" {
		r.queue.AddAfter(bundle, PassDelay)
	}
}

// forget drops a deleted deployment. Called with r.mu held.
func (r *recorder) forget(bundle, key string) {
	delete(r.bundleOf, key)
	delete(r.current[bundle], key)
	if len(r.current[bundle]) == 0 {
		delete(r.current, bundle)
	}
}

// movedAgain notes that deployment key of bundle moves on from what r.current holds of it;
// when it had moved already since the bundle's last pass, what the bundle's deployments ran
// before this move is kept for the pass, so the revision in between is recorded. Called with
// r.mu held, before r.current holds the move.
func (r *recorder) movedAgain(bundle, key string) {
	now := r.Now()
	if r.moved[bundle] == nil {
		r.moved[bundle] = map[string]time.Time{}
	}
	if _, already := r.moved[bundle][key]; !already {
		r.moved[bundle][key] = now
		return
	}
	// Whole seconds, rounded up as a move is (history.Seen): the deployments it holds ran until then.
	snap := snapshot{at: now.Truncate(time.Second).Add(time.Second), seen: running(r.current[bundle], r.moved[bundle])}
	r.snapshots[bundle] = append(r.snapshots[bundle], snap)
	r.moved[bundle] = map[string]time.Time{key: now}
}

// running is what the deployments in current run (stamped, not going), each since its move
// if it moved since the last pass.
func running(current map[string]lastSeen, moved map[string]time.Time) []history.Seen {
	out := make([]history.Seen, 0, len(current))
	for k, d := range current {
		if d.seen.Revision == "" || d.going {
			continue // written before deployments were stamped, or going
		}
		s := d.seen
		s.Since = moved[k]
		out = append(out, s)
	}
	return out
}

// capture reads what revision of bundle deploys from the Bundle, the first time a deployment is
// seen moving to it since the last pass: a revision the Bundle moved on from before the pass is
// recorded with its inputs too. Called with r.mu held.
func (r *recorder) capture(bundle, revision, content string) {
	if revision == "" {
		return
	}
	if _, done := r.captured[bundle][revision]; done {
		return
	}
	if r.captured[bundle] == nil {
		r.captured[bundle] = map[string]*fleet.RolloutRevision{}
	}
	ns, name, _ := strings.Cut(bundle, "/")
	r.captured[bundle][revision] = r.inputs(ns, name, revision, content)
}

// seenOf is what a deployment of a Bundle of namespace ns says ("" revision: not stamped).
func seenOf(ns string, bd *fleet.BundleDeployment) history.Seen {
	applied := bd.Spec.DeploymentID != "" && bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID
	return history.Seen{Cluster: clusterOf(ns, bd), Revision: bd.Annotations[fleet.RevisionAnnotation], Commit: bd.Labels[fleet.CommitLabel],
		Applied: applied, Ready: applied && bd.Status.Ready}
}

// takeSnapshots hands the pass what was noted of the bundle's deployments (snapshots, moves,
// captured inputs) and forgets it; giveBack returns it when the pass failed.
func (r *recorder) takeSnapshots(bundle string) taken {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := taken{snapshots: r.snapshots[bundle], captured: r.captured[bundle], moved: r.moved[bundle],
		seen: running(r.current[bundle], r.moved[bundle])}
	for _, d := range r.current[bundle] {
		t.deployments = append(t.deployments, d)
	}
	delete(r.snapshots, bundle)
	delete(r.moved, bundle)
	delete(r.captured, bundle)
	return t
}

// taken is what the handler noted of a Bundle's deployments since its last pass.
type taken struct {
	snapshots []snapshot
	captured  map[string]*fleet.RolloutRevision
	moved     map[string]time.Time
	// seen is what the deployments run now; deployments what was last seen of each.
	seen        []history.Seen
	deployments []lastSeen
}

func (r *recorder) giveBack(bundle string, t taken) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(t.snapshots) > 0 {
		r.snapshots[bundle] = append(t.snapshots, r.snapshots[bundle]...)
	}
	for key, at := range t.moved {
		if _, later := r.moved[bundle][key]; !later {
			if r.moved[bundle] == nil {
				r.moved[bundle] = map[string]time.Time{}
			}
			r.moved[bundle][key] = at
		}
	}
	for rev, in := range t.captured {
		if _, later := r.captured[bundle][rev]; !later {
			if r.captured[bundle] == nil {
				r.captured[bundle] = map[string]*fleet.RolloutRevision{}
			}
			r.captured[bundle][rev] = in
		}
	}
}

func (r *recorder) work() {
	for {
		key, quit := r.queue.Get()
		if quit {
			return
		}
		if err := r.pass(key); err != nil {
			log := logrus.WithField("bundle", key)
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				log.Debugf("deployment history: %v", err) // a race the next try wins
			} else {
				log.Warnf("deployment history: %v", err)
			}
			r.queue.AddRateLimited(key)
		} else {
			r.queue.Forget(key)
		}
		r.queue.Done(key)
	}
}

// pass folds what the Bundle's deployments say now into its record, after the snapshots taken
// since the last pass.
func (r *recorder) pass(key string) error {
	t := r.takeSnapshots(key)
	err := r.fold(key, t)
	if err != nil {
		r.giveBack(key, t)
	}
	return err
}

func (r *recorder) fold(key string, t taken) error {
	ns, name, _ := strings.Cut(key, "/")
	st, err := r.load(ns, name)
	if err != nil {
		return err
	}
	st.captured = t.captured
	seen := t.seen
	for _, d := range t.deployments {
		if d.seen.Revision != "" && !d.going {
			st.contentOf(d.seen.Revision, d.content)
		}
		st.from(d.labels) // the GitRepo or HelmOp, for `fleet history GITREPO`
	}
	if st.empty() && len(seen) == 0 && len(t.snapshots) == 0 {
		return nil
	}
	for _, snap := range t.snapshots {
		if err := st.rec.Observe(snap.seen, snap.at); err != nil {
			return err
		}
	}
	now := passTime(r.Now())
	if err := st.rec.Observe(seen, now); err != nil {
		return err
	}
	maxAge, maxRevisions := config.DefaultHistoryRetention, 0
	if r.Retention != nil {
		maxAge, maxRevisions = r.Retention()
	}
	dropped := st.rec.Prune(now, maxAge, maxRevisions)
	return r.save(ns, name, st, dropped)
}

// passTime is the time a pass records at t: whole seconds, as the API keeps times, rounded up
// as a move is (history.Seen). Truncated, a move earlier in the pass's own second was recorded
// at the start of that second, before it happened, while the revision it replaced still ran.
func passTime(t time.Time) time.Time {
	if whole := t.Truncate(time.Second); whole.Before(t) {
		return whole.Add(time.Second)
	}
	return t
}

// clusterOf names a deployment's cluster in the record: by name, or namespace/name for a
// cluster of another namespace than the Bundle's (through a BundleNamespaceMapping).
func clusterOf(bundleNS string, bd *fleet.BundleDeployment) string {
	if ns := bd.Labels[fleet.ClusterNamespaceLabel]; ns != "" && ns != bundleNS {
		return ns + "/" + bd.Labels[fleet.ClusterLabel]
	}
	return bd.Labels[fleet.ClusterLabel]
}
