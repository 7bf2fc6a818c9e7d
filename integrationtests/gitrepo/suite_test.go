// Package gitrepo_test runs the manager's controllers against a real apiserver and a real git
// server (git http-backend behind net/http/cgi, with basic auth) and pushes commits to it: GitRepos
// must turn them into Bundles by polling and by webhooks, and report bad input.
package gitrepo_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

func TestGitRepo(t *testing.T) {
	testenv.RunSuite(t, "GitRepo controller", 30*time.Second, 100*time.Millisecond)
}

const (
	gitUser, gitPassword = "fleet", "s3cret"
	credentials          = "git-credentials"
	webhookSecret        = "webhook-secret"
)

var (
	manager    *localcluster.Cluster
	api        fleetcontrollers.Interface
	kube       kubernetes.Interface
	git        *localserver.GitServer
	webhookURL string
	// metricsAddr is where the manager serves /metrics.
	metricsAddr string
)

var _ = BeforeSuite(func(ctx context.Context) {
	var err error
	manager, api, err = testenv.StartWithCRDs(ctx, "manager")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(manager.Stop)
	kube, err = manager.Clientset()
	Expect(err).NotTo(HaveOccurred())

	git, err = localserver.StartGitServer(filepath.Join(GinkgoT().TempDir(), "git"), localserver.BasicAuth{Username: gitUser, Password: gitPassword})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(git.Close)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	webhookURL = "http://" + addr + "/"
	metricsAddr, err = testenv.FreeAddr()
	Expect(err).NotTo(HaveOccurred())

	// The manager's requests pass a counter of single-Secret reads.
	cfg := manager.RESTConfig()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &secretGets{next: rt} })
	stop := testenv.RunController(cfg, config.Config{AgentCheckinInterval: metav1.Duration{Duration: 5 * time.Second}},
		controller.Options{WebhookAddr: addr, GitRunTimeout: runTimeout, MetricsAddr: metricsAddr, ImageScanEnabled: true})
	DeferCleanup(func() { Expect(stop()).To(Succeed()) })

	Eventually(func() error {
		_, err := kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: credentials, Namespace: fleet.DefaultNamespace}, Type: corev1.SecretTypeBasicAuth,
			StringData: map[string]string{corev1.BasicAuthUsernameKey: gitUser, corev1.BasicAuthPasswordKey: gitPassword}}, metav1.CreateOptions{})
		return err
	}).Should(Succeed())
	_, err = kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: webhookSecret, Namespace: fleet.DefaultNamespace},
		StringData: map[string]string{"github": "gh-secret", "gitlab": "gl-token", "gogs": "gogs-secret", "bitbucket": "bb-uuid",
			"bitbucket-server": "bbs-secret", "azure-username": "az-user", "azure-password": "az-pass"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*time.Minute))

// files writes a repository's content into a new folder: name → content. Every folder gets a
// fleet.yaml (making it a bundle) unless content has one for it.
func files(content map[string]string) string {
	dir := GinkgoT().TempDir()
	all := map[string]string{}
	for name, data := range content {
		all[name] = data
		if d := filepath.Dir(name); d != "." {
			if _, ok := content[d+"/fleet.yaml"]; !ok {
				all[d+"/fleet.yaml"] = "defaultNamespace: " + d + "\n"
			}
		}
	}
	for name, data := range all {
		p := filepath.Join(dir, name)
		Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		Expect(os.WriteFile(p, []byte(data), 0o644)).To(Succeed())
	}
	return dir
}

func configMap(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %q\n", name, value)
}

// publish pushes content to repo's branch and returns the commit.
func publish(repo, branch string, content map[string]string) string {
	commit, err := git.Publish(context.Background(), repo, branch, files(content), "test commit")
	Expect(err).NotTo(HaveOccurred())
	return commit
}

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && manager != nil {
		manager.WriteLogTails(GinkgoWriter, 20)
	}
})

// secretReads counts the manager's GETs of single Secrets, by namespace/name.
var secretReads sync.Map

type secretGets struct{ next http.RoundTripper }

func (s *secretGets) RoundTrip(r *http.Request) (*http.Response, error) {
	// /api/v1/namespaces/NS/secrets/NAME
	if parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/"); r.Method == http.MethodGet && len(parts) == 6 && parts[4] == "secrets" {
		n, _ := secretReads.LoadOrStore(parts[3]+"/"+parts[5], new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	return s.next.RoundTrip(r)
}

// secretGetsOf is how many times the manager read Secret ns/name from the apiserver.
func secretGetsOf(ns, name string) int64 {
	if n, ok := secretReads.Load(ns + "/" + name); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// runTimeout bounds each in-process run in this suite: long enough for any honest run on a busy
// machine, short enough that a spec can wait for a stalled one to give up.
const runTimeout = 45 * time.Second
