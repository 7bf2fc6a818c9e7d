// Package bundle turns each Bundle into a shared Content and one BundleDeployment per targeted
// cluster, deletes the BundleDeployments of clusters it no longer targets, and rolls their
// states up into the Bundle's status. (manager)
//
// BundleDeployments live in cluster namespaces, away from their Bundle, so they carry labels
// instead of owner references and this controller creates, updates and deletes them itself: it
// needs each one's current state to decide what a rollout may promote.
package bundle

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rancher/wrangler/v3/pkg/apply"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/rancher/wrangler/v3/pkg/relatedresource"
	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/fleetgo/fleet/internal/controller/index"
	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/secretuse"
	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

const (
	// defaultMaxNew caps the BundleDeployments created per pass, so one Bundle targeting
	// thousands of clusters does not monopolise the apiserver; the rest follow on requeue.
	defaultMaxNew = 50
	// requeueNew is how soon a Bundle capped by maxNew is processed again; other Bundles'
	// work interleaves meanwhile.
	requeueNew = 50 * time.Millisecond
	// parallelWrites bounds the BundleDeployment writes one pass has in flight, and
	// maxWritesInFlight those of all passes together: about what saturates an apiserver, and
	// with many Bundles rolling out at once it keeps goroutines and buffers bounded.
	parallelWrites    = 16
	maxWritesInFlight = 64
	// rollupDelay coalesces the roll-ups that BundleDeployment changes trigger.
	rollupDelay = 500 * time.Millisecond
)

// Deps are what the controller reads and writes.
type Deps struct {
	Bundles           fleetcontrollers.BundleController
	BundleDeployments fleetcontrollers.BundleDeploymentController
	Clusters          fleetcontrollers.ClusterController
	ClusterGroups     fleetcontrollers.ClusterGroupController
	Contents          fleetcontrollers.ContentController
	Mappings          fleetcontrollers.BundleNamespaceMappingController
	Namespaces        corecontrollers.NamespaceCache
	// Policies are the namespaces' Policies (package policy); nil checks none.
	Policies fleetcontrollers.PolicyController
	// Restrictions are the namespaces' GitRepoRestrictions (package restriction); nil checks none.
	Restrictions fleetcontrollers.GitRepoRestrictionController
	// Secrets holds the Helm values kept outside Bundles (spec.valuesHash) and the registries of
	// Bundles whose contents one keeps (spec.contentsId).
	Secrets corecontrollers.SecretCache
	// SecretWriter writes the agents' copies of those registries' Secrets and the
	// BundleDeployments' options Secrets; a change of a Bundle's values Secret passes the Bundle.
	SecretWriter corecontrollers.SecretController
	// GitRepos name the registry Secret of their Bundles (ociRegistrySecret); nil: the
	// namespace's Secret ocistorage.
	GitRepos fleetcontrollers.GitRepoCache
	// Guard refuses, as a registry's Secret, a Secret that is a credential of the manager or a
	// cluster (package secretuse).
	Guard secretuse.Guard
	// SystemNamespace is the manager's namespace: its Secrets annotated
	// fleet.cattle.io/sops-namespaces hold the keys of the bundles' SOPS files.
	SystemNamespace string
	// CheckinInterval is the agents' check-in interval, to tell offline clusters.
	CheckinInterval func() time.Duration
	// Rollouts and RolloutPolicies serve progressive rollouts (progressive.go); nil: none.
	// Apply writes the Rollouts (rollouts.go): an apply set, to which the controller adds their
	// cache and owner references.
	Apply           apply.Apply
	Rollouts        fleetcontrollers.RolloutController
	RolloutPolicies fleetcontrollers.RolloutPolicyController
	// HelmOps name the RolloutPolicy of their Bundles; nil: none.
	HelmOps fleetcontrollers.HelmOpCache
	// AgentBundle says whether b is, to the letter, the agent Bundle the manager writes for
	// Cluster c (package agentmanagement); only such a Bundle is exempt from its namespace's
	// GitRepoRestrictions. nil: none is (the manager writes no agent Bundles).
	AgentBundle func(b *fleet.Bundle, c *fleet.Cluster) bool
	// SealKey seals the revisions Rollouts keep (SealKey, seal.go); without it no kept
	// revision is ever returned to.
	SealKey []byte
	// Histories and Revisions are the deployment history, whose holds roll clusters back
	// (holds.go); nil: none.
	Histories fleetcontrollers.BundleHistoryController
	Revisions fleetcontrollers.BundleRevisionController
}

type handler struct {
	bundles  fleetcontrollers.BundleController
	bds      fleetcontrollers.BundleDeploymentController
	bdCache  fleetcontrollers.BundleDeploymentCache
	clusters fleetcontrollers.ClusterCache
	groups   fleetcontrollers.ClusterGroupCache
	contents fleetcontrollers.ContentController
	mappings fleetcontrollers.BundleNamespaceMappingCache
	policies fleetcontrollers.PolicyController
	restrict fleetcontrollers.GitRepoRestrictionController
	secrets  corecontrollers.SecretCache
	// systemNamespace holds the SOPS keys (secrets.go).
	systemNamespace string
	nsCache         corecontrollers.NamespaceCache
	// secretWriter and gitrepos serve Bundles whose contents a registry keeps (oci.go).
	secretWriter corecontrollers.SecretClient
	gitrepos     fleetcontrollers.GitRepoCache
	guard        secretuse.Guard
	checkin      func() time.Duration
	now          func() time.Time
	// rollouts, rolloutPolicies and helmops serve progressive rollouts (progressive.go).
	rollouts        fleetcontrollers.RolloutController
	rolloutPolicies fleetcontrollers.RolloutPolicyCache
	rolloutOut      *rolloutWriter
	helmops         fleetcontrollers.HelmOpCache
	agentBundle     func(*fleet.Bundle, *fleet.Cluster) bool
	// seal seals and verifies the revisions Rollouts keep (seal.go).
	seal sealer
	// histories and revisions hold the users' rollbacks (holds.go); nil: none.
	histories fleetcontrollers.BundleHistoryCache
	revisions fleetcontrollers.BundleRevisionCache
	// mem is what the controller remembers between passes (memory.go).
	mem *memory
	// writeSlots holds one token per BundleDeployment write in flight.
	writeSlots chan struct{}
	// cpu holds one token per pass planning or rendering.
	cpu chan struct{}
	// orphans holds BundleDeployments to delete whose Bundle is gone (orphans.go).
	orphans workqueue.TypedRateLimitingInterface[orphan]
}

// Register starts reconciling Bundles, and re-reconciles them when their BundleDeployments,
// or the Clusters and ClusterGroups of their namespace, change.
func Register(ctx context.Context, d Deps) {
	h := &handler{
		bundles: d.Bundles, bds: d.BundleDeployments, bdCache: d.BundleDeployments.Cache(),
		clusters: d.Clusters.Cache(), groups: d.ClusterGroups.Cache(), contents: d.Contents,
		mappings: d.Mappings.Cache(), policies: d.Policies, restrict: d.Restrictions, secrets: d.Secrets, nsCache: d.Namespaces,
		secretWriter: d.SecretWriter, gitrepos: d.GitRepos, guard: d.Guard, systemNamespace: d.SystemNamespace, checkin: d.CheckinInterval, now: time.Now,
		mem:      newMemory(),
		rollouts: d.Rollouts, helmops: d.HelmOps, agentBundle: d.AgentBundle, seal: sealer(d.SealKey),
		writeSlots: make(chan struct{}, maxWritesInFlight),
		cpu:        make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1)),
	}
	if d.RolloutPolicies != nil {
		h.rolloutPolicies = d.RolloutPolicies.Cache()
	}
	if d.Rollouts != nil {
		h.rolloutOut = newRolloutWriter(ctx, d.Apply, d.Rollouts, d.Secrets, d.SecretWriter)
	}
	if d.Histories != nil && d.Revisions != nil {
		h.histories, h.revisions = d.Histories.Cache(), d.Revisions.Cache()
		// A rollback asked for, or released, passes its Bundle.
		d.Histories.OnChange(ctx, "bundle-from-history", func(_ string, o *fleet.BundleHistory) (*fleet.BundleHistory, error) {
			if o != nil {
				d.Bundles.Enqueue(o.Namespace, o.Name)
			}
			return o, nil
		})
	}
	go h.mem.expire(ctx, h.now)
	h.orphans = newOrphanQueue(orphanRetry)
	go h.deleteOrphans(ctx)
	d.Bundles.OnChange(ctx, "bundle", h.OnChange)
	fleetcontrollers.RegisterBundleStatusHandler(ctx, d.Bundles, "", "bundle-deploy", h.deploy)
	h.watchDeployments(ctx, d)
	h.watchTargeting(ctx, d)
	h.watchRollouts(ctx, d)
	h.watchSecrets(ctx, d)
}

// watchSecrets passes a Bundle when its values Secret changes, and the Bundles of the namespaces
// a SOPS key Secret of the manager's namespace serves when it changes: a Bundle whose files no
// key decrypted, or read before the cache showed the key, deploys once the key is there.
func (h *handler) watchSecrets(ctx context.Context, d Deps) {
	if d.SecretWriter == nil {
		return
	}
	d.SecretWriter.OnChange(ctx, "bundle-from-secret", func(_ string, s *corev1.Secret) (*corev1.Secret, error) {
		switch {
		case s == nil:
		case s.Type == fleet.SecretTypeBundleValues:
			d.Bundles.Enqueue(s.Namespace, s.Name)
		case s.Namespace == d.SystemNamespace && s.Annotations[SOPSNamespacesAnnotation] != "":
			for _, ns := range strings.Split(s.Annotations[SOPSNamespacesAnnotation], ",") {
				if ns = strings.TrimSpace(ns); ns == "*" {
					ns = ""
				}
				bundles, _ := d.Bundles.Cache().List(ns, labels.Everything())
				for _, b := range bundles {
					d.Bundles.Enqueue(b.Namespace, b.Name)
				}
			}
		}
		return s, nil
	})
}

// watchRollouts passes a Bundle when its Rollout changes (an approval, a pause, an abort, a
// retry), and every Bundle of a namespace when one of its RolloutPolicies does.
func (h *handler) watchRollouts(ctx context.Context, d Deps) {
	if d.Rollouts == nil || d.RolloutPolicies == nil {
		return
	}
	d.Rollouts.OnChange(ctx, "bundle-from-rollout", func(_ string, r *fleet.Rollout) (*fleet.Rollout, error) {
		if r != nil {
			d.Bundles.Enqueue(r.Namespace, r.Name)
		}
		return r, nil
	})
	d.RolloutPolicies.OnChange(ctx, "bundle-from-rolloutpolicy", func(key string, p *fleet.RolloutPolicy) (*fleet.RolloutPolicy, error) {
		ns, _, _ := strings.Cut(key, "/")
		bundles, _ := d.Bundles.Cache().List(ns, labels.Everything())
		for _, b := range bundles {
			d.Bundles.Enqueue(b.Namespace, b.Name)
		}
		return p, nil
	})
}

// watchDeployments brings a Bundle's roll-up up to date when its deployments change.
func (h *handler) watchDeployments(ctx context.Context, d Deps) {
	// Once the cache has a created deployment, the copy kept meanwhile is not needed; once one
	// is deleted, nothing may stand in for it (a Bundle created again under the same name would
	// otherwise update a deployment that is gone).
	_, _ = d.BundleDeployments.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if bd, ok := obj.(*fleet.BundleDeployment); ok {
				if age, ok := h.mem.deploymentSeen(bd.Namespace+"/"+bd.Name, h.now()); ok && age > slowCache {
					logrus.WithFields(logfields.For("bundle", bd.Namespace, bd.Name)).WithField("lag", age.Round(time.Millisecond).String()).
						Warn("the cache showed a created bundledeployment late")
				}
				if h.mem.lateOrphan(bd, h.now()) {
					h.orphans.Add(orphan{bd.Namespace, bd.Name, bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.BundleLabel]})
				}
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if bd, ok := obj.(*fleet.BundleDeployment); ok {
				h.mem.deploymentSeen(bd.Namespace+"/"+bd.Name, h.now())
			}
		},
	})
	// Delayed, so a burst of deployment changes makes one roll-up.
	relatedresource.Watch(ctx, "bundle-from-deployment", index.Parent(fleet.BundleNamespaceLabel, fleet.BundleLabel),
		index.After{Queue: d.Bundles, Delay: rollupDelay}, d.BundleDeployments)
}

// watchTargeting re-plans the Bundles a Cluster, ClusterGroup or BundleNamespaceMapping change
// may retarget, and renders again those a Policy or GitRepoRestriction change may change.
func (h *handler) watchTargeting(ctx context.Context, d Deps) {
	w := &targetingWatch{h: h, d: d}
	d.Clusters.OnChange(ctx, "bundle-from-cluster", w.onCluster)
	d.ClusterGroups.OnChange(ctx, "bundle-from-clustergroup", w.onGroup)
	if d.Policies != nil {
		d.Policies.OnChange(ctx, "bundle-from-policy", func(key string, p *fleet.Policy) (*fleet.Policy, error) {
			w.rerender(key)
			return p, nil
		})
	}
	if d.Restrictions != nil {
		d.Restrictions.OnChange(ctx, "bundle-from-restriction", func(key string, r *fleet.GitRepoRestriction) (*fleet.GitRepoRestriction, error) {
			w.rerender(key)
			return r, nil
		})
	}
	d.Mappings.OnChange(ctx, "bundle-from-mapping", func(_ string, m *fleet.BundleNamespaceMapping) (*fleet.BundleNamespaceMapping, error) {
		h.mem.targetingChanged()
		if m != nil {
			w.enqueueNamespace(m.Namespace)
		}
		return m, nil
	})
}

// targetingWatch turns changes of what targeting reads into Bundle passes. Clusters and groups
// change status all the time: memory keeps a fingerprint of what targeting reads of each, and
// only a change of that re-plans bundles.
type targetingWatch struct {
	h *handler
	d Deps
}

// enqueueNamespace enqueues the Bundles of ns, and of every namespace with a
// BundleNamespaceMapping (their Bundles may target clusters anywhere).
func (w *targetingWatch) enqueueNamespace(ns string) {
	namespaces := []string{ns}
	if mappings, err := w.d.Mappings.Cache().List("", labels.Everything()); err == nil {
		for _, m := range mappings {
			if m.Namespace != ns {
				namespaces = append(namespaces, m.Namespace)
			}
		}
	}
	for _, n := range namespaces {
		bundles, err := w.d.Bundles.Cache().List(n, labels.Everything())
		if err != nil {
			continue
		}
		for _, b := range bundles {
			w.d.Bundles.Enqueue(b.Namespace, b.Name)
		}
	}
}

// onCluster re-plans when what rendering reads of the Cluster (its facts' hash, which the plans
// then find derived for this resourceVersion) or whether it is Offline (the roll-up reads that)
// changed, or when a roll-up counted it Offline and it checks in.
func (w *targetingWatch) onCluster(key string, c *fleet.Cluster) (*fleet.Cluster, error) {
	if c == nil {
		w.h.mem.clusterGone(key)
		return c, nil
	}
	offline := summary.Offline(c, w.h.checkin(), w.h.now())
	facts := w.h.mem.factsOf(c)
	changed := w.h.mem.clusterSeen(key, string(facts.hash[:])+strconv.FormatBool(offline))
	// A roll-up may have counted it Offline between two events that both found it online.
	back := !offline && w.h.mem.backOnline(key)
	if changed || back {
		w.enqueueNamespace(c.Namespace)
	}
	return c, nil
}

// onGroup re-plans when a group's labels or selector changed.
func (w *targetingWatch) onGroup(key string, g *fleet.ClusterGroup) (*fleet.ClusterGroup, error) {
	if g == nil {
		w.h.mem.groupGone(key)
		return g, nil
	}
	if w.h.mem.groupSeen(key, fmt.Sprint(g.Labels, g.Spec.Selector)) {
		w.enqueueNamespace(g.Namespace)
	}
	return g, nil
}

// rerender renders every Bundle of the namespace of key again: what a Bundle renders to depends
// on the namespace's Policies and GitRepoRestrictions.
func (w *targetingWatch) rerender(key string) {
	ns, _, _ := strings.Cut(key, "/")
	bundles, _ := w.d.Bundles.Cache().List(ns, labels.Everything())
	w.h.mem.rulesChanged(bundles)
	for _, b := range bundles {
		w.d.Bundles.Enqueue(b.Namespace, b.Name)
	}
}

// OnChange keeps the Bundle's finalizer, and deletes its BundleDeployments when it is deleted.
func (h *handler) OnChange(_ string, b *fleet.Bundle) (*fleet.Bundle, error) {
	if b == nil {
		return nil, nil
	}
	if b.DeletionTimestamp != nil {
		h.mem.bundleGone(b)
		if h.rolloutOut != nil {
			h.rolloutOut.forget(b)
		}
		return h.finalize(b)
	}
	if !slices.Contains(b.Finalizers, fleet.BundleFinalizer) {
		b = b.DeepCopy()
		b.Finalizers = append(b.Finalizers, fleet.BundleFinalizer)
		return h.bundles.Update(b)
	}
	return b, nil
}

// finalizeParallel bounds the deletes in flight for one deleted Bundle.
const finalizeParallel = 16

// finalize deletes every BundleDeployment of a deleted Bundle, then lets it go.
func (h *handler) finalize(b *fleet.Bundle) (*fleet.Bundle, error) {
	key := b.Namespace + "/" + b.Name
	existing, err := h.bdCache.GetByIndex(index.ByBundle, key)
	if err != nil {
		return b, err
	}
	// Those created but not in the cache yet too; any the cache shows later goes then.
	for _, bd := range h.mem.bundleFinalized(key, h.now()) {
		if !slices.ContainsFunc(existing, func(e *fleet.BundleDeployment) bool { return e.Namespace == bd.Namespace && e.Name == bd.Name }) {
			existing = append(existing, bd)
		}
	}
	// In parallel: a Bundle on ten thousand clusters has as many BundleDeployments, and one
	// delete after another would take minutes.
	inClusterOrder(existing)
	var g errgroup.Group
	g.SetLimit(finalizeParallel)
	for _, bd := range existing {
		g.Go(func() error {
			if err := h.bds.Delete(bd.Namespace, bd.Name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return b, err
	}
	if !slices.Contains(b.Finalizers, fleet.BundleFinalizer) {
		return b, nil
	}
	b = b.DeepCopy()
	b.Finalizers = slices.DeleteFunc(b.Finalizers, func(f string) bool { return f == fleet.BundleFinalizer })
	return h.bundles.Update(b)
}
