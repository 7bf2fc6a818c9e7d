package controller

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/metrics"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A replica under leader election fills its caches while it stands by: listing and decoding
// every object the manager manages is most of a cold start's time (benchmarks/RESULTS.md,
// restarts at scale), and a standby that has done it before the leader is lost takes over with
// only its controllers' pass left. The informers run without controllers until then, so nothing
// queues up while standing by: the controllers made at the start see every cached object once.

// warmCaches hands the caches filled while standing by to the start that follows.
type warmCaches struct {
	mu    sync.Mutex
	cs    *caches
	taken bool
}

// fill makes the caches of every kind the manager reads (standbyKinds) and starts filling them.
// A start that comes first builds its own, and fill stops; one that comes while they fill
// takes them and waits for the rest, as it would for its own.
func (w *warmCaches) fill(ctx context.Context, cfg *rest.Config, o Options) {
	began := time.Now()
	cs, err := factories(cfg, o)
	if err != nil {
		logrus.WithError(err).Warn("standby: caches not filled before leading")
		return
	}
	ctx, cs.cancel = context.WithCancel(ctx)
	cf := cs.scf.SharedCacheFactory()
	cs.filled = map[schema.GroupVersionKind]bool{}
	for _, gvk := range standbyKinds(o) {
		if _, err := cf.ForKind(gvk); err != nil {
			cs.cancel()
			logrus.WithError(err).WithField("kind", gvk.Kind).Warn("standby: caches not filled before leading")
			return
		}
		cs.filled[gvk] = true
	}
	metrics.StandbyFilled(false)
	w.mu.Lock()
	if w.taken {
		w.mu.Unlock()
		cs.cancel()
		return
	}
	err = cf.Start(ctx)
	if err == nil {
		w.cs = cs
	}
	w.mu.Unlock()
	if err != nil {
		cs.cancel()
		logrus.WithError(err).Warn("standby: caches not filled before leading")
		return
	}
	cf.WaitForCacheSync(ctx)
	if ctx.Err() == nil {
		metrics.StandbyFilled(true)
		logrus.WithField("kinds", len(cs.filled)).WithField("took", time.Since(began).Round(time.Millisecond)).Info("standby: caches filled")
	}
}

// take hands the caches over, filled or filling, once: nil when there are none yet (the start
// builds its own), or when a start before took them (and failed: it stopped them).
func (w *warmCaches) take() *caches {
	w.mu.Lock()
	defer w.mu.Unlock()
	cs := w.cs
	w.cs, w.taken = nil, true
	return cs
}

// unfilled are the kinds the started controllers cache that were not filled while standing by:
// each one is a list the take-over waited for. standbyKinds should name them.
func (cs *caches) unfilled() []string {
	var kinds []string
	for gvk := range cs.scf.SharedCacheFactory().WaitForCacheSync(context.Background()) {
		if !cs.filled[gvk] {
			kinds = append(kinds, gvk.String())
		}
	}
	sort.Strings(kinds)
	return kinds
}

// check logs the kinds the take-over had to list itself.
func (cs *caches) check() {
	if kinds := cs.unfilled(); len(kinds) > 0 {
		logrus.WithField("kinds", kinds).Warn("standby: these caches were filled only once leading")
	}
}

// standbyKinds are the kinds whose caches the manager's controllers read, as o configures them.
func standbyKinds(o Options) []schema.GroupVersionKind {
	fleetKinds := []string{"Bundle", "BundleDeployment", "BundleNamespaceMapping", "Content", "Cluster", "ClusterGroup", "GitRepo",
		"Policy", "GitRepoRestriction", "Rollout", "RolloutPolicy", "BundleHistory", "BundleRevision", "HelmOp"}
	if o.ShardID == "" {
		fleetKinds = append(fleetKinds, "ClusterRegistration", "ClusterRegistrationToken", "Schedule", "Alert", "AlertProvider")
	}
	if !o.DisableGitOps && o.ImageScanEnabled {
		fleetKinds = append(fleetKinds, "ImageScan")
	}
	var kinds []schema.GroupVersionKind
	for _, k := range fleetKinds {
		kinds = append(kinds, fleet.SchemeGroupVersion.WithKind(k))
	}
	for _, k := range []string{"Namespace", "Secret", "ConfigMap", "ServiceAccount"} {
		kinds = append(kinds, corev1.SchemeGroupVersion.WithKind(k))
	}
	for _, k := range []string{"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
		kinds = append(kinds, rbacv1.SchemeGroupVersion.WithKind(k))
	}
	if !o.DisableGitOps && o.GitJobImage != "" {
		kinds = append(kinds, batchv1.SchemeGroupVersion.WithKind("Job"))
	}
	return kinds
}
