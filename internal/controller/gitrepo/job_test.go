package gitrepo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/ocistorage"
	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A GitRepo's helmRepoURLRegex, forceSyncGeneration and correctDrift reach the Job's fleet apply
// under Fleet's flag names.
func TestJobApplyArgsCarryGitRepoOptions(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace = "repo", "fleet-default"
	gr.Spec.HelmRepoURLRegex = "^https://charts\\.example\\.com/"
	gr.Spec.ForceSyncGeneration = 4
	gr.Spec.CorrectDrift = &fleet.CorrectDrift{Enabled: true, Force: true, KeepFailHistory: true}
	h := &handler{}
	args := jobApplyArgs(gr, h.applyOptions(gr, "c1"), gr.Namespace, "c1")
	joined := strings.Join(args, " ")
	for _, want := range []string{"--helm-repo-url-regex ^https://charts\\.example\\.com/", "--sync-generation 4",
		"--correct-drift", "--correct-drift-force", "--correct-drift-keep-fail-history"} {
		if !strings.Contains(joined, want) {
			t.Errorf("args %q lack %q", joined, want)
		}
	}
	if slices.Contains(args, "--correct-drift-keep-failed-history") {
		t.Errorf("old flag name used: %q", joined)
	}
	if strings.Contains(joined, "--git-cacerts-file") {
		t.Errorf("no caBundle, yet %q", joined)
	}
	// The repository's CAs hold for its charts in git too.
	gr.Spec.CABundle = []byte("PEM")
	joined = strings.Join(jobApplyArgs(gr, h.applyOptions(gr, "c1"), gr.Namespace, "c1"), " ")
	if want := "--git-cacerts-file " + jobConfig + "/" + caFileKey; !strings.Contains(joined, want) {
		t.Errorf("args %q lack %q", joined, want)
	}
}

// A shard's GitRepo Jobs run on its nodes (--shard-node-selector); without one, anywhere.
func TestJobPodNodeSelector(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace, gr.Spec.Repo = "repo", "fleet-default", "https://git.example/repo"
	cm, err := jobConfigMap(gr, "repo-abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sel := range []map[string]string{{"zone": "east"}, nil} {
		h := &handler{Deps: Deps{Kube: fake.NewSimpleClientset(), JobRunner: &JobRunner{Image: "fleet:dev", NodeSelector: sel}}}
		p, err := h.jobPod(gr, "c1", cm)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.NodeSelector) != len(sel) || p.NodeSelector["zone"] != sel["zone"] {
			t.Errorf("nodeSelector %v, want %v", p.NodeSelector, sel)
		}
	}
}

// spec.bundles reaches the Job's fleet apply as a driven scan of exactly the listed folders.
func TestJobApplyArgsListedBundles(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace = "repo", "fleet-default"
	gr.Spec.Bundles = []fleet.BundlePath{{Base: "a"}, {Base: "b", Options: "prod.yaml"}}
	h := &handler{}
	o := h.applyOptions(gr, "c1")
	args := jobApplyArgs(gr, o, gr.Namespace, "c1")
	if !slices.Contains(args, "--driven-scan") || !slices.Equal(o.Paths, []string{"a", "b:prod.yaml"}) {
		t.Errorf("args %q, paths %q", strings.Join(args, " "), o.Paths)
	}
}

// In a Job, as in-process, a Helm Secret may lack a username (the pod still starts) and its
// cacerts are trusted.
func TestJobPodHelmSecretForms(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace, gr.Spec.Repo, gr.Spec.HelmSecretName = "repo", "fleet-default", "https://git.example/repo", "charts"
	cm, err := jobConfigMap(gr, "repo-abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "charts"},
		Data: map[string][]byte{"password": []byte("p"), "cacerts": []byte("-----BEGIN CERTIFICATE-----")}}
	h := &handler{Deps: Deps{Kube: fake.NewSimpleClientset(secret), JobRunner: &JobRunner{Image: "fleet:dev"}}}
	p, err := h.jobPod(gr, "c1", cm)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Containers[0]
	args := strings.Join(c.Args, " ")
	if !strings.Contains(args, "--cacerts-file /run/secrets/helm/cacerts") || !strings.Contains(args, "--password-file /run/secrets/helm/password") {
		t.Errorf("args %s", args)
	}
	for _, e := range c.Env {
		if e.Name == "HELM_USERNAME" && (e.ValueFrom.SecretKeyRef.Optional == nil || !*e.ValueFrom.SecretKeyRef.Optional) {
			t.Error("a Secret without username stops the pod")
		}
	}
}

// The manager's proxy settings reach the Job's containers.
func TestJobPodProxy(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://proxy.example:3128")
	t.Setenv("NO_PROXY", ".svc,10.0.0.0/8")
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace, gr.Spec.Repo = "repo", "fleet-default", "https://git.example/repo"
	cm, err := jobConfigMap(gr, "repo-abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &handler{Deps: Deps{Kube: fake.NewSimpleClientset(), JobRunner: &JobRunner{Image: "fleet:dev"}}}
	p, err := h.jobPod(gr, "c1", cm)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(p.InitContainers, p.Containers...) {
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if env["HTTPS_PROXY"] != "http://proxy.example:3128" || env["NO_PROXY"] != ".svc,10.0.0.0/8" {
			t.Errorf("%s: env %v", c.Name, env)
		}
		if _, ok := env["SSL_CERT_DIR"]; ok {
			t.Errorf("%s: no proxy CA, yet SSL_CERT_DIR", c.Name)
		}
	}

	// The proxy's CA (the fleet chart's proxyCACert, which the controller trusts) goes with the
	// run's ConfigMap and is trusted by both steps besides the image's bundle.
	t.Setenv(config.ProxyCAFileEnv, filepath.Join(t.TempDir(), "proxy-ca.crt"))
	if err := os.WriteFile(os.Getenv(config.ProxyCAFileEnv), []byte("PROXY-CA-PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.JobRunner.ProxyCA = config.ProxyCAFromEnv()
	if p, err = h.jobPod(gr, "c1", cm); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data[proxyCAKey], "PROXY-CA-PEM") {
		t.Errorf("config %v", cm.Data)
	}
	for _, c := range append(p.InitContainers, p.Containers...) {
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || m.Name == "proxy-ca" && m.MountPath == env["SSL_CERT_DIR"]
		}
		if env["SSL_CERT_DIR"] != jobProxyCA || !mounted {
			t.Errorf("%s: env %v, mounts %v", c.Name, env, c.VolumeMounts)
		}
	}
}

// A proxy with credentials reaches the Job's containers from the run's proxy Secret: no
// container's environment holds the password, and a proxy without credentials makes no Secret.
func TestJobPodProxyCredentialsComeFromASecret(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace, gr.Spec.Repo = "repo", "fleet-default", "https://git.example/repo"
	cm, err := jobConfigMap(gr, "repo-abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HTTPS_PROXY", "http://proxy.example:3128")
	if s := jobProxySecret(cm.Name, "fleet-default", nil); s != nil {
		t.Fatalf("a proxy without credentials: %v", s.Name)
	}
	t.Setenv("HTTPS_PROXY", "http://fleet:hunter2@proxy.example:3128")
	t.Setenv("NO_PROXY", ".svc")
	h := &handler{Deps: Deps{Kube: fake.NewSimpleClientset(), JobRunner: &JobRunner{Image: "fleet:dev"}}}
	p, err := h.jobPod(gr, "c1", cm)
	if err != nil {
		t.Fatal(err)
	}
	s := jobProxySecret(cm.Name, "fleet-default", nil)
	if s == nil || string(s.Data["HTTPS_PROXY"]) != "http://fleet:hunter2@proxy.example:3128" || string(s.Data["NO_PROXY"]) != ".svc" {
		t.Fatalf("proxy Secret %+v", s)
	}
	for _, c := range append(p.InitContainers, p.Containers...) {
		from := map[string]string{}
		for _, e := range c.Env {
			if strings.Contains(e.Value, "hunter2") {
				t.Errorf("%s: %s holds the proxy password", c.Name, e.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				from[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
		}
		if from["HTTPS_PROXY"] != s.Name+"/HTTPS_PROXY" || from["NO_PROXY"] != s.Name+"/NO_PROXY" {
			t.Errorf("%s: proxy settings from %v", c.Name, from)
		}
	}
}

// In a Job, as in-process, an SSH secret without known_hosts gets the shared known hosts (they
// go with the run's ConfigMap), and insecureSkipHostKeyChecks reaches the clone step.
func TestJobPodSharedKnownHosts(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace, gr.Spec.Repo, gr.Spec.ClientSecretName = "repo", "fleet-default", "ssh://git@git.example/repo", "ssh"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "ssh"},
		Data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("KEY")}}
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-fleet-system", Name: KnownHostsConfigMap},
		Data: map[string]string{"known_hosts": "git.example ssh-ed25519 AAAA\n"}}
	for _, insecure := range []bool{false, true} {
		kube := fake.NewSimpleClientset(secret, shared)
		h := &handler{Deps: Deps{Kube: kube, JobRunner: &JobRunner{Image: "fleet:dev"},
			KnownHosts: &KnownHosts{Kube: kube, Namespace: "cattle-fleet-system", Insecure: insecure}}}
		p, cm := podOf(t, h, gr)
		args := strings.Join(p.InitContainers[0].Args, " ")
		if !strings.Contains(args, "--known-hosts-file "+jobConfig+"/"+knownHostsKey) || cm.Data[knownHostsKey] != shared.Data["known_hosts"] {
			t.Errorf("args %s, config %v", args, cm.Data)
		}
		if strings.Contains(args, "--insecure-skip-host-key-checks") != insecure {
			t.Errorf("insecure %v: args %s", insecure, args)
		}
	}
}

// A GitRepo naming no clientSecretName clones with the namespace's Secret gitcredential when
// there is one, as on Fleet; without one, with no credentials.
func TestDefaultClientSecret(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace, gr.Spec.Repo = "repo", "fleet-default", "https://git.example/repo"
	h := &handler{Deps: Deps{Kube: fake.NewSimpleClientset()}}
	src, err := h.source(gr)
	if err != nil || src.Auth.Username != "" {
		t.Fatalf("no default secret: auth %+v, %v", src.Auth, err)
	}
	def := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: DefaultClientSecretName,
		Annotations: map[string]string{secretuse.GitHostsAnnotation: "git.example"}}, Type: corev1.SecretTypeBasicAuth,
		Data: map[string][]byte{corev1.BasicAuthUsernameKey: []byte("bot"), corev1.BasicAuthPasswordKey: []byte("pw")}}
	h = &handler{Deps: Deps{Kube: fake.NewSimpleClientset(def), JobRunner: &JobRunner{Image: "fleet:dev"}}}
	if src, err = h.source(gr); err != nil || src.Auth.Username != "bot" || src.Auth.Password != "pw" {
		t.Fatalf("default secret: auth %+v, %v", src.Auth, err)
	}
	p, _ := podOf(t, h, gr)
	var mounted string
	for _, v := range p.Volumes {
		if v.Name == "git-credentials" {
			mounted = v.Secret.SecretName
		}
	}
	if mounted != DefaultClientSecretName {
		t.Errorf("the Job mounts %q", mounted)
	}
	// The git credentials are the clone step's alone: the apply step runs the repository's
	// charts and kustomizations, and never has them.
	has := func(c corev1.Container) (mount, env bool) {
		for _, m := range c.VolumeMounts {
			mount = mount || m.Name == "git-credentials"
		}
		for _, e := range c.Env {
			env = env || e.Name == "GIT_USERNAME"
		}
		return mount, env
	}
	if mount, env := has(p.InitContainers[0]); !mount || !env {
		t.Errorf("the clone step lacks the credentials: mount %v, env %v", mount, env)
	}
	if mount, env := has(p.Containers[0]); mount || env {
		t.Errorf("the apply step has the git credentials: mount %v, env %v", mount, env)
	}
}

// In a Job, as in-process, the namespace's OCI storage Secret makes fleet apply push the
// contents: its password mounted, the rest as arguments.
func TestJobPodOCIStorage(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace, gr.Spec.Repo = "repo", "fleet-default", "https://git.example/repo"
	storage := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: ocistorage.DefaultSecretName}, Type: ocistorage.SecretType,
		Data: map[string][]byte{ocistorage.KeyReference: []byte("registry.example:5000/fleet"), ocistorage.KeyUsername: []byte("pusher"),
			ocistorage.KeyPassword: []byte("pw"), ocistorage.KeyInsecure: []byte("true")}}
	h := &handler{Deps: Deps{Kube: fake.NewSimpleClientset(storage), JobRunner: &JobRunner{Image: "fleet:dev"}}}
	p, _ := podOf(t, h, gr)
	args := strings.Join(p.Containers[0].Args, " ")
	for _, want := range []string{"--oci-reference registry.example:5000/fleet", "--ociusername pusher",
		"--oci-password-file " + jobOCISecret + "/password", "--oci-insecure"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %s lack %q", args, want)
		}
	}
	if strings.Contains(args, "--oci-basic-http") || strings.Contains(args, "pw") {
		t.Errorf("args %s", args)
	}
}

// podOf is the Job pod h makes for gr's commit c1, and the run's ConfigMap.
func podOf(t *testing.T, h *handler, gr *fleet.GitRepo) (*corev1.PodSpec, *corev1.ConfigMap) {
	t.Helper()
	cm, err := jobConfigMap(gr, "repo-abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.jobPod(gr, "c1", cm)
	if err != nil {
		t.Fatal(err)
	}
	return p, cm
}

// Git credentials go only to the hosts their Secret lists (annotation fleet.cattle.io/git-hosts):
// whoever may write a GitRepo picks spec.repo, so the namespace's default credentials, which a
// GitRepo uses without naming them, go to no host unless listed; a named Secret that lists hosts
// goes to no other.
func TestGitCredentialsGoOnlyToTheirHosts(t *testing.T) {
	secret := func(name, hosts string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{corev1.BasicAuthUsernameKey: []byte("bot"), corev1.BasicAuthPasswordKey: []byte("pw")}}
		if hosts != "" {
			s.Annotations = map[string]string{secretuse.GitHostsAnnotation: hosts}
		}
		return s
	}
	for _, c := range []struct {
		name, secretName, hosts, repo string
		sent                          bool
		fails                         string
	}{
		{"the default lists no hosts", "", "", "https://git.example/repo", false, "lists no hosts"},
		{"the default lists the host", "", "git.example, other.example", "https://git.example/repo", true, ""},
		{"the default for another host", "", "git.example", "https://evil.example/repo", false, ""},
		{"the default for another port", "", "git.example:8443", "https://git.example/repo", false, ""},
		{"the default for the port", "", "git.example:8443", "https://git.example:8443/repo", true, ""},
		{"the default for the protocol's own port", "", "git.example:443", "https://git.example/repo", true, ""},
		{"the default over ssh", "", "GIT.example", "git@git.example:org/repo.git", true, ""},
		{"a named Secret listing no hosts", "creds", "", "https://evil.example/repo", true, ""},
		{"a named Secret for another host", "creds", "git.example", "https://evil.example/repo", false, "not for spec.repo https://evil.example/repo"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := c.secretName
			if name == "" {
				name = DefaultClientSecretName
			}
			gr := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: "team"},
				Spec: fleet.GitRepoSpec{Repo: c.repo, ClientSecretName: c.secretName}}
			h := &handler{Deps: Deps{Kube: fake.NewSimpleClientset(secret(name, c.hosts))}}
			src, err := h.source(gr)
			if c.fails != "" {
				if err == nil || !strings.Contains(err.Error(), c.fails) || !strings.Contains(err.Error(), secretuse.GitHostsAnnotation) {
					t.Fatalf("want an error naming %q and the annotation, got %v", c.fails, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sent := src.Auth.Password == "pw"; sent != c.sent {
				t.Errorf("credentials sent: %v, want %v", sent, c.sent)
			}
		})
	}
}
