// Package gitrepo turns GitRepos into Bundles: it polls each repository for the commit of its
// branch or revision (and takes commits from webhooks), runs a clone-and-apply for every new
// commit or spec change, and rolls the Bundles' deployments up into the GitRepo's status.
// (manager)
package gitrepo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/rancher/wrangler/v3/pkg/relatedresource"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller/index"
	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/metrics"
	"github.com/fleetgo/fleet/internal/policy"
	"github.com/fleetgo/fleet/internal/restriction"
	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// bundlesByRepo indexes Bundles by "namespace/gitRepoName".
const bundlesByRepo = "fleet.cattle.io/bundles-by-repo"

// byRepoURL indexes GitRepos by their repository (gitsource.RepoKey), for webhooks.
const byRepoURL = "fleet.cattle.io/gitrepos-by-repo-url"

// Defaults and timings.
const (
	// DefaultPollingInterval is how often a repository is polled unless pollingInterval says.
	DefaultPollingInterval = 15 * time.Second
	// failedRetry is how soon a failed run of the same commit and spec is tried again.
	failedRetry = time.Minute
	// rollupDelay coalesces the roll-ups that Bundle and BundleDeployment changes trigger.
	rollupDelay = time.Second
	// StateGitUpdating is display.state while a run is in flight.
	StateGitUpdating = "GitUpdating"
	// Job statuses (status.gitJobStatus), as kstatus names them.
	JobCurrent    = "Current"
	JobInProgress = "InProgress"
	JobFailed     = "Failed"
)

// Deps are what the controller reads and writes.
type Deps struct {
	Kube              kubernetes.Interface
	GitRepos          fleetcontrollers.GitRepoController
	Bundles           fleetcontrollers.BundleController
	BundleDeployments fleetcontrollers.BundleDeploymentController
	Clusters          fleetcontrollers.ClusterController
	// Runs bounds the clone-and-apply runs in flight (default 4).
	Runs int
	// CheckinInterval is the agents' check-in interval (for offline clusters).
	CheckinInterval func() time.Duration
	// JobRunner, when set, runs clone-and-apply as Jobs; otherwise runs happen in this process.
	JobRunner *JobRunner
	// RunTimeout bounds one in-process clone-and-apply (clone, chart downloads, apply); zero
	// means DefaultRunTimeout.
	RunTimeout time.Duration
	// Restrictions are the GitRepoRestrictions (per namespace).
	Restrictions fleetcontrollers.GitRepoRestrictionController
	// Secrets are read from their cache (credentials of GitRepos); a change of one a GitRepo
	// names brings that GitRepo back. Nil reads them from the apiserver.
	Secrets corecontrollers.SecretController
	// Config is the configuration in force (the git client's timeout).
	Config *config.Store
	// Policies are the namespaces' Policies (package policy); nil checks none.
	Policies fleetcontrollers.PolicyController
	// ImageScans, when set, get the ImageScans the repository's fleet.yaml files declare (runs
	// in this process).
	ImageScans fleetcontrollers.ImageScanClient
	// Guard refuses the Secrets a GitRepo may not name (package secretuse).
	Guard secretuse.Guard
	// KnownHosts are the SSH host keys for secrets without known_hosts (nil: none).
	KnownHosts *KnownHosts
}

// DefaultRunTimeout bounds an in-process clone-and-apply.
const DefaultRunTimeout = 10 * time.Minute

// bySecret indexes GitRepos by "namespace/name" of every Secret they name for credentials.
const bySecret = "fleet.cattle.io/gitrepo-by-secret"

// attempt is one clone-and-apply run of a commit and spec generation.
type attempt struct {
	commit     string
	generation int64
	done       bool
	err        error
	finished   time.Time
}

type handler struct {
	Deps
	// ctx is the controller's: its end cancels polls, clones and applies in flight.
	ctx   context.Context
	slots chan struct{}
	// runs maps a GitRepo's key to its latest attempt.
	mu   sync.Mutex
	runs map[string]*attempt
	now  func() time.Time
}

// Register starts the GitRepo controller.
func Register(ctx context.Context, d Deps) {
	if d.Runs <= 0 {
		d.Runs = 4
	}
	h := &handler{Deps: d, ctx: ctx, slots: make(chan struct{}, d.Runs), runs: map[string]*attempt{}, now: time.Now}
	d.GitRepos.Cache().AddIndexer(byRepoURL, func(gr *fleet.GitRepo) ([]string, error) {
		if k := gitsource.RepoKey(gr.Spec.Repo); k != "" {
			return []string{k}, nil
		}
		return nil, nil
	})
	d.Bundles.Cache().AddIndexer(bundlesByRepo, func(b *fleet.Bundle) ([]string, error) {
		if repo := b.Labels[fleet.RepoLabel]; repo != "" {
			return []string{b.Namespace + "/" + repo}, nil
		}
		return nil, nil
	})
	d.GitRepos.OnChange(ctx, "gitrepo", h.onChange)
	fleetcontrollers.RegisterGitRepoStatusHandler(ctx, d.GitRepos, "", "gitrepo-status", h.reconcile)
	if d.Secrets != nil {
		watchSecrets(d)
	}
	watchChildren(ctx, d)
}

// watchSecrets brings a GitRepo back when a Secret it names for credentials changes (or its
// namespace's gitcredential, for one naming no clientSecretName).
func watchSecrets(d Deps) {
	d.GitRepos.Cache().AddIndexer(bySecret, func(gr *fleet.GitRepo) ([]string, error) {
		var out []string
		client := gr.Spec.ClientSecretName
		if client == "" {
			client = DefaultClientSecretName
		}
		for _, name := range []string{client, gr.Spec.HelmSecretName, gr.Spec.HelmSecretNameForPaths} {
			if name != "" {
				out = append(out, gr.Namespace+"/"+name)
			}
		}
		return out, nil
	})
	enqueue := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if sec, ok := obj.(*corev1.Secret); ok {
			repos, _ := d.GitRepos.Cache().GetByIndex(bySecret, sec.Namespace+"/"+sec.Name)
			for _, gr := range repos {
				d.GitRepos.Enqueue(gr.Namespace, gr.Name)
			}
		}
	}
	_, _ = d.Secrets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, DeleteFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) }})
}

// watchChildren brings a GitRepo's roll-up up to date when its Bundles, deployments, Jobs or its
// namespace's restrictions change.
func watchChildren(ctx context.Context, d Deps) {
	// A GitRepo's children name it by label; their bursts of changes make one roll-up.
	rollup := index.After{Queue: d.GitRepos, Delay: rollupDelay}
	relatedresource.Watch(ctx, "gitrepo-bundles", index.Parent("", fleet.RepoLabel), rollup, d.Bundles)
	relatedresource.Watch(ctx, "gitrepo-deployments", index.Parent(fleet.BundleNamespaceLabel, fleet.RepoLabel), rollup, d.BundleDeployments)
	if d.Restrictions != nil {
		d.Restrictions.OnChange(ctx, "gitrepo-restrictions", index.RequeueNamespace[*fleet.GitRepoRestriction](d.GitRepos.Cache().List, d.GitRepos.Enqueue))
	}
	if d.Policies != nil {
		d.Policies.OnChange(ctx, "gitrepo-policies", index.RequeueNamespace[*fleet.Policy](d.GitRepos.Cache().List, d.GitRepos.Enqueue))
	}
	if d.JobRunner != nil {
		relatedresource.Watch(ctx, "gitrepo-jobs", index.Parent("", fleet.RepoLabel), d.GitRepos, d.JobRunner.Jobs)
	}
}

// context is the controller's (Background for a handler made without Register, in tests).
func (h *handler) context() context.Context {
	if h.ctx == nil {
		return context.Background()
	}
	return h.ctx
}

func (h *handler) log(gr *fleet.GitRepo) *logrus.Entry {
	return logrus.WithFields(logfields.For("gitrepo", gr.Namespace, gr.Name))
}

func (h *handler) onChange(key string, gr *fleet.GitRepo) (*fleet.GitRepo, error) {
	if gr == nil {
		h.mu.Lock()
		delete(h.runs, key)
		h.mu.Unlock()
		ns, name, _ := strings.Cut(key, "/")
		metrics.ForgetGitRepo(ns, name)
		return nil, nil
	}
	if gr.DeletionTimestamp != nil {
		return h.finalize(gr)
	}
	if !slices.Contains(gr.Finalizers, fleet.GitRepoFinalizer) {
		gr = gr.DeepCopy()
		gr.Finalizers = append(gr.Finalizers, fleet.GitRepoFinalizer)
		return h.GitRepos.Update(gr)
	}
	return h.recordDefaultServiceAccount(gr)
}

// recordDefaultServiceAccount writes the namespace's Policies' default service account into a
// GitRepo that names none, as Fleet does: the object then shows what it runs as. (The other
// defaults of Policies and GitRepoRestrictions go into what runs only.)
func (h *handler) recordDefaultServiceAccount(gr *fleet.GitRepo) (*fleet.GitRepo, error) {
	if h.Policies == nil || gr.Spec.ServiceAccount != "" {
		return gr, nil
	}
	ps, err := h.Policies.Cache().List(gr.Namespace, labels.Everything())
	if err != nil {
		return gr, err
	}
	sa := policy.Combine(ps).GitRepoServiceAccount
	if sa == "" {
		return gr, nil
	}
	gr = gr.DeepCopy()
	gr.Spec.ServiceAccount = sa
	return h.GitRepos.Update(gr)
}

// reconcile polls the repository, runs clone-and-apply of a new commit and rolls the GitRepo's
// Bundles up into the status it returns (the generated status handler writes it when it
// changed).
func (h *handler) reconcile(gr *fleet.GitRepo, st fleet.GitRepoStatus) (fleet.GitRepoStatus, error) {
	if gr.DeletionTimestamp != nil || !slices.Contains(gr.Finalizers, fleet.GitRepoFinalizer) {
		return st, nil
	}
	key := gr.Namespace + "/" + gr.Name
	now := h.now()
	status := &st
	gr, refusal, err := h.effective(gr)
	if err != nil {
		return st, err
	}
	if refusal != nil {
		fleet.SetCondition(&status.Conditions, fleet.ConditionAccepted, corev1.ConditionFalse, refusal.reason, refusal.err.Error(), now)
		h.rollup(gr, status, now)
		return st, nil
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionAccepted, corev1.ConditionTrue, "", "", now)
	gr = h.withRancherCA(gr)
	src, err := h.source(gr)
	if err != nil {
		// A credentials Secret that is missing or wrong: the user must fix it.
		fleet.SetCondition(&status.Conditions, fleet.ConditionGitPolling, corev1.ConditionFalse, "Error", err.Error(), now)
		h.rollup(gr, status, now)
		return st, nil
	}

	h.pollWhenDue(gr, src, status, now)
	commit := status.PollingCommit
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionGitPolling); c == nil || c.Status != corev1.ConditionFalse || gr.Spec.DisablePolling {
		// (While the repository cannot be polled, its last commit may be of another branch or
		// repository than the spec now names: nothing runs.)
		h.run(key, gr, src, commit, status, now)
	}
	h.rollup(gr, status, now)
	return st, nil
}

// refusal is why the namespace's GitRepoRestrictions or Policies refuse a GitRepo.
type refusal struct {
	reason string
	err    error
}

// effective is the GitRepo as it runs: its spec with the namespace's GitRepoRestrictions' and
// Policies' defaults (the object keeps what the user wrote; status writes ignore the spec), or
// why they refuse it.
func (h *handler) effective(gr *fleet.GitRepo) (*fleet.GitRepo, *refusal, error) {
	if h.Restrictions != nil {
		rs, err := h.Restrictions.Cache().List(gr.Namespace, labels.Everything())
		if err != nil {
			return gr, nil, err
		}
		spec := gr.Spec
		if err := restriction.Combine(rs).GitRepo(&spec); err != nil {
			return gr, &refusal{"Restricted", err}, nil
		}
		restricted := gr.DeepCopy()
		restricted.Spec = spec
		gr = restricted
	}
	if h.Policies != nil {
		ps, err := h.Policies.Cache().List(gr.Namespace, labels.Everything())
		if err != nil {
			return gr, nil, err
		}
		set := policy.Combine(ps)
		applied := gr
		if set.Any {
			applied = gr.DeepCopy()
		}
		if err := set.GitRepo(&applied.Spec); err != nil {
			return gr, &refusal{"PolicyViolation", err}, nil
		}
		gr = applied
	}
	return gr, nil, nil
}

// finalize deletes the GitRepo's Bundles (their deployments follow; with keepResources the
// workloads stay), then lets it go.
func (h *handler) finalize(gr *fleet.GitRepo) (*fleet.GitRepo, error) {
	bundles, err := h.Bundles.Cache().List(gr.Namespace, labels.SelectorFromSet(labels.Set{fleet.RepoLabel: gr.Name}))
	if err != nil {
		return gr, err
	}
	for _, b := range bundles {
		if err := h.Bundles.Delete(b.Namespace, b.Name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return gr, fmt.Errorf("deleting bundle %s/%s of gitrepo %s: %w", b.Namespace, b.Name, gr.Name, err)
		}
	}
	if !slices.Contains(gr.Finalizers, fleet.GitRepoFinalizer) {
		return gr, nil
	}
	gr = gr.DeepCopy()
	gr.Finalizers = slices.DeleteFunc(gr.Finalizers, func(f string) bool { return f == fleet.GitRepoFinalizer })
	return h.GitRepos.Update(gr)
}
