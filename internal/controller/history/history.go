// Package history records each Bundle's deployment history (issue 66): which revision each
// cluster ran, from when until when (internal/history). A change of any of a Bundle's
// BundleDeployments brings one pass over them after PassDelay, which folds what they say
// (revision stamped by the bundle controller, applied, ready) into the Bundle's record: its
// BundleHistory (the cluster table) and a BundleRevision per revision. The record outlives the
// Bundle up to Retention. One recorder runs per management cluster (the unsharded controller).
package history

import (
	"context"
	"strings"
	"sync"
	"time"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"

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
	// Retention is how long a revision no cluster runs any longer stays in the record.
	Retention = 90 * 24 * time.Hour
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
	// SealKey seals the recorded inputs as a Rollout's revisions are (bundle.Seal).
	SealKey []byte
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

type recorder struct {
	Deps
	// histories and revisions are the caches, asked for at registration: the factory starts
	// only the informers asked for before it starts.
	histories fleetcontrollers.BundleHistoryCache
	revisions fleetcontrollers.BundleRevisionCache
	queue     workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// last is what was last seen of each BundleDeployment key: its Bundle ("namespace/name"),
	// for the deletions, which come without the object, and its revision.
	last map[string]lastSeen
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
	bundle string
	seen   history.Seen
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
	r := &recorder{Deps: d, last: map[string]lastSeen{}, moved: map[string]map[string]time.Time{},
		snapshots: map[string][]snapshot{}, captured: map[string]map[string]*fleet.RolloutRevision{}, histories: d.Histories.Cache(), revisions: d.Revisions.Cache(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryFirst, retryMost),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "deployment-history"})}
	r.revisions.AddIndexer(byBundle, func(o *fleet.BundleRevision) ([]string, error) {
		return []string{o.Namespace + "/" + o.Spec.Bundle}, nil
	})
	d.BundleDeployments.OnChange(ctx, "deployment-history", r.deploymentChanged)
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	go r.work()
}

func (r *recorder) deploymentChanged(key string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
	r.mu.Lock()
	prev, had := r.last[key]
	bundle := prev.bundle
	if bd != nil {
		bundle = index.BundleKey(bd)
		ns, _, _ := strings.Cut(bundle, "/")
		cur := lastSeen{bundle: bundle, seen: seenOf(ns, bd)}
		r.last[key] = cur
		// A deployment first seen counts as moved: one made and moved on within a pass
		// delay keeps its first revision.
		if !had || prev.seen.Revision != cur.seen.Revision {
			r.movedAgain(bundle, key, prev.seen)
			r.capture(bundle, cur.seen.Revision, bd.Labels[fleet.ContentNameLabel])
		}
	} else {
		delete(r.last, key)
	}
	r.mu.Unlock()
	if bundle != "" {
		r.queue.AddAfter(bundle, PassDelay)
	}
	return bd, nil
}

// movedAgain notes that deployment key of bundle moved on from prev; when it had moved already
// since the bundle's last pass, what the bundle's deployments ran before this move is kept for
// the pass, so the revision in between is recorded. Called with r.mu held.
func (r *recorder) movedAgain(bundle, key string, prev history.Seen) {
	now := r.Now()
	if r.moved[bundle] == nil {
		r.moved[bundle] = map[string]time.Time{}
	}
	first, already := r.moved[bundle][key]
	if !already {
		r.moved[bundle][key] = now
		return
	}
	ns, _, _ := strings.Cut(bundle, "/")
	bds, err := r.BundleDeployments.Cache().GetByIndex(index.ByBundle, bundle)
	if err != nil {
		return
	}
	// Whole seconds, rounded up as a move is (history.Seen): the deployments it holds ran until then.
	snap := snapshot{at: now.Truncate(time.Second).Add(time.Second)}
	for _, bd := range bds {
		k := bd.Namespace + "/" + bd.Name
		if k == key {
			prev.Since = first
			snap.seen = append(snap.seen, prev)
		} else if s := seenOf(ns, bd); s.Revision != "" && bd.DeletionTimestamp == nil {
			s.Since = r.moved[bundle][k]
			snap.seen = append(snap.seen, s)
		}
	}
	r.snapshots[bundle] = append(r.snapshots[bundle], snap)
	r.moved[bundle] = map[string]time.Time{key: now}
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
	t := taken{snapshots: r.snapshots[bundle], captured: r.captured[bundle], moved: r.moved[bundle]}
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
	bds, err := r.BundleDeployments.Cache().GetByIndex(index.ByBundle, key)
	if err != nil {
		return err
	}
	st, err := r.load(ns, name)
	if err != nil {
		return err
	}
	st.captured = t.captured
	seen := make([]history.Seen, 0, len(bds))
	for _, bd := range bds {
		s := seenOf(ns, bd)
		s.Since = t.moved[bd.Namespace+"/"+bd.Name]
		if s.Revision == "" || bd.DeletionTimestamp != nil {
			continue // written before deployments were stamped, or going
		}
		st.contentOf(s.Revision, bd.Labels[fleet.ContentNameLabel])
		seen = append(seen, s)
	}
	if st.empty() && len(seen) == 0 && len(t.snapshots) == 0 {
		return nil
	}
	if len(bds) > 0 {
		st.from(bds[0].Labels) // the GitRepo or HelmOp, for `fleet history GITREPO`
	}
	for _, snap := range t.snapshots {
		if err := st.rec.Observe(snap.seen, snap.at); err != nil {
			return err
		}
	}
	now := r.Now().Truncate(time.Second) // what the API keeps of a time
	if err := st.rec.Observe(seen, now); err != nil {
		return err
	}
	dropped := st.rec.Prune(now, Retention, 0)
	return r.save(ns, name, st, dropped)
}

// clusterOf names a deployment's cluster in the record: by name, or namespace/name for a
// cluster of another namespace than the Bundle's (through a BundleNamespaceMapping).
func clusterOf(bundleNS string, bd *fleet.BundleDeployment) string {
	if ns := bd.Labels[fleet.ClusterNamespaceLabel]; ns != "" && ns != bundleNS {
		return ns + "/" + bd.Labels[fleet.ClusterLabel]
	}
	return bd.Labels[fleet.ClusterLabel]
}
