package bundle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// planTTL bounds how long a plan is reused. Within it a plan's Clusters may be older copies
// than the cache's, but only in what targeting does not read (a check-in's lastSeen, status the
// manager rolls up): a change in what it reads invalidates the plan at once (planCache.changed).
const planTTL = 15 * time.Second

// planCache keeps each Bundle's last plan for the passes that follow within planTTL. A Bundle
// new on 10,000 clusters is written 50 deployments a pass (maxNew), and its deployments' reports
// bring more passes, so hundreds of passes in a row planned the same 10,000 targets again: at
// that size the plans were a quarter of the manager's CPU while it created deployments, and a
// quarter of what it allocated. A plan is reused only for the same Bundle generation, labels and
// Content, and only while nothing targeting reads has changed since it was made: the targeting
// watch (watchTargeting), which re-plans Bundles when a Cluster's facts, a ClusterGroup, a
// BundleNamespaceMapping or a Policy change, also moves the cache's epoch on. Expired plans are
// dropped (expire), so a Bundle left alone keeps none.
type planCache struct {
	mu    sync.Mutex
	epoch uint64
	m     map[types.UID]cachedPlan
}

type cachedPlan struct {
	key  planKey
	at   time.Time
	plan []planned
}

// planKey is what a plan was made from, besides the caches.
type planKey struct {
	generation int64
	labels     string
	content    string
	epoch      uint64
}

func newPlanCache() *planCache {
	return &planCache{m: map[types.UID]cachedPlan{}}
}

// changed says something targeting reads has changed: no plan made before is reused.
func (c *planCache) changed() {
	c.mu.Lock()
	c.epoch++
	clear(c.m)
	c.mu.Unlock()
}

// key is the key of a plan made now for b and content. Read it before making the plan: a change
// after that moves the epoch on, and the plan is not reused.
func (c *planCache) key(b *fleet.Bundle, content string) planKey {
	k := planKey{generation: b.Generation, labels: fmt.Sprint(b.Labels), content: content}
	c.mu.Lock()
	k.epoch = c.epoch
	c.mu.Unlock()
	return k
}

// get returns the plan kept for b under key, made (at) less than planTTL before now.
func (c *planCache) get(b *fleet.Bundle, key planKey, now time.Time) (plan []planned, at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[b.UID]
	if !ok || p.key != key || now.Sub(p.at) >= planTTL || now.Before(p.at) {
		return nil, time.Time{}, false
	}
	return p.plan, p.at, true
}

// keep keeps b's plan (made at, under key, without errors) for its next passes; it is not kept
// when something changed since key was read.
func (c *planCache) keep(b *fleet.Bundle, key planKey, at time.Time, plan []planned) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if key.epoch != c.epoch {
		return
	}
	c.m[b.UID] = cachedPlan{key: key, at: at, plan: plan}
}

// expire drops the plans made planTTL or longer before now.
func (c *planCache) expire(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, p := range c.m {
		if now.Sub(p.at) >= planTTL || now.Before(p.at) {
			delete(c.m, uid)
		}
	}
}

// expireEvery drops expired plans every planTTL until ctx ends.
func (c *planCache) expireEvery(ctx context.Context, now func() time.Time) {
	wait.UntilWithContext(ctx, func(context.Context) { c.expire(now()) }, planTTL)
}

// drop forgets b's plan.
func (c *planCache) drop(b *fleet.Bundle) {
	c.mu.Lock()
	delete(c.m, b.UID)
	c.mu.Unlock()
}
