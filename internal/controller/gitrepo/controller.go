// Package gitrepo turns GitRepos into Bundles: it polls each repository for the commit of its
// branch or revision (and takes commits from webhooks), runs a clone-and-apply for every new
// commit or spec change, and rolls the Bundles' deployments up into the GitRepo's status.
// (manager)
package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetgo/fleet/internal/bundlebuild"
	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller/index"
	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/metrics"
	"github.com/fleetgo/fleet/internal/ocistorage"
	"github.com/fleetgo/fleet/internal/policy"
	"github.com/fleetgo/fleet/internal/restriction"
	"github.com/fleetgo/fleet/internal/secretuse"
	"github.com/fleetgo/fleet/internal/summary"
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

// watchSecrets brings a GitRepo back when a Secret it names for credentials changes.
func watchSecrets(d Deps) {
	d.GitRepos.Cache().AddIndexer(bySecret, func(gr *fleet.GitRepo) ([]string, error) {
		var out []string
		for _, name := range []string{gr.Spec.ClientSecretName, gr.Spec.HelmSecretName, gr.Spec.HelmSecretNameForPaths} {
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
	// Bundles and deployments of a GitRepo bring its roll-up up to date.
	d.Bundles.OnChange(ctx, "gitrepo-bundles", func(_ string, b *fleet.Bundle) (*fleet.Bundle, error) {
		if b != nil && b.Labels[fleet.RepoLabel] != "" {
			d.GitRepos.EnqueueAfter(b.Namespace, b.Labels[fleet.RepoLabel], rollupDelay)
		}
		return b, nil
	})
	if d.Restrictions != nil {
		d.Restrictions.OnChange(ctx, "gitrepo-restrictions", index.RequeueNamespace[*fleet.GitRepoRestriction](d.GitRepos.Cache().List, d.GitRepos.Enqueue))
	}
	if d.Policies != nil {
		d.Policies.OnChange(ctx, "gitrepo-policies", index.RequeueNamespace[*fleet.Policy](d.GitRepos.Cache().List, d.GitRepos.Enqueue))
	}
	if d.JobRunner != nil {
		d.JobRunner.Jobs.OnChange(ctx, "gitrepo-jobs", func(_ string, j *batchv1.Job) (*batchv1.Job, error) {
			if j != nil && j.Labels[fleet.RepoLabel] != "" {
				d.GitRepos.Enqueue(j.Namespace, j.Labels[fleet.RepoLabel])
			}
			return j, nil
		})
	}
	d.BundleDeployments.OnChange(ctx, "gitrepo-deployments", func(_ string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
		if bd != nil {
			if ns, repo := bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.RepoLabel]; ns != "" && repo != "" {
				d.GitRepos.EnqueueAfter(ns, repo, rollupDelay)
			}
		}
		return bd, nil
	})
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
	if h.Restrictions != nil {
		rs, err := h.Restrictions.Cache().List(gr.Namespace, labels.Everything())
		if err != nil {
			return st, err
		}
		spec := gr.Spec
		if err := restriction.Combine(rs).GitRepo(&spec); err != nil {
			fleet.SetCondition(&status.Conditions, fleet.ConditionAccepted, corev1.ConditionFalse, "Restricted", err.Error(), now)
			h.rollup(gr, status, now)
			return st, nil
		}
		// What runs is the spec with the namespace's defaults; the object keeps what the user wrote.
		// (Status writes ignore the spec.)
		restricted := gr.DeepCopy()
		restricted.Spec = spec
		gr = restricted
	}
	if h.Policies != nil {
		ps, err := h.Policies.Cache().List(gr.Namespace, labels.Everything())
		if err != nil {
			return st, err
		}
		set := policy.Combine(ps)
		// The Policies' defaults, like the restrictions', go into what runs, not the object.
		applied := gr
		if set.Any {
			applied = gr.DeepCopy()
		}
		if err := set.GitRepo(&applied.Spec); err != nil {
			fleet.SetCondition(&status.Conditions, fleet.ConditionAccepted, corev1.ConditionFalse, "PolicyViolation", err.Error(), now)
			h.rollup(gr, status, now)
			return st, nil
		}
		gr = applied
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionAccepted, corev1.ConditionTrue, "", "", now)
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

// pollWhenDue asks the repository for the branch's commit when the polling interval is up, the
// spec changed or a webhook came, and schedules the next look. A webhook only says "look now":
// the commit that runs is always the one the remote's branch points at (ls-remote), never one a
// payload names.
func (h *handler) pollWhenDue(gr *fleet.GitRepo, src gitsource.Source, status *fleet.GitRepoStatus, now time.Time) {
	webhookNewer := !status.LastWebhookTime.IsZero() && !status.LastWebhookTime.Before(&status.LastPollingTime)
	if gr.Spec.DisablePolling {
		// Only the periodic look stops (as on Fleet): the first commit, a changed spec (a risen
		// forceSyncGeneration among its changes) and a webhook still make the controller look,
		// and a look that failed is tried again.
		failed := false
		if c := fleet.FindCondition(status.Conditions, fleet.ConditionGitPolling); c != nil && c.Status == corev1.ConditionFalse {
			failed = true
		}
		retryDue := failed && !now.Before(status.LastPollingTime.Add(failedRetry))
		if webhookNewer || status.LastPollingTime.IsZero() || gr.Generation != status.ObservedGeneration || retryDue {
			h.poll(gr, src, status, now)
		}
		if c := fleet.FindCondition(status.Conditions, fleet.ConditionGitPolling); c != nil && c.Status == corev1.ConditionFalse {
			h.GitRepos.EnqueueAfter(gr.Namespace, gr.Name, status.LastPollingTime.Add(failedRetry).Sub(now))
		}
	} else {
		interval := DefaultPollingInterval
		if gr.Spec.PollingInterval != nil && gr.Spec.PollingInterval.Duration > 0 {
			interval = gr.Spec.PollingInterval.Duration
		}
		due := status.LastPollingTime.Add(interval)
		if status.LastPollingTime.IsZero() || !now.Before(due) || gr.Generation != status.ObservedGeneration || webhookNewer {
			h.poll(gr, src, status, now)
			due = now.Add(interval)
		}
		// Jitter of a tenth keeps many repositories from polling in step.
		wait := due.Sub(now) + time.Duration(rand.Int64N(int64(interval/10)+1))
		h.GitRepos.EnqueueAfter(gr.Namespace, gr.Name, wait)
	}
	if webhookNewer && status.WebhookCommit != "" && status.PollingCommit != "" && status.WebhookCommit != status.PollingCommit {
		h.log(gr).WithFields(logrus.Fields{"webhookCommit": status.WebhookCommit, "commit": status.PollingCommit}).
			Warn("a webhook named a commit the branch does not point at; the branch's commit is used")
	}
}

func (h *handler) poll(gr *fleet.GitRepo, src gitsource.Source, status *fleet.GitRepoStatus, now time.Time) {
	ctx, cancel := context.WithTimeout(h.context(), h.Config.Get().GitClientTimeout.Duration)
	defer cancel()
	started := time.Now()
	commit, err := gitsource.LatestCommit(ctx, src)
	metrics.FetchedLatestCommit(gr.Namespace, gr.Name, time.Since(started), err)
	status.LastPollingTime = metav1.NewTime(now)
	if err != nil {
		fleet.SetCondition(&status.Conditions, fleet.ConditionGitPolling, corev1.ConditionFalse, "Error", err.Error(), now)
		return
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionGitPolling, corev1.ConditionTrue, "", "", now)
	status.PollingCommit = commit
}

// run starts a clone-and-apply of commit when the GitRepo is not at it (or its spec changed),
// and records the outcome of a finished one in status.
func (h *handler) run(key string, gr *fleet.GitRepo, src gitsource.Source, commit string, status *fleet.GitRepoStatus, now time.Time) {
	if commit == "" {
		return
	}
	if h.JobRunner != nil {
		if err := h.runJob(gr, commit, status); err != nil {
			status.GitJobStatus = JobFailed
			fleet.SetCondition(&status.Conditions, fleet.ConditionStalled, corev1.ConditionTrue, "Error", err.Error(), now)
			h.GitRepos.EnqueueAfter(gr.Namespace, gr.Name, failedRetry)
		}
		return
	}
	h.mu.Lock()
	a := h.runs[key]
	h.mu.Unlock()
	if a != nil && a.done && a.commit == commit && a.generation == gr.Generation {
		if a.err == nil {
			status.Commit, status.ObservedGeneration, status.GitJobStatus = commit, gr.Generation, JobCurrent
			status.UpdateGeneration = gr.Spec.ForceSyncGeneration
			fleet.SetCondition(&status.Conditions, fleet.ConditionReconciling, corev1.ConditionFalse, "", "", now)
			fleet.SetCondition(&status.Conditions, fleet.ConditionStalled, corev1.ConditionFalse, "", "", now)
			return
		}
		status.GitJobStatus = JobFailed
		fleet.SetCondition(&status.Conditions, fleet.ConditionReconciling, corev1.ConditionFalse, "", "", now)
		fleet.SetCondition(&status.Conditions, fleet.ConditionStalled, corev1.ConditionTrue, "Error", a.err.Error(), now)
		if wait := failedRetry - now.Sub(a.finished); wait > 0 {
			h.GitRepos.EnqueueAfter(gr.Namespace, gr.Name, wait)
			return
		}
		// Tried long enough ago (an unreachable server may be back): again.
	} else if a != nil && !a.done {
		status.GitJobStatus = JobInProgress
		return
	} else if status.Commit == commit && status.ObservedGeneration == gr.Generation && a == nil {
		// Applied before this controller (re)started.
		return
	}
	h.startRun(key, gr, src, commit, status, now)
}

// startRun starts a clone-and-apply of commit in the background (at most Runs at once); its
// end brings the GitRepo back.
func (h *handler) startRun(key string, gr *fleet.GitRepo, src gitsource.Source, commit string, status *fleet.GitRepoStatus, now time.Time) {
	next := &attempt{commit: commit, generation: gr.Generation}
	h.mu.Lock()
	h.runs[key] = next
	h.mu.Unlock()
	status.GitJobStatus = JobInProgress
	fleet.SetCondition(&status.Conditions, fleet.ConditionReconciling, corev1.ConditionTrue, "", "applying commit "+commit, now)
	opts := h.applyOptions(gr, commit)
	metrics.GitJobStarted(gr.Namespace, gr.Name, nil)
	go func() {
		h.slots <- struct{}{}
		started := time.Now()
		err := h.cloneAndApply(gr, src, commit, opts)
		if err == nil {
			metrics.GitJobSucceeded(gr.Namespace, gr.Name, time.Since(started))
		}
		<-h.slots
		if err != nil {
			h.log(gr).WithError(err).Warn("clone and apply failed")
		}
		h.mu.Lock()
		next.done, next.err, next.finished = true, err, h.now()
		h.mu.Unlock()
		h.GitRepos.Enqueue(gr.Namespace, gr.Name)
	}()
}

// targetsOf are the GitRepo's targets; a GitRepo that names none targets the ClusterGroup
// "default" of its namespace (fleet-local has one holding every cluster there).
func targetsOf(gr *fleet.GitRepo) []fleet.GitTarget {
	if len(gr.Spec.Targets) == 0 {
		return []fleet.GitTarget{{Name: "default", ClusterGroup: fleet.DefaultClusterGroup}}
	}
	return gr.Spec.Targets
}

func (h *handler) applyOptions(gr *fleet.GitRepo, commit string) bundlebuild.Options {
	o := bundlebuild.Options{Paths: gr.Spec.Paths}
	o.Name, o.Namespace, o.Commit = gr.Name, gr.Namespace, commit
	o.Targets, o.TargetRestrictions = bundlereader.FromGitTargets(targetsOf(gr))
	o.ServiceAccount, o.TargetNamespace = gr.Spec.ServiceAccount, gr.Spec.TargetNamespace
	o.Paused, o.KeepResources, o.DeleteNamespace = gr.Spec.Paused, gr.Spec.KeepResources, gr.Spec.DeleteNamespace
	o.CorrectDrift = gr.Spec.CorrectDrift
	o.HelmRepoURLRegex = gr.Spec.HelmRepoURLRegex
	o.SyncGeneration = gr.Spec.ForceSyncGeneration
	if i := gr.Spec.ImageScanInterval; i != nil {
		o.ImageScanInterval = i.Duration
	}
	if h.Restrictions != nil {
		if rs, err := h.Restrictions.Cache().List(gr.Namespace, labels.Everything()); err == nil {
			o.AllowedTargetNamespaceSelector = restriction.Combine(rs).Selector
		}
	}
	o.Labels = map[string]string{}
	for k, v := range gr.Labels {
		o.Labels[k] = v
	}
	if len(o.Paths) == 0 {
		o.Paths = []string{"/"}
	}
	// spec.bundles names each bundle folder (and its options file): those, and nothing found by
	// scanning, are the GitRepo's Bundles.
	if len(gr.Spec.Bundles) > 0 {
		o.Scan.Driven, o.Paths = true, nil
		for _, b := range gr.Spec.Bundles {
			p := b.Base
			if b.Options != "" {
				p += ":" + b.Options
			}
			o.Paths = append(o.Paths, p)
		}
	}
	return o
}

func (h *handler) cloneAndApply(gr *fleet.GitRepo, src gitsource.Source, commit string, o bundlebuild.Options) error {
	timeout := h.RunTimeout
	if timeout <= 0 {
		timeout = DefaultRunTimeout
	}
	ctx, cancel := context.WithTimeout(h.context(), timeout)
	defer cancel()
	err := h.cloneAndApplyIn(ctx, gr, src, commit, o)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The clone or a chart download stalled: the run slot is free again, and the
		// GitRepo says where it waited.
		return fmt.Errorf("clone and apply of commit %s did not finish within %s: %w", commit, timeout, err)
	}
	return err
}

func (h *handler) cloneAndApplyIn(ctx context.Context, gr *fleet.GitRepo, src gitsource.Source, commit string, o bundlebuild.Options) error {
	dir, err := os.MkdirTemp("", "gitrepo-"+gr.Name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(dir+".paths", 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(dir + ".paths")
	defer os.Remove(dir + ".cacerts")
	if _, err := gitsource.Checkout(ctx, src, dir, commit); err != nil {
		return err
	}
	auth, caFile, err := h.helmAuth(gr, dir)
	if err != nil {
		return err
	}
	o.ChartAuth = auth
	if caFile != "" {
		o.ChartAuth.CAFile = caFile
	}
	if o.OCI, err = h.ociStorage(gr); err != nil {
		return err
	}
	if sec := gr.Spec.HelmSecretNameForPaths; sec != "" {
		s, err := h.secret(gr.Namespace, sec)
		if err != nil {
			return fmt.Errorf("helmSecretNameForPaths %s: %w", sec, err)
		}
		if o.ChartAuthByPath, err = bundlereader.ParsePathCredentials(s.Data[bundlereader.PathCredentialsKey], dir+".paths"); err != nil {
			return fmt.Errorf("helmSecretNameForPaths %s: %w", sec, err)
		}
	}
	o.Root = dir
	o.ImageScans = h.ImageScans
	return bundlebuild.Run(ctx, o, h.Bundles, io.Discard)
}

// ociStorage is the registry that keeps the GitRepo's bundle contents: the Secret its
// ociRegistrySecret names, or the namespace's Secret ocistorage (of type
// fleet.cattle.io/bundle-oci-storage/v1alpha1) when it names none; nil without either.
func (h *handler) ociStorage(gr *fleet.GitRepo) (*ocistorage.Storage, error) {
	st, _, err := h.ociStorageSecret(gr)
	return st, err
}

// ociStorageSecret is ociStorage and the name of its Secret.
func (h *handler) ociStorageSecret(gr *fleet.GitRepo) (*ocistorage.Storage, string, error) {
	name := gr.Spec.OCIRegistrySecret
	if name == "" {
		s, err := h.secret(gr.Namespace, ocistorage.DefaultSecretName)
		if apierrors.IsNotFound(err) || err == nil && s.Type != ocistorage.SecretType {
			return nil, "", nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("oci storage secret %s: %w", ocistorage.DefaultSecretName, err)
		}
		name = s.Name
	}
	s, err := h.secret(gr.Namespace, name)
	if err != nil {
		return nil, "", fmt.Errorf("ociRegistrySecret %s: %w", name, err)
	}
	st, err := ocistorage.FromSecret(s.Data)
	if err != nil {
		return nil, "", fmt.Errorf("ociRegistrySecret %s: %w", name, err)
	}
	return &st, name, nil
}

// helmAuth reads helmSecretName (username, password, cacerts) for chart downloads.
func (h *handler) helmAuth(gr *fleet.GitRepo, dir string) (bundlereader.ChartAuth, string, error) {
	var a bundlereader.ChartAuth
	// The repository's TLS settings hold for charts in git (git::) too, as on Fleet.
	a.InsecureSkipTLSVerify, a.GitCABundle = gr.Spec.InsecureSkipTLSVerify, gr.Spec.CABundle
	if gr.Spec.HelmSecretName == "" {
		return a, "", nil
	}
	s, err := h.secret(gr.Namespace, gr.Spec.HelmSecretName)
	if err != nil {
		return a, "", fmt.Errorf("helmSecretName %s: %w", gr.Spec.HelmSecretName, err)
	}
	a.Username, a.Password = string(s.Data["username"]), string(s.Data["password"])
	if ca := s.Data["cacerts"]; len(ca) > 0 {
		f := dir + ".cacerts"
		if err := os.WriteFile(f, ca, 0o600); err != nil {
			return a, "", err
		}
		return a, f, nil
	}
	return a, "", nil
}

// secret returns a Secret of the GitRepo's namespace from the cache (from the apiserver when
// the handler has no cache).
func (h *handler) secret(ns, name string) (*corev1.Secret, error) {
	var s *corev1.Secret
	var err error
	if h.Secrets != nil {
		s, err = h.Secrets.Cache().Get(ns, name)
	} else {
		s, err = h.Kube.CoreV1().Secrets(ns).Get(h.context(), name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	// A GitRepo names its credentials: none may be a credential of the manager or a cluster.
	if err := h.Guard.Check(s, "GitRepo of namespace "+ns); err != nil {
		return nil, err
	}
	return s, nil
}

// source is the GitRepo's repository with its credentials (clientSecretName), SSH ones with
// the shared known hosts when the secret holds none.
func (h *handler) source(gr *fleet.GitRepo) (gitsource.Source, error) {
	src, err := Source(gr, h.secret)
	if err != nil {
		return src, err
	}
	return src, h.KnownHosts.fill(&src.Auth)
}

// Source is the GitRepo's repository with its credentials (clientSecretName, read with
// secret): what the GitRepo controller clones and ImageScans push to.
func Source(gr *fleet.GitRepo, secret func(ns, name string) (*corev1.Secret, error)) (gitsource.Source, error) {
	src := gitsource.Source{URL: gr.Spec.Repo, Branch: gr.Spec.Branch, Revision: gr.Spec.Revision,
		CABundle: gr.Spec.CABundle, InsecureSkipTLSVerify: gr.Spec.InsecureSkipTLSVerify}
	if gr.Spec.Repo == "" {
		return src, fmt.Errorf("spec.repo is empty")
	}
	s, err := clientSecret(gr, secret)
	if err != nil || s == nil {
		return src, err
	}
	src.Auth = gitsource.Auth{Username: string(s.Data[corev1.BasicAuthUsernameKey]), Password: string(s.Data[corev1.BasicAuthPasswordKey]),
		SSHPrivateKey: s.Data[corev1.SSHAuthPrivateKey], KnownHosts: s.Data["known_hosts"]}
	if src.Auth.GitHubApp, err = gitsource.GitHubAppOf(s.Data); err != nil {
		return src, fmt.Errorf("secret %s: %w", s.Name, err)
	}
	return src, nil
}

// DefaultClientSecretName is the Secret a GitRepo naming no clientSecretName clones with when
// its namespace has one (as on Fleet).
const DefaultClientSecretName = "gitcredential"

// clientSecret is the GitRepo's git credentials: its clientSecretName, else the namespace's
// Secret gitcredential when there is one (nil when there is none).
func clientSecret(gr *fleet.GitRepo, secret func(ns, name string) (*corev1.Secret, error)) (*corev1.Secret, error) {
	name := gr.Spec.ClientSecretName
	if name == "" {
		s, err := secret(gr.Namespace, DefaultClientSecretName)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("default credentials %s: %w", DefaultClientSecretName, err)
		}
		return s, nil
	}
	s, err := secret(gr.Namespace, name)
	if err != nil {
		return nil, fmt.Errorf("clientSecretName %s: %w", name, err)
	}
	return s, nil
}

// rollup fills the status from the GitRepo's Bundles and BundleDeployments.
func (h *handler) rollup(gr *fleet.GitRepo, status *fleet.GitRepoStatus, now time.Time) {
	bundles, _ := h.Bundles.Cache().GetByIndex(bundlesByRepo, gr.Namespace+"/"+gr.Name)
	sort.Slice(bundles, func(i, j int) bool { return bundles[i].Name < bundles[j].Name })
	bds, _ := h.BundleDeployments.Cache().GetByIndex(index.ByRepo, gr.Namespace+"/"+gr.Name)
	t := h.tally(bundles, bds, now)
	s := t.summary
	status.Summary, status.ResourceCounts = s, t.counts
	status.PerClusterResourceCounts = nil
	if len(t.perClusterCounts) > 0 {
		status.PerClusterResourceCounts = t.perClusterCounts
	}
	status.Resources = summary.Resources(t.perCluster)
	status.DesiredReadyClusters, status.ReadyClusters = len(t.clusters), 0
	for _, ready := range t.clusters {
		if ready {
			status.ReadyClusters++
		}
	}
	status.Display.ReadyBundleDeployments = fmt.Sprintf("%d/%d", s.Ready, s.DesiredReady)
	status.Display.Error, status.Display.Message = false, ""

	ready, msg := readiness(status, bundles, s)
	switch {
	case status.GitJobStatus == JobInProgress:
		status.Display.State = StateGitUpdating
	case ready == corev1.ConditionTrue:
		// Empty when ready, as Fleet writes it: Rancher shows such a GitRepo Active.
		status.Display.State = ""
	default:
		status.Display.State = string(summary.WorstState(s))
		if status.Display.State == "" || status.Display.State == string(fleet.Ready) {
			status.Display.State = "NotReady"
		}
		status.Display.Error, status.Display.Message = ready == corev1.ConditionFalse, msg
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionReady, ready, summary.ReadyReason(ready, status.Display.State), msg, now)
}

// tally is what a GitRepo's Bundles and BundleDeployments add up to.
type tally struct {
	summary          fleet.BundleSummary
	counts           fleet.ResourceCounts
	perCluster       []summary.Deployment
	perClusterCounts map[string]*fleet.ResourceCounts
	// clusters maps each cluster namespace to whether all its deployments are ready.
	clusters map[string]bool
}

func (h *handler) tally(bundles []*fleet.Bundle, bds []*fleet.BundleDeployment, now time.Time) tally {
	t := tally{perClusterCounts: map[string]*fleet.ResourceCounts{}, clusters: map[string]bool{}}
	interval := time.Duration(0)
	if h.CheckinInterval != nil {
		interval = h.CheckinInterval()
	}
	keys := map[string][]fleet.ResourceKey{}
	for _, b := range bundles {
		keys[b.Name] = b.Status.ResourceKey
		// Targets whose BundleDeployment is not made yet are known to their Bundle only.
		t.summary.Pending += b.Status.Summary.Pending
		t.summary.DesiredReady += b.Status.Summary.Pending
	}
	for _, bd := range bds {
		state := summary.State(bd)
		offline := false
		if c := h.cluster(bd); c != nil && interval > 0 && summary.Offline(c, interval, now) {
			state, offline = fleet.BundleState(""), true // unknown: counted in desiredReady only
		}
		cluster := bd.Labels[fleet.ClusterNamespaceLabel] + "/" + bd.Labels[fleet.ClusterLabel]
		t.perCluster = append(t.perCluster, summary.Deployment{BD: bd, Offline: offline, Cluster: cluster, Keys: keys[bd.Labels[fleet.BundleLabel]]})
		if offline || state == fleet.Ready {
			// (An unknown state counts as desired, not as any state.)
			summary.Increment(&t.summary, state)
		} else {
			// Only a non-ready deployment is listed, under a name built for it alone.
			summary.Add(&t.summary, bd.Labels[fleet.BundleLabel]+" on "+cluster, bd)
		}
		if rc := bd.Status.ResourceCounts; rc != nil {
			summary.AddCounts(&t.counts, *rc)
			pc := t.perClusterCounts[cluster]
			if pc == nil {
				pc = &fleet.ResourceCounts{}
				t.perClusterCounts[cluster] = pc
			}
			summary.AddCounts(pc, *rc)
		}
		ready, seen := t.clusters[bd.Namespace]
		t.clusters[bd.Namespace] = (ready || !seen) && state == fleet.Ready
	}
	return t
}

// readiness is the GitRepo's Ready condition: the first of a refused spec, a repository that
// cannot be polled, a failed run, nothing applied yet, a Bundle not ready, deployments not ready.
func readiness(status *fleet.GitRepoStatus, bundles []*fleet.Bundle, s fleet.BundleSummary) (corev1.ConditionStatus, string) {
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionAccepted); c != nil && c.Status == corev1.ConditionFalse {
		return corev1.ConditionFalse, c.Message
	}
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionGitPolling); c != nil && c.Status == corev1.ConditionFalse {
		return corev1.ConditionFalse, c.Message
	}
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionStalled); c != nil && c.Status == corev1.ConditionTrue {
		return corev1.ConditionFalse, c.Message
	}
	if status.Commit == "" {
		// Nothing applied yet: no Bundles is not the same as all Bundles ready.
		return corev1.ConditionUnknown, "no commit applied yet"
	}
	for _, b := range bundles {
		if c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionReady); c != nil && c.Status != corev1.ConditionTrue {
			return c.Status, "Bundle " + b.Name + ": " + c.Message
		}
	}
	if s.Ready < s.DesiredReady {
		return corev1.ConditionFalse, summary.ReadyMessage(s)
	}
	return corev1.ConditionTrue, ""
}

func (h *handler) cluster(bd *fleet.BundleDeployment) *fleet.Cluster {
	ns, name := bd.Labels[fleet.ClusterNamespaceLabel], bd.Labels[fleet.ClusterLabel]
	if ns == "" || name == "" {
		return nil
	}
	c, err := h.Clusters.Cache().Get(ns, name)
	if err != nil {
		return nil
	}
	return c
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
