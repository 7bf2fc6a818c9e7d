package gitrepo

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/ocistorage"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// jobPod runs `fleet gitcloner` (init container) then `fleet apply` with the GitRepo's
// credentials mounted from its Secrets.
func (h *handler) jobPod(gr *fleet.GitRepo, commit string, cm *corev1.ConfigMap) (*corev1.PodSpec, error) {
	b := &podBuilder{h: h, gr: gr, cm: cm, clone: cloneArgs(gr, commit)}
	b.mounts = []corev1.VolumeMount{{Name: "workspace", MountPath: jobWorkspace}, {Name: "config", MountPath: jobConfig}}
	b.volumes = []corev1.Volume{
		{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}},
	}
	// The git credentials are the clone step's alone: the apply step, which runs the
	// repository's charts and kustomizations, never has them.
	b.applyMounts = append([]corev1.VolumeMount{}, b.mounts...)
	if err := b.gitCredentials(); err != nil {
		return nil, err
	}
	o := h.applyOptions(gr, commit)
	b.apply = jobApplyArgs(gr, o, gr.Namespace, commit)
	if err := b.helmCredentials(); err != nil {
		return nil, err
	}
	if err := b.ociStorage(); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
		b.apply = append(b.apply, "--label", k+"="+o.Labels[k])
	}
	b.apply = append(append(b.apply, "--", gr.Name), o.Paths...)
	b.proxy()
	b.env = append(b.env, corev1.EnvVar{Name: "COMMIT", Value: commit},
		// The pod runs as jobUID, not the image's user, whose home it may not read: Helm's
		// cache and client-go's kubeconfig lookup use a home it owns.
		corev1.EnvVar{Name: "HOME", Value: jobTmp})
	return b.spec(), nil
}

// podBuilder gathers a run's pod: the clone step's and the apply step's arguments and mounts,
// and what both share (env, volumes).
type podBuilder struct {
	h                   *handler
	gr                  *fleet.GitRepo
	cm                  *corev1.ConfigMap
	env                 []corev1.EnvVar
	volumes             []corev1.Volume
	mounts, applyMounts []corev1.VolumeMount
	// cloneEnv is the clone step's alone (the git user name).
	cloneEnv     []corev1.EnvVar
	clone, apply []string
}

// gitCredentials mounts the clone's credentials Secret and passes them to the clone step: an
// SSH key (with known hosts), a GitHub App's key, or a username and password.
func (b *podBuilder) gitCredentials() error {
	s, err := clientSecret(b.gr, b.h.secret)
	if err != nil || s == nil {
		return err
	}
	b.volumes = append(b.volumes, secretVolume("git-credentials", s.Name))
	b.mounts = append(b.mounts, corev1.VolumeMount{Name: "git-credentials", MountPath: jobGitSecret, ReadOnly: true})
	if _, ok := s.Data[corev1.SSHAuthPrivateKey]; ok {
		return b.sshCredentials(s)
	}
	app, err := gitsource.GitHubAppOf(s.Data)
	switch {
	case err != nil:
		return fmt.Errorf("secret %s: %w", s.Name, err)
	case app != nil:
		// The clone step trades the App's key for a token itself.
		b.clone = append(b.clone, "--github-app-id", strconv.FormatInt(app.ID, 10), "--github-app-installation-id", strconv.FormatInt(app.InstallationID, 10),
			"--github-app-private-key-file", jobGitSecret+"/"+gitsource.GitHubAppPrivateKeyKey)
		if app.BaseURL != "" {
			b.clone = append(b.clone, "--github-app-base-url", app.BaseURL)
		}
	default:
		b.cloneEnv = append(b.cloneEnv, secretEnv("GIT_USERNAME", s.Name, corev1.BasicAuthUsernameKey))
		b.clone = append(b.clone, "--username", "$(GIT_USERNAME)", "--password-file", jobGitSecret+"/"+corev1.BasicAuthPasswordKey)
	}
	return nil
}

// sshCredentials passes the SSH key and the known hosts: the Secret's own, else the shared ones
// (which go with the run's ConfigMap).
func (b *podBuilder) sshCredentials(s *corev1.Secret) error {
	b.clone = append(b.clone, "--ssh-private-key-file", jobGitSecret+"/"+corev1.SSHAuthPrivateKey)
	shared := gitsource.Auth{SSHPrivateKey: s.Data[corev1.SSHAuthPrivateKey], KnownHosts: s.Data["known_hosts"]}
	if err := b.h.KnownHosts.fill(b.h.context(), &shared); err != nil {
		return fmt.Errorf("known hosts: %w", err)
	}
	switch {
	case len(s.Data["known_hosts"]) > 0:
		b.clone = append(b.clone, "--known-hosts-file", jobGitSecret+"/known_hosts")
	case len(shared.KnownHosts) > 0:
		b.cm.Data[knownHostsKey] = string(shared.KnownHosts)
		b.clone = append(b.clone, "--known-hosts-file", jobConfig+"/"+knownHostsKey)
	}
	if shared.InsecureIgnoreHostKey {
		b.clone = append(b.clone, "--insecure-skip-host-key-checks")
	}
	return nil
}

// helmCredentials mounts helmSecretName and helmSecretNameForPaths for the apply step, by name:
// the same rule as for those read in-process.
func (b *podBuilder) helmCredentials() error {
	if sec := b.gr.Spec.HelmSecretName; sec != "" {
		s, err := b.h.secret(b.gr.Namespace, sec)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("helmSecretName %s: %w", sec, err)
		}
		b.volumes = append(b.volumes, secretVolume("helm-credentials", sec))
		b.applyMounts = append(b.applyMounts, corev1.VolumeMount{Name: "helm-credentials", MountPath: jobHelmSecret, ReadOnly: true})
		// As in-process: a Secret may hold a password only, or CAs only (cacerts).
		user := secretEnv("HELM_USERNAME", sec, "username")
		user.ValueFrom.SecretKeyRef.Optional = boolPtr(true)
		b.env = append(b.env, user)
		b.apply = append(b.apply, "--username", "$(HELM_USERNAME)")
		if s == nil || len(s.Data["password"]) > 0 {
			b.apply = append(b.apply, "--password-file", jobHelmSecret+"/password")
		}
		if s != nil && len(s.Data["cacerts"]) > 0 {
			b.apply = append(b.apply, "--cacerts-file", jobHelmSecret+"/cacerts")
		}
	}
	if sec := b.gr.Spec.HelmSecretNameForPaths; sec != "" {
		if _, err := b.h.secret(b.gr.Namespace, sec); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("helmSecretNameForPaths %s: %w", sec, err)
		}
		b.volumes = append(b.volumes, secretVolume("helm-paths", sec))
		b.applyMounts = append(b.applyMounts, corev1.VolumeMount{Name: "helm-paths", MountPath: jobHelmPaths, ReadOnly: true})
		b.apply = append(b.apply, "--helm-credentials-by-path-file", jobHelmPaths+"/"+bundlereader.PathCredentialsKey)
	}
	return nil
}

// ociStorage passes the OCI registry the Bundles' contents go to: its password mounted, the rest
// as arguments.
func (b *podBuilder) ociStorage() error {
	st, ociSecret, err := b.h.ociStorageSecret(b.gr)
	if err != nil || st == nil {
		return err
	}
	b.volumes = append(b.volumes, secretVolume("oci-storage", ociSecret))
	b.applyMounts = append(b.applyMounts, corev1.VolumeMount{Name: "oci-storage", MountPath: jobOCISecret, ReadOnly: true})
	b.apply = append(b.apply, "--oci-reference", st.Reference)
	if st.Username != "" {
		b.apply = append(b.apply, "--ociusername", st.Username)
	}
	if st.Password != "" {
		b.apply = append(b.apply, "--oci-password-file", jobOCISecret+"/"+ocistorage.KeyPassword)
	}
	if st.BasicHTTP {
		b.apply = append(b.apply, "--oci-basic-http")
	}
	if st.Insecure {
		b.apply = append(b.apply, "--oci-insecure")
	}
	return nil
}

// proxy hands the manager's proxy settings (the fleet chart's proxy and noProxy) and the proxy's
// CA to both steps, as they reach in-process runs. Settings with credentials come from the
// run's proxy Secret (jobProxySecret), not as values of the pod's environment.
func (b *podBuilder) proxy() {
	env, _ := config.ProxyEnvVars(config.ProxyEnv(), jobProxySecretName(b.cm.Name))
	b.env = append(b.env, env...)
	ca := b.h.JobRunner.ProxyCA
	if len(ca) == 0 {
		return
	}
	// As the manager trusts it: besides the image's CA bundle.
	b.cm.Data[proxyCAKey] = string(ca)
	b.volumes = append(b.volumes, corev1.Volume{Name: "proxy-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: b.cm.Name}, Items: []corev1.KeyToPath{{Key: proxyCAKey, Path: proxyCAKey}}}}})
	m := corev1.VolumeMount{Name: "proxy-ca", MountPath: jobProxyCA, ReadOnly: true}
	b.mounts, b.applyMounts = append(b.mounts, m), append(b.applyMounts, m)
	b.env = append(b.env, corev1.EnvVar{Name: "SSL_CERT_DIR", Value: jobProxyCA})
}

// jobProxySecretName is the name of the proxy Secret of the run whose ConfigMap is runConfig.
func jobProxySecretName(runConfig string) string { return names.SafeConcatName(runConfig, "proxy") }

// jobProxySecret is the Secret the pod of the run whose ConfigMap is runConfig takes the manager's
// proxy settings from when they carry credentials (nil when they do not).
func jobProxySecret(runConfig, namespace string, labels map[string]string) *corev1.Secret {
	name := jobProxySecretName(runConfig)
	_, data := config.ProxyEnvVars(config.ProxyEnv(), name)
	if data == nil {
		return nil
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}, Data: data}
}

// spec is the pod: Pod Security "restricted", a read-only root with /tmp the one place to write
// besides the workspace, and the ServiceAccount's (short-lived) token for the apply step only,
// which writes the Bundles; the clone step, which runs git against a server the tenant chose,
// gets none.
func (b *podBuilder) spec() *corev1.PodSpec {
	volumes := append(b.volumes, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		tokenVolume())
	mounts := append(b.mounts, corev1.VolumeMount{Name: "tmp", MountPath: jobTmp})
	applyMounts := append(b.applyMounts, corev1.VolumeMount{Name: "tmp", MountPath: jobTmp},
		corev1.VolumeMount{Name: "token", MountPath: jobTokenDir, ReadOnly: true})
	uid := int64(1000)
	requests := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(jobCPURequest), corev1.ResourceMemory: resource.MustParse(jobMemRequest)}}
	return &corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Volumes: volumes, NodeSelector: maps.Clone(b.h.JobRunner.NodeSelector),
		AutomountServiceAccountToken: boolPtr(false),
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: boolPtr(true), FSGroup: &uid,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		InitContainers: []corev1.Container{{Name: "gitcloner", Image: b.h.JobRunner.Image, Command: []string{"fleet"}, Args: b.clone,
			Env: append(slices.Clone(b.env), b.cloneEnv...), VolumeMounts: mounts, Resources: requests, TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext: restrictedContainer()}},
		Containers: []corev1.Container{{Name: "fleet", Image: b.h.JobRunner.Image, Command: []string{"fleet"}, Args: b.apply,
			Env: b.env, VolumeMounts: applyMounts, Resources: requests, TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			SecurityContext: restrictedContainer()}},
	}
}
