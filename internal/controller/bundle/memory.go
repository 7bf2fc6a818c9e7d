package bundle

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetgo/fleet/internal/controller/index"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// memory is everything the bundle controller remembers between passes besides the informer
// caches: what rendering each target last showed (renders, memo.go), each Bundle's last plan
// (plans, plans.go), what targeting derives from each Cluster (facts, facts.go), what the
// watches last saw of each Cluster and ClusterGroup (seen), each Bundle's resources sum (sums)
// and the BundleDeployments it created that the cache does not show yet (created, created.go).
// A pass reads the Bundle, the caches and memory; the watches tell memory what changed through
// the methods below, which are the only invalidation rules there are.
type memory struct {
	renders *renderMemo
	plans   *planCache
	facts   *clusterFacts
	created *recentlyCreated
	// finalized are the Bundles whose deletion was handled lately (created.go).
	finalized *recentlyFinalized
	// seen fingerprints what targeting reads of each Cluster and ClusterGroup, by kind/key.
	seen *index.Fingerprints
	// sums are the Bundles' status.resourcesSha256Sum, one per generation, by UID.
	sums sync.Map
	// refusedRollbacks are the revisions, by Bundle UID, a rollback to which was refused (warned).
	refusedRollbacks sync.Map
	// noSecrets are the contents, by Bundle UID, read and found to hold no SOPS file
	// (secrets.go): a pass over them reads them no more.
	noSecrets sync.Map
	// offline are the Clusters, by key, a roll-up counted Offline since the watch last found
	// them checking in.
	offline sync.Map
}

func newMemory() *memory {
	return &memory{renders: newRenderMemo(), plans: newPlanCache(), facts: newClusterFacts(),
		created: &recentlyCreated{m: map[string]createdEntry{}}, finalized: &recentlyFinalized{m: map[string]time.Time{}},
		seen: &index.Fingerprints{}}
}

// clusterSeen: the watch saw the Cluster of key, of which targeting reads fingerprint fp. When
// that changed no plan made before is reused, and it says so.
func (m *memory) clusterSeen(key, fp string) bool {
	if !m.seen.Changed("cluster/"+key, fp) {
		return false
	}
	m.plans.changed()
	return true
}

// countedOffline: a roll-up counted the Cluster of key Offline.
func (m *memory) countedOffline(key string) { m.offline.Store(key, struct{}{}) }

// backOnline: the watch found the Cluster of key checking in; it says whether a roll-up counted
// it Offline since the last time.
func (m *memory) backOnline(key string) bool {
	_, was := m.offline.LoadAndDelete(key)
	return was
}

// groupSeen: as clusterSeen, for the ClusterGroup of key.
func (m *memory) groupSeen(key, fp string) bool {
	if !m.seen.Changed("group/"+key, fp) {
		return false
	}
	m.plans.changed()
	return true
}

// groupGone: the ClusterGroup of key is deleted: no plan made before is reused.
func (m *memory) groupGone(key string) {
	m.seen.Forget("group/" + key)
	m.plans.changed()
}

// resourcesSum is b's status.resourcesSha256Sum, made once per generation by sum.
func (m *memory) resourcesSum(b *fleet.Bundle, sum func() string) string {
	if v, ok := m.sums.Load(b.UID); ok {
		if s := v.(resourcesSum); s.generation == b.Generation {
			return s.sum
		}
	}
	s := resourcesSum{generation: b.Generation, sum: sum()}
	m.sums.Store(b.UID, s)
	return s.sum
}

type resourcesSum struct {
	generation int64
	sum        string
}

// keptPlan is b's plan (for content) an earlier pass kept, while nothing it read changed; key
// names what a plan made now is kept under.
func (m *memory) keptPlan(b *fleet.Bundle, content string, now time.Time) (key planKey, plan []planned, madeAt time.Time, ok bool) {
	key = m.plans.key(b, content)
	plan, madeAt, ok = m.plans.get(b, key, now)
	return key, plan, madeAt, ok
}

// planFailed: b's plan could not be made or written: nothing of it is kept.
func (m *memory) planFailed(b *fleet.Bundle) {
	m.plans.drop(b)
}

// planWritten: b's pass wrote its plan. Where it may be reused it is kept for the next passes,
// without what this pass rendered (the render memo vouches for those inputs).
func (m *memory) planWritten(b *fleet.Bundle, key planKey, madeAt time.Time, plan []planned, reusable bool) {
	if !reusable {
		m.plans.drop(b)
		return
	}
	for i := range plan {
		plan[i].desired = nil
	}
	m.plans.keep(b, key, madeAt, plan)
}

// targetingChanged: what targeting reads changed (a Cluster's facts or Offline state, a
// ClusterGroup, a BundleNamespaceMapping): no plan made before is reused. Renders stay: they are
// keyed by each target's own inputs.
func (m *memory) targetingChanged() {
	m.plans.changed()
}

// clusterGone: the Cluster of key ("namespace/name") is deleted: its facts go, and so does every
// plan that may target it.
func (m *memory) clusterGone(key string) {
	m.facts.forget(key)
	m.seen.Forget("cluster/" + key)
	m.offline.Delete(key)
	m.plans.changed()
}

// rulesChanged: a Policy or GitRepoRestriction of the bundles' namespace changed, which
// rendering reads besides each target's inputs: their renders go, and every plan.
func (m *memory) rulesChanged(bundles []*fleet.Bundle) {
	m.plans.changed()
	for _, b := range bundles {
		m.renders.forget(b)
	}
}

// bundleGone: b is being deleted: nothing of it is kept.
func (m *memory) bundleGone(b *fleet.Bundle) {
	m.renders.forget(b)
	m.plans.drop(b)
	m.sums.Delete(b.UID)
	m.refusedRollbacks.Delete(b.UID)
	m.noSecrets.Delete(b.UID)
}

// secretsRead: b's contents were read for SOPS files; none says they hold none.
func (m *memory) secretsRead(b *fleet.Bundle, content string, none bool) {
	if none {
		m.noSecrets.Store(b.UID, content)
	} else {
		m.noSecrets.Delete(b.UID)
	}
}

// noSecretsIn says whether b's contents were read before and hold no SOPS file.
func (m *memory) noSecretsIn(b *fleet.Bundle, content string) bool {
	v, ok := m.noSecrets.Load(b.UID)
	return ok && v == content
}

// rollbackRefused: a rollback of b to revision was refused; true the first time for that
// revision.
func (m *memory) rollbackRefused(b *fleet.Bundle, revision string) bool {
	prev, loaded := m.refusedRollbacks.Swap(b.UID, revision)
	return !loaded || prev.(string) != revision
}

// bundleFinalized: the BundleDeployments of the deleted Bundle of key were deleted, those the
// cache showed and those created but not shown yet (returned): one the cache shows later is an
// orphan (lateOrphan).
func (m *memory) bundleFinalized(key string, now time.Time) []*fleet.BundleDeployment {
	m.finalized.add(key, now)
	return m.created.ofBundle(key, now)
}

// lateOrphan: the cache shows bd for the first time; it belongs to a Bundle whose deletion was
// already handled.
func (m *memory) lateOrphan(bd *fleet.BundleDeployment, now time.Time) bool {
	return m.finalized.has(bd.Labels[fleet.BundleNamespaceLabel]+"/"+bd.Labels[fleet.BundleLabel], now)
}

// deploymentSeen: the cache shows the BundleDeployment of key (created, or deleted), or the
// apiserver says it is gone: the copy kept since its creation goes. It returns how long ago it
// was created, when a copy was kept.
func (m *memory) deploymentSeen(key string, now time.Time) (time.Duration, bool) {
	return m.created.take(key, now)
}

// The pass's questions and records: what it reads of memory and tells it, besides the plan.

// contentName is the Content b's resources were last stored as, when they did not change since.
func (m *memory) contentName(b *fleet.Bundle) (string, bool) { return m.renders.contentName(b) }

// contentStored: b's resources are stored as the Content name.
func (m *memory) contentStored(b *fleet.Bundle, name string) { m.renders.setContentName(b, name) }

// factsOf is what targeting derives from c, derived once per change of c.
func (m *memory) factsOf(c *fleet.Cluster) clusterFact { return m.facts.of(c) }

// renderSeen says whether b's target on cluster was rendered for these inputs before, and that
// render's error.
func (m *memory) renderSeen(b *fleet.Bundle, cluster types.UID, content string, fp [sha256.Size]byte) (bool, error) {
	return m.renders.seen(b, cluster, content, fp)
}

// rendered: b's target on cluster was rendered for these inputs, with err.
func (m *memory) rendered(b *fleet.Bundle, cluster types.UID, content string, fp [sha256.Size]byte, err error) {
	m.renders.rendered(b, cluster, content, fp, err)
}

// deploymentCurrent: bd was written for these inputs by this controller and is unchanged since.
func (m *memory) deploymentCurrent(b *fleet.Bundle, cluster types.UID, content string, fp [sha256.Size]byte, bd *fleet.BundleDeployment) bool {
	return m.renders.current(b, cluster, content, fp, bd)
}

// deploymentAhead: an earlier pass wrote b's deployment on cluster for these inputs, and bd (the
// cache's) is older than that write.
func (m *memory) deploymentAhead(b *fleet.Bundle, cluster types.UID, content string, fp [sha256.Size]byte, bd *fleet.BundleDeployment) bool {
	return m.renders.ahead(b, cluster, content, fp, bd)
}

// deploymentWritten: the pass wrote bd, b's deployment on cluster, for these inputs; created,
// when the write made it (kept until the cache shows it: createdDeployment, deploymentSeen).
func (m *memory) deploymentWritten(b *fleet.Bundle, cluster types.UID, content string, fp [sha256.Size]byte,
	bd *fleet.BundleDeployment, created bool, now time.Time) {
	m.renders.written(b, cluster, content, fp, bd)
	if created {
		m.created.add(bd, now)
	}
}

// createdDeployment is the BundleDeployment of key this controller created and the cache does not
// show yet (nil for none).
func (m *memory) createdDeployment(key string, now time.Time) *fleet.BundleDeployment {
	return m.created.get(key, now)
}

// expire drops, every planExpiry until ctx ends, the plans kept past their time.
func (m *memory) expire(ctx context.Context, now func() time.Time) { m.plans.expireEvery(ctx, now) }
