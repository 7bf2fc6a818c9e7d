package gitrepo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	wapply "github.com/rancher/wrangler/v3/pkg/apply"
	batchcontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/batch/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/bundlebuild"
	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/metrics"
	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Paths inside a GitRepo Job's pod.
const (
	jobWorkspace  = "/workspace"
	jobCheckout   = jobWorkspace + "/repo"
	jobConfig     = "/run/config"
	jobGitSecret  = "/run/secrets/git"
	jobHelmSecret = "/run/secrets/helm"
	jobHelmPaths  = "/run/secrets/helm-paths"
	jobOCISecret  = "/run/secrets/oci"
	// jobTokenDir is where client-go looks for the pod's ServiceAccount token.
	jobTokenDir    = "/var/run/secrets/kubernetes.io/serviceaccount"
	jobTmp         = "/tmp"
	targetsFileKey = "targets.yaml"
	caFileKey      = "ca.pem"
	knownHostsKey  = "known_hosts"
	proxyCAKey     = "proxy-ca.crt"
	jobProxyCA     = "/etc/fleet/proxy-ca"
)

// JobRunner runs clone-and-apply as a Job per commit: a pod whose init container runs
// `fleet gitcloner` and whose container runs `fleet apply`, as the GitRepo's own
// ServiceAccount, which may only touch the GitRepo's namespace's Bundles.
type JobRunner struct {
	Jobs batchcontrollers.JobController
	// Image holds the fleet binary (the controller's own image).
	Image string
	// Apply writes a GitRepo's Job set; it must cache Jobs, ServiceAccounts, Roles and
	// RoleBindings.
	Apply wapply.Apply
	// NodeSelector, when set, is the Jobs' pods' nodeSelector (a shard's, so its GitRepos are
	// cloned on its nodes).
	NodeSelector map[string]string
	// ProxyCA (PEM) is trusted by the Jobs besides their image's CA bundle: the CAs the manager
	// trusts the same way (the fleet chart's proxyCACert, config.ProxyCAFromEnv).
	ProxyCA []byte
}

// Limits of a GitRepo Job: the kubelet ends one running longer than jobDeadline (a stalled git
// or chart server), and its containers request what a clone and an apply typically use.
const (
	jobDeadline   = 30 * time.Minute
	jobCPURequest = "50m"
	jobMemRequest = "64Mi"
	// jobTokenLifetime is how long the token mounted into the apply step lives; the kubelet
	// renews it before it expires, and client-go reads the renewed one.
	jobTokenLifetime = 10 * time.Minute
)

// JobRules are all the ServiceAccount of GitRepo repo's Job may do: `fleet apply` writes the
// Bundles (and the ImageScans fleet.yaml declares) of the GitRepo's namespace and deletes those
// the commit no longer has. They claim that GitRepo, which admission (policy
// fleet-owner-references) lets only its owner or a holder of "publish" on it do: the Job may
// publish for its own GitRepo alone. Credentials reach the pod as mounted Secrets (the kubelet
// reads them), so the Role grants no Secret, event or other right.
func JobRules(repo string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{fleet.SchemeGroupVersion.Group}, Resources: []string{"bundles", "imagescans"},
			Verbs: []string{"get", "list", "create", "update", "delete"}},
		{APIGroups: []string{fleet.SchemeGroupVersion.Group}, Resources: []string{"gitrepos"}, ResourceNames: []string{repo},
			Verbs: []string{PublishVerb}},
		// The Bundles' values Secrets (package bundlevalues), written blind: no get or list. The
		// admission policy fleet-bundle-values limits a holder of ValuesVerb who may not get
		// Secrets to values Secrets of GitRepos it publishes for.
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "update", "delete", ValuesVerb}},
	}
}

// ValuesVerb is the verb on Secrets that marks its holder as a writer of Bundles' values
// Secrets and nothing else, when it may not get Secrets (a GitRepo's Job).
const ValuesVerb = "write-bundle-values"

// PublishVerb is the verb on a GitRepo that lets its holder write Bundles and ImageScans
// claiming that GitRepo.
const PublishVerb = "publish"

// JobName is the Job of a GitRepo's commit and spec generation.
func JobName(gr *fleet.GitRepo, commit string) string {
	sum := sha256.Sum256([]byte(gr.Name + "/" + commit + "/" + strconv.FormatInt(gr.Generation, 10)))
	return names.SafeConcatName(gr.Name, hex.EncodeToString(sum[:])[:5])
}

// runJob starts (or follows) the Job of commit and records its outcome in status.
func (h *handler) runJob(gr *fleet.GitRepo, commit string, status *fleet.GitRepoStatus) error {
	name := JobName(gr, commit)
	job, err := h.JobRunner.Jobs.Cache().Get(gr.Namespace, name)
	if apierrors.IsNotFound(err) {
		if status.Commit == commit && status.ObservedGeneration == gr.Generation {
			return nil // applied before (its Job since deleted)
		}
		err := h.createJob(gr, commit, name)
		metrics.GitJobStarted(gr.Namespace, gr.Name, err)
		if err != nil {
			return err
		}
		status.GitJobStatus = JobInProgress
		fleet.SetCondition(&status.Conditions, fleet.ConditionReconciling, corev1.ConditionTrue, "", "job "+name+" applies commit "+commit, h.now())
		return nil
	}
	if err != nil {
		return err
	}
	now := h.now()
	switch {
	case job.Status.Succeeded > 0:
		if (status.Commit != commit || status.ObservedGeneration != gr.Generation) && job.Status.StartTime != nil && job.Status.CompletionTime != nil {
			// (once per Job: the status then says the commit is applied)
			metrics.GitJobSucceeded(gr.Namespace, gr.Name, job.Status.CompletionTime.Sub(job.Status.StartTime.Time))
		}
		status.Commit, status.ObservedGeneration, status.GitJobStatus = commit, gr.Generation, JobCurrent
		status.UpdateGeneration = gr.Spec.ForceSyncGeneration
		fleet.SetCondition(&status.Conditions, fleet.ConditionReconciling, corev1.ConditionFalse, "", "", now)
		fleet.SetCondition(&status.Conditions, fleet.ConditionStalled, corev1.ConditionFalse, "", "", now)
	case job.Status.Failed > 0 || jobFailed(job):
		status.GitJobStatus = JobFailed
		fleet.SetCondition(&status.Conditions, fleet.ConditionReconciling, corev1.ConditionFalse, "", "", now)
		fleet.SetCondition(&status.Conditions, fleet.ConditionStalled, corev1.ConditionTrue, "Error", h.jobMessage(job), now)
	default:
		status.GitJobStatus = JobInProgress
		fleet.SetCondition(&status.Conditions, fleet.ConditionReconciling, corev1.ConditionTrue, "", "job "+name+" applies commit "+commit, now)
	}
	return nil
}

func jobFailed(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobMessage is the termination message of the Job's failed container (what fleet gitcloner or
// fleet apply said), else the Job's own reason.
func (h *handler) jobMessage(job *batchv1.Job) string {
	pods, err := h.Kube.CoreV1().Pods(job.Namespace).List(h.context(), metav1.ListOptions{
		LabelSelector: labels.Set{"job-name": job.Name}.String()})
	if err == nil {
		for _, p := range pods.Items {
			for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
					msg := strings.TrimSpace(t.Message)
					if msg == "" {
						msg = t.Reason
					}
					return fmt.Sprintf("job %s, container %s: %s", job.Name, cs.Name, msg)
				}
			}
		}
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed {
			return fmt.Sprintf("job %s failed: %s %s", job.Name, c.Reason, c.Message)
		}
	}
	return "job " + job.Name + " failed"
}

// jobSet is the apply set of a GitRepo's Job and what it runs with: a newer commit's set
// replaces the Job and ConfigMap of the older one.
const jobSet = "fleet-gitrepo-job"

// createJob applies the GitRepo's ServiceAccount, Role and RoleBinding, the run's ConfigMap (and
// proxy Secret, for a proxy with credentials) and the Job, as one set owned by the GitRepo.
func (h *handler) createJob(gr *fleet.GitRepo, commit, name string) error {
	lbl := map[string]string{fleet.RepoLabel: gr.Name}
	objs := jobIdentity(gr, lbl)
	cm, err := jobConfigMap(gr, name, lbl)
	if err != nil {
		return err
	}
	p, err := h.jobPod(gr, commit, cm)
	if err != nil {
		return err
	}
	p.ServiceAccountName = objs[0].(*corev1.ServiceAccount).Name
	if s := jobProxySecret(cm.Name, gr.Namespace, lbl); s != nil {
		objs = append(objs, s)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gr.Namespace, Labels: lbl,
			Annotations: map[string]string{fleet.CommitAnnotation: commit}},
		Spec: batchv1.JobSpec{BackoffLimit: ptr(int32(0)), ActiveDeadlineSeconds: ptr(int64(jobDeadline / time.Second)),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: *p}}}
	if err := h.JobRunner.Apply.WithSetID(jobSet).WithOwner(gr).ApplyObjects(append(objs, cm, job)...); err != nil {
		return fmt.Errorf("creating job %s/%s: %w", gr.Namespace, name, err)
	}
	return nil
}

// jobIdentity is the GitRepo's ServiceAccount git-<name>, which may write its Bundles: the
// ServiceAccount (first), its Role and RoleBinding.
func jobIdentity(gr *fleet.GitRepo, lbl map[string]string) []runtime.Object {
	ns, sa := gr.Namespace, names.SafeConcatName("git", gr.Name)
	meta := metav1.ObjectMeta{Name: sa, Namespace: ns, Labels: lbl}
	return []runtime.Object{
		&corev1.ServiceAccount{ObjectMeta: meta},
		&rbacv1.Role{ObjectMeta: meta, Rules: JobRules(gr.Name)},
		&rbacv1.RoleBinding{ObjectMeta: meta,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}},
	}
}

// jobConfigMap holds the targets file and the CA bundle of the Job's run.
func jobConfigMap(gr *fleet.GitRepo, name string, lbl map[string]string) (*corev1.ConfigMap, error) {
	ts, rs := bundlereader.FromGitTargets(targetsOf(gr))
	targets, err := yaml.Marshal(bundlebuild.TargetsFile{Targets: ts, TargetRestrictions: rs})
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-config", Namespace: gr.Namespace, Labels: lbl},
		Data: map[string]string{targetsFileKey: string(targets)}}
	if len(gr.Spec.CABundle) > 0 {
		cm.Data[caFileKey] = string(gr.Spec.CABundle)
	}
	return cm, nil
}

// restrictedContainer is a container's part of Pod Security "restricted", with a read-only root.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{AllowPrivilegeEscalation: boolPtr(false), ReadOnlyRootFilesystem: boolPtr(true),
		RunAsNonRoot: boolPtr(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

// tokenVolume is what the kubelet mounts by default for a pod's ServiceAccount, with a short
// lifetime: the token, the cluster's CA and the namespace.
func tokenVolume() corev1.Volume {
	secs := int64(jobTokenLifetime / time.Second)
	return corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &secs}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
			Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
	}}}}
}

// cloneArgs are `fleet gitcloner`'s arguments for commit of the GitRepo (credentials apart).
func cloneArgs(gr *fleet.GitRepo, commit string) []string {
	clone := []string{"gitcloner", gr.Spec.Repo, jobCheckout, "--commit", commit}
	if gr.Spec.Revision != "" {
		clone = append(clone, "--revision", gr.Spec.Revision)
	} else if gr.Spec.Branch != "" {
		clone = append(clone, "--branch", gr.Spec.Branch)
	}
	if gr.Spec.InsecureSkipTLSVerify {
		clone = append(clone, "--insecure-skip-tls")
	}
	if len(gr.Spec.CABundle) > 0 {
		clone = append(clone, "--ca-bundle-file", jobConfig+"/"+caFileKey)
	}
	return clone
}

func secretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
}

func ptr[T any](v T) *T { return &v }

func jobApplyArgs(gr *fleet.GitRepo, o bundlebuild.Options, ns, commit string) []string {
	applyArgs := []string{"apply", "--root", jobCheckout, "--targets-file", jobConfig + "/" + targetsFileKey, "--commit", commit, "-n", ns}
	if o.ServiceAccount != "" {
		applyArgs = append(applyArgs, "--service-account", o.ServiceAccount)
	}
	if o.TargetNamespace != "" {
		applyArgs = append(applyArgs, "--target-namespace", o.TargetNamespace)
	}
	if sel := o.AllowedTargetNamespaceSelector; sel != nil {
		applyArgs = append(applyArgs, "--allowed-target-namespace-selector", metav1.FormatLabelSelector(sel))
	}
	for flag, on := range map[string]bool{"--paused": o.Paused, "--keep-resources": o.KeepResources, "--delete-namespace": o.DeleteNamespace,
		"--insecure-skip-tls-verify": gr.Spec.InsecureSkipTLSVerify} {
		if on {
			applyArgs = append(applyArgs, flag)
		}
	}
	if len(gr.Spec.CABundle) > 0 {
		// The repository's CAs hold for its charts in git (git::) too.
		applyArgs = append(applyArgs, "--git-cacerts-file", jobConfig+"/"+caFileKey)
	}
	if cd := o.CorrectDrift; cd != nil && cd.Enabled {
		applyArgs = append(applyArgs, "--correct-drift")
		if cd.Force {
			applyArgs = append(applyArgs, "--correct-drift-force")
		}
		if cd.KeepFailHistory {
			applyArgs = append(applyArgs, "--correct-drift-keep-fail-history")
		}
	}
	if o.HelmRepoURLRegex != "" {
		applyArgs = append(applyArgs, "--helm-repo-url-regex", o.HelmRepoURLRegex)
	}
	if o.Scan.Driven {
		applyArgs = append(applyArgs, "--driven-scan")
	}
	if o.ImageScanInterval > 0 {
		applyArgs = append(applyArgs, "--image-scan-interval", o.ImageScanInterval.String())
	}
	if o.SyncGeneration != 0 {
		applyArgs = append(applyArgs, "--sync-generation", strconv.FormatInt(o.SyncGeneration, 10))
	}
	return applyArgs
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}

func boolPtr(b bool) *bool { return &b }
