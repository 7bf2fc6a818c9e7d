// Package bundle turns each Bundle into a shared Content and one BundleDeployment per targeted
// cluster, deletes the BundleDeployments of clusters it no longer targets, and rolls their
// states up into the Bundle's status. (manager)
//
// BundleDeployments live in cluster namespaces, away from their Bundle, so they carry labels
// instead of owner references and this controller creates, updates and deletes them itself: it
// needs each one's current state to decide what a rollout may promote.
package bundle

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/sirupsen/logrus"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetgo/fleet/internal/controller/agentmanagement"
	"github.com/fleetgo/fleet/internal/controller/index"
	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/ocistorage"
	"github.com/fleetgo/fleet/internal/policy"
	"github.com/fleetgo/fleet/internal/restriction"
	"github.com/fleetgo/fleet/internal/secretuse"
	"github.com/fleetgo/fleet/internal/summary"
	"github.com/fleetgo/fleet/internal/target"
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
	// Secrets holds the Helm values Fleet 0.13+ keeps outside Bundles (spec.valuesHash) and the
	// registries of Bundles whose contents one keeps (spec.contentsId).
	Secrets corecontrollers.SecretCache
	// SecretWriter writes the agents' copies of those registries' Secrets.
	SecretWriter corecontrollers.SecretClient
	// GitRepos name the registry Secret of their Bundles (ociRegistrySecret); nil: the
	// namespace's Secret ocistorage.
	GitRepos fleetcontrollers.GitRepoCache
	// Guard refuses, as a registry's Secret, a Secret that is a credential of the manager or a
	// cluster (package secretuse).
	Guard secretuse.Guard
	// CheckinInterval is the agents' check-in interval, to tell offline clusters.
	CheckinInterval func() time.Duration
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
	nsCache  corecontrollers.NamespaceCache
	// secretWriter and gitrepos serve Bundles whose contents a registry keeps (oci.go).
	secretWriter corecontrollers.SecretClient
	gitrepos     fleetcontrollers.GitRepoCache
	guard        secretuse.Guard
	checkin      func() time.Duration
	now          func() time.Time
	memo         *renderMemo
	facts        *clusterFacts
	plans        *planCache
	created      *recentlyCreated
	// writeSlots holds one token per BundleDeployment write in flight.
	writeSlots chan struct{}
	// cpu holds one token per pass planning or rendering.
	cpu chan struct{}
	// sums holds each Bundle's resourcesSum by UID.
	sums sync.Map
}

// Register starts reconciling Bundles, and re-reconciles them when their BundleDeployments,
// or the Clusters and ClusterGroups of their namespace, change.
func Register(ctx context.Context, d Deps) {
	h := &handler{
		bundles: d.Bundles, bds: d.BundleDeployments, bdCache: d.BundleDeployments.Cache(),
		clusters: d.Clusters.Cache(), groups: d.ClusterGroups.Cache(), contents: d.Contents,
		mappings: d.Mappings.Cache(), policies: d.Policies, restrict: d.Restrictions, secrets: d.Secrets, nsCache: d.Namespaces,
		secretWriter: d.SecretWriter, gitrepos: d.GitRepos, guard: d.Guard, checkin: d.CheckinInterval, now: time.Now,
		memo: newRenderMemo(), facts: newClusterFacts(), plans: newPlanCache(), created: &recentlyCreated{m: map[string]createdEntry{}},
		writeSlots: make(chan struct{}, maxWritesInFlight),
		cpu:        make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1)),
	}
	go h.plans.expireEvery(ctx, h.now)
	d.Bundles.OnChange(ctx, "bundle", h.OnChange)
	fleetcontrollers.RegisterBundleStatusHandler(ctx, d.Bundles, "", "bundle-deploy", h.deploy)
	h.watchDeployments(ctx, d)
	h.watchTargeting(ctx, d)
}

// watchDeployments brings a Bundle's roll-up up to date when its deployments change.
func (h *handler) watchDeployments(ctx context.Context, d Deps) {
	// Once the cache has a created deployment, the copy kept meanwhile is not needed; once one
	// is deleted, nothing may stand in for it (a Bundle created again under the same name would
	// otherwise update a deployment that is gone).
	_, _ = d.BundleDeployments.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if bd, ok := obj.(*fleet.BundleDeployment); ok {
				if age, ok := h.created.take(bd.Namespace+"/"+bd.Name, h.now()); ok && age > slowCache {
					logrus.WithFields(logfields.For("bundle", bd.Namespace, bd.Name)).WithField("lag", age.Round(time.Millisecond).String()).
						Warn("the cache showed a created bundledeployment late")
				}
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if bd, ok := obj.(*fleet.BundleDeployment); ok {
				h.created.take(bd.Namespace+"/"+bd.Name, h.now())
			}
		},
	})
	d.BundleDeployments.OnChange(ctx, "bundle-from-deployment", func(_ string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
		if bd != nil {
			if ns, name := bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.BundleLabel]; ns != "" && name != "" {
				// Delayed, so a burst of deployment changes makes one roll-up.
				d.Bundles.EnqueueAfter(ns, name, rollupDelay)
			}
		}
		return bd, nil
	})
}

// watchTargeting re-plans the Bundles a Cluster, ClusterGroup or BundleNamespaceMapping change
// may retarget.
func (h *handler) watchTargeting(ctx context.Context, d Deps) {
	enqueueNamespace := func(ns string) {
		namespaces := []string{ns}
		// Bundles of namespaces with a BundleNamespaceMapping may target clusters anywhere.
		if mappings, err := d.Mappings.Cache().List("", labels.Everything()); err == nil {
			for _, m := range mappings {
				if m.Namespace != ns {
					namespaces = append(namespaces, m.Namespace)
				}
			}
		}
		for _, n := range namespaces {
			bundles, err := d.Bundles.Cache().List(n, labels.Everything())
			if err != nil {
				continue
			}
			for _, b := range bundles {
				d.Bundles.Enqueue(b.Namespace, b.Name)
			}
		}
	}
	// Clusters and groups change status all the time; only what targeting reads re-plans bundles.
	seen := &index.Fingerprints{}
	d.Clusters.OnChange(ctx, "bundle-from-cluster", func(key string, c *fleet.Cluster) (*fleet.Cluster, error) {
		if c == nil {
			seen.Forget("cluster/" + key)
			h.facts.forget(key)
			h.plans.changed()
			return c, nil
		}
		// What rendering reads of the Cluster (its facts' hash, which the plans then find
		// derived for this resourceVersion), and whether it is Offline, which the roll-up reads.
		offline := summary.Offline(c, h.checkin(), h.now())
		facts := h.facts.of(c)
		if seen.Changed("cluster/"+key, string(facts.hash[:])+strconv.FormatBool(offline)) {
			h.plans.changed()
			enqueueNamespace(c.Namespace)
		}
		return c, nil
	})
	d.ClusterGroups.OnChange(ctx, "bundle-from-clustergroup", func(key string, g *fleet.ClusterGroup) (*fleet.ClusterGroup, error) {
		if g == nil {
			seen.Forget("group/" + key)
			h.plans.changed()
			return g, nil
		}
		if seen.Changed("group/"+key, fmt.Sprint(g.Labels, g.Spec.Selector)) {
			h.plans.changed()
			enqueueNamespace(g.Namespace)
		}
		return g, nil
	})
	// What a Bundle renders to depends on the Policies and GitRepoRestrictions: render it again.
	rerender := func(key string) {
		ns, _, _ := strings.Cut(key, "/")
		h.plans.changed()
		bundles, _ := d.Bundles.Cache().List(ns, labels.Everything())
		for _, b := range bundles {
			h.memo.forget(b)
			d.Bundles.Enqueue(b.Namespace, b.Name)
		}
	}
	if d.Policies != nil {
		d.Policies.OnChange(ctx, "bundle-from-policy", func(key string, p *fleet.Policy) (*fleet.Policy, error) {
			rerender(key)
			return p, nil
		})
	}
	if d.Restrictions != nil {
		d.Restrictions.OnChange(ctx, "bundle-from-restriction", func(key string, r *fleet.GitRepoRestriction) (*fleet.GitRepoRestriction, error) {
			rerender(key)
			return r, nil
		})
	}
	d.Mappings.OnChange(ctx, "bundle-from-mapping", func(_ string, m *fleet.BundleNamespaceMapping) (*fleet.BundleNamespaceMapping, error) {
		h.plans.changed()
		if m != nil {
			enqueueNamespace(m.Namespace)
		}
		return m, nil
	})
}

// OnChange keeps the Bundle's finalizer, and deletes its BundleDeployments when it is deleted.
func (h *handler) OnChange(_ string, b *fleet.Bundle) (*fleet.Bundle, error) {
	if b == nil {
		return nil, nil
	}
	if b.DeletionTimestamp != nil {
		h.memo.forget(b)
		h.plans.drop(b)
		return h.finalize(b)
	}
	if !slices.Contains(b.Finalizers, fleet.BundleFinalizer) {
		b = b.DeepCopy()
		b.Finalizers = append(b.Finalizers, fleet.BundleFinalizer)
		return h.bundles.Update(b)
	}
	return b, nil
}

// deploy writes the Bundle's BundleDeployments and returns its status rolled up from them (the
// generated status handler writes it when it changed).
func (h *handler) deploy(b *fleet.Bundle, status fleet.BundleStatus) (fleet.BundleStatus, error) {
	if b.DeletionTimestamp != nil || !slices.Contains(b.Finalizers, fleet.BundleFinalizer) {
		return status, nil
	}

	// Planning and rendering are CPU work: run few passes at once, so the informers (which
	// Go schedules no differently from these) keep up with the watch.
	h.cpu <- struct{}{}
	var once sync.Once
	release := func() { once.Do(func() { <-h.cpu }) }
	defer release()

	if err := storedValues(h.secrets, b); err != nil {
		// Written by Fleet's apply alongside the Bundle: it is there in a moment, or the
		// Bundle was moved without it (the message says which).
		return h.rollup(b, status, nil, nil, err), err
	}
	if refused, err := h.applyPolicies(b, &status); refused || err != nil {
		return status, err
	}
	oci, err := h.ociStorage(b)
	if err != nil {
		return h.rollup(b, status, nil, nil, err), err
	}
	contentName, err := h.ensureContent(b)
	if err != nil {
		return status, err
	}
	// The passes that follow (capped by maxNew, or rolling up reports) reuse this plan.
	key, now := h.plans.key(b, contentName), h.now()
	plan, madeAt, reused := h.plans.get(b, key, now)
	var planErr error
	if !reused {
		plan, planErr = h.plan(b, contentName)
		madeAt = now
	}
	if planErr != nil {
		h.plans.drop(b)
		// A user error (invalid selector, template error): report it and keep what is deployed.
		return h.rollup(b, status, nil, nil, planErr), nil
	}
	result, r, requeue, err := h.sync(b, plan, contentName, oci, release)
	if err != nil {
		h.plans.drop(b)
		return status, err
	}
	if h.reusable(b) {
		h.plans.keep(b, key, madeAt, plan)
	} else {
		h.plans.drop(b)
	}
	if requeue {
		h.bundles.EnqueueAfter(b.Namespace, b.Name, requeueNew)
	}
	status = h.rollup(b, status, result, r, nil)
	status.OCIReference = ""
	if oci != nil {
		status.OCIReference = oci.Ref(b.Spec.ContentsID)
	}
	return status, nil
}

// reusable says whether b's plan may be kept for its next pass: not when its namespace has
// BundleNamespaceMappings, whose plans also read namespaces' labels, which nothing here watches.
func (h *handler) reusable(b *fleet.Bundle) bool {
	mappings, err := h.mappings.List(b.Namespace, labels.Everything())
	return err == nil && len(mappings) == 0
}

// applyPolicies applies the namespace's Policies to the Bundle (the handler's copy): a Bundle
// they refuse is Accepted=False naming the rule, and keeps what is deployed. The condition is
// kept only where the namespace has Policies (or had).
func (h *handler) applyPolicies(b *fleet.Bundle, status *fleet.BundleStatus) (bool, error) {
	var set policy.Set
	if h.policies != nil {
		ps, err := h.policies.Cache().List(b.Namespace, labels.Everything())
		if err != nil {
			return false, err
		}
		set = policy.Combine(ps)
	}
	restricted, err := h.restrictions(b)
	if err != nil {
		return false, err
	}
	if !set.Any && !restricted.Any && fleet.FindCondition(status.Conditions, fleet.ConditionAccepted) == nil {
		return false, nil
	}
	refuse := func(reason string, err error) (bool, error) {
		fleet.SetCondition(&status.Conditions, fleet.ConditionAccepted, corev1.ConditionFalse, reason, err.Error(), h.now())
		*status = h.rollup(b, *status, nil, nil, err)
		return true, nil
	}
	if err := set.Bundle(&b.Spec); err != nil {
		return refuse("PolicyViolation", err)
	}
	if err := restricted.Bundle(&b.Spec); err != nil {
		return refuse("Restricted", fmt.Errorf("GitRepoRestriction %s: %w", strings.Join(restricted.Names, ", "), err))
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionAccepted, corev1.ConditionTrue, "", "", h.now())
	return false, nil
}

// restrictions are the GitRepoRestrictions that bind the Bundle: its namespace's, unless it is
// the manager's own agent Bundle of a Cluster of the namespace (agentmanagement), which deploys
// the agent as the agent and is rewritten by the manager whenever it differs.
func (h *handler) restrictions(b *fleet.Bundle) (restriction.Set, error) {
	if h.restrict == nil {
		return restriction.Set{}, nil
	}
	rs, err := h.restrict.Cache().List(b.Namespace, labels.Everything())
	if err != nil || len(rs) == 0 {
		return restriction.Set{}, err
	}
	if owner := metav1.GetControllerOf(b); owner != nil && owner.Kind == "Cluster" && b.Labels[fleet.ManagedLabel] == "true" &&
		b.Name == agentmanagement.BundleName(owner.Name) {
		if c, err := h.clusters.Get(b.Namespace, owner.Name); err == nil && c.UID == owner.UID {
			return restriction.Set{}, nil
		}
	}
	return restriction.Combine(rs), nil
}

// planned is one targeted cluster: where its BundleDeployment goes (none yet when the cluster
// has no namespace) and what renders it.
type planned struct {
	cluster     *fleet.Cluster
	info        target.ClusterInfo
	match       *target.Match
	fingerprint [sha256.Size]byte
	namespace   string
}

// plan matches every Cluster the Bundle may target and checks that each BundleDeployment
// renders; the rendering itself happens when a deployment is written.
func (h *handler) plan(b *fleet.Bundle, contentName string) ([]planned, error) {
	namespaces, err := h.clusterNamespaces(b)
	if err != nil {
		return nil, err
	}
	var clusters []*fleet.Cluster
	var groups []*fleet.ClusterGroup
	for _, ns := range namespaces {
		cs, err := h.clusters.List(ns, labels.Everything())
		if err != nil {
			return nil, err
		}
		gs, err := h.groups.List(ns, labels.Everything())
		if err != nil {
			return nil, err
		}
		clusters, groups = append(clusters, cs...), append(groups, gs...)
	}
	slices.SortFunc(clusters, byKey)
	// Selectors are parsed once per pass, not once per cluster.
	gm, err := target.NewGroupMatcher(groups)
	if err != nil {
		return nil, fmt.Errorf("targeting error: %w", err)
	}
	matcher, err := target.NewMatcher(b)
	if err != nil {
		// (Fleet's words, which alerts match on.)
		return nil, fmt.Errorf("targeting error: %w", err)
	}
	var out []planned
	var errs []error
	for _, c := range clusters {
		ci := target.ClusterInfo{Cluster: c, Groups: gm.Groups(c)}
		// Options are merged only when a deployment is rendered: most passes render none.
		m := matcher.Match(ci)
		if m == nil {
			continue
		}
		// The cluster controller records the namespace once it has created it.
		facts := h.facts.of(c)
		ns := facts.namespace
		if c.Status.Namespace != ns {
			out = append(out, planned{cluster: c, info: ci})
			continue
		}
		fp := clusterFingerprint(facts.hash, ci, m)
		if err := h.memo.check(b, ci, m, contentName, fp); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", c.Name, err))
			continue
		}
		out = append(out, planned{cluster: c, info: ci, match: m, fingerprint: fp, namespace: ns})
	}
	return out, errors.Join(errs...)
}

// clusterNamespaces are the namespaces whose Clusters the Bundle may target: its own, and those
// its namespace's BundleNamespaceMappings open to it.
func (h *handler) clusterNamespaces(b *fleet.Bundle) ([]string, error) {
	out := []string{b.Namespace}
	mappings, err := h.mappings.List(b.Namespace, labels.Everything())
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{b.Namespace: true}
	for _, m := range mappings {
		if m.BundleSelector == nil || m.NamespaceSelector == nil {
			continue
		}
		bsel, err := metav1.LabelSelectorAsSelector(m.BundleSelector)
		if err != nil {
			return nil, fmt.Errorf("bundlenamespacemapping %s: bundleSelector: %w", m.Name, err)
		}
		if !bsel.Matches(labels.Set(b.Labels)) {
			continue
		}
		nsel, err := metav1.LabelSelectorAsSelector(m.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("bundlenamespacemapping %s: namespaceSelector: %w", m.Name, err)
		}
		nss, err := h.nsCache.List(nsel)
		if err != nil {
			return nil, err
		}
		for _, ns := range nss {
			if !seen[ns.Name] {
				seen[ns.Name] = true
				out = append(out, ns.Name)
			}
		}
	}
	return out, nil
}

// synced is a targeted cluster with its BundleDeployment as it now stands.
type synced struct {
	cluster *fleet.Cluster
	bd      *fleet.BundleDeployment
}

// sync creates, updates and deletes BundleDeployments to match the plan, staging options on
// every target and promoting them, partition by partition, within the rollout's limits. The
// result is in plan order.
// release is called once the decisions are made, before waiting for the writes.
func (h *handler) sync(b *fleet.Bundle, plan []planned, contentName string, oci *ocistorage.Storage, release func()) ([]synced, *rollout, bool, error) {
	byNamespace, err := h.existing(b, plan)
	if err != nil {
		return nil, nil, false, err
	}
	r, err := newRollout(b, plan, byNamespace)
	if err != nil {
		return nil, nil, false, err
	}
	ps := &syncPass{h: h, b: b, content: contentName, rollout: r, maxNew: maxNewOf(b), out: make([]synced, len(plan))}
	if oci != nil {
		ps.ociAgent = oci.AgentData()
	}
	ps.g.SetLimit(parallelWrites)
	wanted := map[string]bool{}
	for i, p := range plan {
		ps.out[i] = synced{cluster: p.cluster}
		if p.namespace != "" {
			wanted[p.namespace] = true
		}
	}
	// Decide in partition order (the rollout's budget depends on it), then write in parallel:
	// a pass that creates or updates many deployments is bound by round trips, not CPU.
	order, parts := r.order()
	var renderErr error
	for k, i := range order {
		if renderErr = ps.one(i, plan[i], byNamespace[plan[i].namespace], parts[k]); renderErr != nil {
			break // the writes already started finish first
		}
	}
	release()
	r.created = ps.created
	if err := ps.g.Wait(); err != nil {
		return nil, nil, false, err
	}
	if renderErr != nil {
		return nil, nil, false, renderErr
	}
	if err := h.deleteUntargeted(b, byNamespace, wanted); err != nil {
		return nil, nil, false, err
	}
	return ps.out, r, ps.requeue, nil
}

// syncPass is one pass of sync over a Bundle's targets.
type syncPass struct {
	h       *handler
	b       *fleet.Bundle
	content string
	rollout *rollout
	out     []synced
	g       errgroup.Group
	// created counts the deployments this pass creates, at most maxNew; requeue says some were
	// left for the next pass.
	created, maxNew int
	requeue         bool
	// ociAgent is what agents pull the Bundle's contents with (nil: a Content holds them).
	ociAgent map[string][]byte
}

// one decides about target i (cur: its deployment, nil when there is none) and, when it needs
// writing, starts the write. It returns a rendering error: checked while planning, so only a
// change between the two gets here.
func (ps *syncPass) one(i int, p planned, cur *fleet.BundleDeployment, part *partition) error {
	h, b := ps.h, ps.b
	if cur == nil && ps.created >= ps.maxNew {
		ps.requeue = true
		return nil
	}
	if cur != nil && cur.Spec.DeploymentID == cur.Spec.StagedDeploymentID &&
		h.memo.current(b, p.cluster.UID, ps.content, p.fingerprint, cur) {
		// Written for these inputs, promoted and untouched since: nothing to do.
		ps.out[i].bd = cur
		return nil
	}
	if cur != nil && h.memo.ahead(b, p.cluster.UID, ps.content, p.fingerprint, cur) {
		// Written for these inputs by an earlier pass; the cache shows it soon, and brings
		// another pass. Writing from this older copy would fail on its resourceVersion.
		ps.out[i].bd = cur
		return nil
	}
	desired, err := render(b, p.info, p.match, ps.content)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", p.cluster.Name, err)
	}
	if cur == nil {
		ps.created++
	}
	next := ps.rollout.apply(part, desired, cur)
	ps.g.Go(func() error {
		h.writeSlots <- struct{}{}
		defer func() { <-h.writeSlots }()
		bd, err := h.write(cur, next)
		ps.out[i].bd = bd
		if err == nil && bd.UID != "" && ps.ociAgent != nil {
			err = h.ensureOCISecret(bd, ps.ociAgent)
		}
		if err == nil && bd.UID != "" {
			h.memo.written(b, p.cluster.UID, ps.content, p.fingerprint, bd)
			if cur == nil {
				h.created.add(bd, h.now())
				// The cache may have shown it before it was recorded: then nothing takes it.
				if _, err := h.bdCache.Get(bd.Namespace, bd.Name); err == nil {
					h.created.take(bd.Namespace+"/"+bd.Name, h.now())
				}
			}
		}
		return err
	})
	return nil
}

// existing are the Bundle's BundleDeployments by cluster namespace: the cache's, and those this
// controller created that the cache has not shown yet (without them the next pass would create
// them again, and fail, while the cache catches up).
func (h *handler) existing(b *fleet.Bundle, plan []planned) (map[string]*fleet.BundleDeployment, error) {
	cached, err := h.bdCache.GetByIndex(index.ByBundle, b.Namespace+"/"+b.Name)
	if err != nil {
		return nil, err
	}
	byNamespace := map[string]*fleet.BundleDeployment{}
	for _, bd := range cached {
		byNamespace[bd.Namespace] = bd
	}
	for _, p := range plan {
		if p.namespace == "" || byNamespace[p.namespace] != nil {
			continue
		}
		if bd := h.created.get(p.namespace+"/"+b.Name, h.now()); bd != nil {
			byNamespace[p.namespace] = bd
		}
	}
	return byNamespace, nil
}

// maxNewOf is how many BundleDeployments one pass may create (rolloutStrategy.maxNew).
func maxNewOf(b *fleet.Bundle) int {
	if b.Spec.RolloutStrategy != nil && b.Spec.RolloutStrategy.MaxNew != nil && *b.Spec.RolloutStrategy.MaxNew > 0 {
		return *b.Spec.RolloutStrategy.MaxNew
	}
	return defaultMaxNew
}

// deleteUntargeted deletes the BundleDeployments of clusters the Bundle no longer targets.
func (h *handler) deleteUntargeted(b *fleet.Bundle, byNamespace map[string]*fleet.BundleDeployment, wanted map[string]bool) error {
	for ns, bd := range byNamespace {
		if wanted[ns] {
			continue
		}
		if err := h.bds.Delete(bd.Namespace, bd.Name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting bundledeployment %s/%s: %w", bd.Namespace, bd.Name, err)
		}
		logrus.WithFields(logfields.For("bundle", b.Namespace, b.Name)).WithField("clusterNamespace", ns).
			Info("deleted bundledeployment of a cluster no longer targeted")
	}
	return nil
}

// write creates or updates a BundleDeployment; unchanged ones are not written.
func (h *handler) write(cur, next *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
	if cur == nil {
		bd, err := h.bds.Create(next)
		if apierrors.IsAlreadyExists(err) {
			// The cache lags behind an earlier pass; the next pass updates it.
			return next, nil
		}
		if err != nil {
			return nil, fmt.Errorf("creating bundledeployment %s/%s: %w", next.Namespace, next.Name, err)
		}
		return bd, nil
	}
	// The downstream controller counts changes of the copies here.
	next.Spec.DownstreamResourcesGeneration = cur.Spec.DownstreamResourcesGeneration
	// Cached deployments hold their values compacted (controller.slimDeployment).
	next.Spec.Options.CompactValues()
	next.Spec.StagedOptions.CompactValues()
	if equality.Semantic.DeepEqual(cur.Spec, next.Spec) && labelsContain(cur.Labels, next.Labels) {
		return cur, nil
	}
	upd := cur.DeepCopy()
	upd.Spec = next.Spec
	if upd.Labels == nil {
		upd.Labels = map[string]string{}
	}
	for k, v := range next.Labels {
		upd.Labels[k] = v
	}
	bd, err := h.bds.Update(upd)
	if apierrors.IsNotFound(err) {
		// Deleted since it was seen: the next pass creates it.
		h.created.take(upd.Namespace+"/"+upd.Name, h.now())
	}
	if err != nil {
		return nil, fmt.Errorf("updating bundledeployment %s/%s: %w", upd.Namespace, upd.Name, err)
	}
	return bd, nil
}

// inClusterOrder sorts BundleDeployments by their cluster namespace. Bundles deleted together
// (a GitRepo's, a benchmark's) then reach each cluster at about the same moment, and its status
// roll-up, which waits a few seconds, counts all their deletions at once; in the index's order
// (random) each Bundle reached a cluster at another time, and at 10,000 clusters the Cluster
// statuses were written 42,658 times for 50,000 deletions.
func inClusterOrder(bds []*fleet.BundleDeployment) {
	slices.SortFunc(bds, func(a, b *fleet.BundleDeployment) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
}

// finalizeParallel bounds the deletes in flight for one deleted Bundle.
const finalizeParallel = 16

// finalize deletes every BundleDeployment of a deleted Bundle, then lets it go.
func (h *handler) finalize(b *fleet.Bundle) (*fleet.Bundle, error) {
	h.sums.Delete(string(b.UID))
	existing, err := h.bdCache.GetByIndex(index.ByBundle, b.Namespace+"/"+b.Name)
	if err != nil {
		return b, err
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

// rollup is the Bundle's status rolled up from its BundleDeployments (or saying why it cannot
// be planned).
func (h *handler) rollup(b *fleet.Bundle, status fleet.BundleStatus, result []synced, r *rollout, planErr error) fleet.BundleStatus {
	status.ObservedGeneration = b.Generation
	status.ResourcesSHA256Sum = h.resourcesSum(b)
	ready, message := corev1.ConditionTrue, ""
	if planErr != nil {
		ready, message = corev1.ConditionFalse, planErr.Error()
	} else {
		var s fleet.BundleSummary
		var offline []string
		for _, r := range result {
			name := r.cluster.Namespace + "/" + r.cluster.Name
			if r.bd != nil && summary.Offline(r.cluster, h.checkin(), h.now()) {
				// What an offline agent last reported may be stale: count the target as desired
				// but in no state, rather than as Ready.
				s.DesiredReady++
				offline = append(offline, name)
				continue
			}
			if r.bd == nil {
				summary.Increment(&s, fleet.Pending)
				if len(s.NonReadyResources) < summary.MaxNonReady {
					msg := "waiting for the cluster's namespace"
					if r.cluster.Status.Namespace == target.ClusterNamespace(r.cluster) {
						msg = "waiting to be created"
					}
					s.NonReadyResources = append(s.NonReadyResources, fleet.NonReadyResource{Name: name, State: fleet.Pending, Message: msg})
				}
				continue
			}
			summary.Add(&s, name, r.bd)
		}
		status.Summary = s
		status.NewlyCreated = r.created
		status.ResourceKey = resourceKeys(result)
		status.Unavailable = countUnavailable(result)
		status.PartitionStatus, status.UnavailablePartitions = r.status(result)
		status.MaxUnavailable = r.maxUnavailable
		status.MaxUnavailablePartitions = r.maxUnavailablePartitions
		status.Display = fleet.BundleDisplay{
			ReadyClusters: fmt.Sprintf("%d/%d", s.Ready, s.DesiredReady),
			State:         string(summary.WorstState(s)),
		}
		switch {
		case summary.WorstState(s) != "":
			ready, message = corev1.ConditionFalse, summary.ReadyMessage(s)
		case len(offline) > 0:
			status.Display.State = "Offline"
			ready = corev1.ConditionUnknown
		}
		if len(offline) > 0 {
			note := fmt.Sprintf("Offline(%d) %v", len(offline), firstN(offline, summary.MaxNonReady))
			if message != "" {
				message = note + "; " + message
			} else {
				message = note
			}
		}
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionReady, ready, summary.ReadyReason(ready, status.Display.State), message, h.now())
	return status
}

func countUnavailable(result []synced) int {
	n := 0
	for _, r := range result {
		if r.bd != nil && unavailable(r.bd) {
			n++
		}
	}
	return n
}

// unavailable: the cluster is not running the promoted version, or it is not ready.
func unavailable(bd *fleet.BundleDeployment) bool {
	return bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID || !bd.Status.Ready
}

func labelsContain(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// byKey orders Clusters by their "namespace/name" keys. It compares names alone within a
// namespace, the common case, so that sorting ten thousand Clusters on every pass allocates
// nothing; across namespaces it compares the keys themselves (a namespace may be a prefix of
// another, where the two orders differ).
func byKey(a, b *fleet.Cluster) int {
	if a.Namespace == b.Namespace {
		return strings.Compare(a.Name, b.Name)
	}
	return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
}

// resourceKeys are the objects the Bundle's BundleDeployments reported deploying, each once,
// sorted (Fleet's status.resourceKey).
func resourceKeys(result []synced) []fleet.ResourceKey {
	seen := map[fleet.ResourceKey]bool{}
	var out []fleet.ResourceKey
	for _, r := range result {
		if r.bd == nil {
			continue
		}
		for _, res := range r.bd.Status.Resources {
			k := fleet.ResourceKey{APIVersion: res.APIVersion, Kind: res.Kind, Namespace: res.Namespace, Name: res.Name}
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.SortFunc(out, func(a, b fleet.ResourceKey) int {
		return strings.Compare(a.APIVersion+"/"+a.Kind+"/"+a.Namespace+"/"+a.Name, b.APIVersion+"/"+b.Kind+"/"+b.Namespace+"/"+b.Name)
	})
	return out
}

// resourcesSum is the sha256 of the Bundle's resources (status.resourcesSha256Sum), computed
// once per generation.
func (h *handler) resourcesSum(b *fleet.Bundle) string {
	key := string(b.UID)
	if v, ok := h.sums.Load(key); ok {
		if s := v.(resourcesSum); s.generation == b.Generation {
			return s.sum
		}
	}
	data, err := json.Marshal(b.Spec.Resources)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	s := resourcesSum{generation: b.Generation, sum: hex.EncodeToString(sum[:])}
	h.sums.Store(key, s)
	return s.sum
}

type resourcesSum struct {
	generation int64
	sum        string
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// createdTTL bounds how long a created BundleDeployment stands in for the cache's copy (it is
// dropped as soon as the cache shows it): long enough for a watch far behind to catch up, short
// enough that one deleted before the cache ever saw it is recreated in reasonable time.
const createdTTL = 5 * time.Minute

// slowCache is a lag between creating a deployment and the cache showing it worth a warning.
const slowCache = 5 * time.Second

// recentlyCreated holds BundleDeployments just created, until the cache shows them.
type recentlyCreated struct {
	mu sync.Mutex
	m  map[string]createdEntry
	// sweepAt is the size at which expired entries (of targets no longer planned) are dropped.
	sweepAt int
}

type createdEntry struct {
	bd *fleet.BundleDeployment
	at time.Time
}

func (r *recentlyCreated) add(bd *fleet.BundleDeployment, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[bd.Namespace+"/"+bd.Name] = createdEntry{bd: bd, at: now}
	if len(r.m) >= max(r.sweepAt, 1024) {
		for k, e := range r.m {
			if now.Sub(e.at) > createdTTL {
				delete(r.m, k)
			}
		}
		r.sweepAt = 2 * len(r.m)
	}
}

func (r *recentlyCreated) get(key string, now time.Time) *fleet.BundleDeployment {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	if !ok {
		return nil
	}
	if now.Sub(e.at) > createdTTL {
		delete(r.m, key)
		return nil
	}
	return e.bd
}

// take drops key and reports how long ago it was added.
func (r *recentlyCreated) take(key string, now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	if !ok {
		return 0, false
	}
	delete(r.m, key)
	return now.Sub(e.at), true
}

// render renders the BundleDeployment for a cluster matched by MatchTargets.
func render(b *fleet.Bundle, ci target.ClusterInfo, m *target.Match, contentName string) (*fleet.BundleDeployment, error) {
	return target.Deployment(b, ci, &target.Match{Targets: m.Targets, Options: target.MergedOptions(b, m.Targets)}, contentName)
}
