package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/bundlebuild"
	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/metrics"
	"github.com/fleetgo/fleet/internal/ocistorage"
	"github.com/fleetgo/fleet/internal/restriction"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

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
func targetsOf(gr *fleet.GitRepo) []fleet.GitTarget { return bundlebuild.GitRepoTargets(gr) }

// applyOptions are how a run reads the GitRepo's checkout (bundlebuild.FromGitRepo), limited by
// the namespace's GitRepoRestrictions.
func (h *handler) applyOptions(gr *fleet.GitRepo, commit string) bundlebuild.Options {
	o := bundlebuild.FromGitRepo(gr, commit)
	if h.Restrictions != nil {
		if rs, err := h.Restrictions.Cache().List(gr.Namespace, labels.Everything()); err == nil {
			o.AllowedTargetNamespaceSelector = restriction.Combine(rs).Selector
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
	if h.Kube != nil {
		o.Secrets = h.Kube.CoreV1()
	}
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
