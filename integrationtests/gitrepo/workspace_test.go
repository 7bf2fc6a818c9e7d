package gitrepo_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/harness/localserver"
	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// As on Fleet: with no targets anywhere a bundle targets the ClusterGroup "default"; in a
// workspace that has none (Rancher makes fleet-default without one), it targets no cluster, and
// that is not an error: the GitRepo is Ready at 0/0 and deploys nowhere.
var _ = Describe("a GitRepo without targets in a workspace without a ClusterGroup default", func() {
	It("makes its Bundles, deploys them nowhere and is Ready at 0/0", func(ctx context.Context) {
		const ns = "new-workspace"
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		copyCredentials(ctx, ns)
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns, Labels: map[string]string{"env": "x"}}})
		Expect(err).NotTo(HaveOccurred())
		commit := publish("untargeted", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "untargeted", Namespace: ns},
			Spec: fleet.GitRepoSpec{Repo: git.RepoURL("untargeted"), Branch: "main", ClientSecretName: credentials,
				PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}})
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(g Gomega) {
			b, err := api.Bundle().Get(ns, "untargeted-app", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Labels).To(HaveKeyWithValue(fleet.CommitLabel, commit))
			g.Expect(b.Spec.Targets).To(ConsistOf(HaveField("ClusterGroup", fleet.DefaultClusterGroup)))
			g.Expect(b.Status.Display.ReadyClusters).To(Equal("0/0"))
			ready := fleet.FindCondition(b.Status.Conditions, fleet.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(corev1.ConditionTrue))
		}, time.Minute).Should(Succeed())
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(ns, "untargeted", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gr.Status.Commit).To(Equal(commit))
			g.Expect(gr.Status.Display.ReadyBundleDeployments).To(Equal("0/0"))
			g.Expect(gr.Status.Display.State).To(BeEmpty(), "Ready, so empty, as Fleet writes it")
			ready := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(corev1.ConditionTrue), ready.Message)
		}).Should(Succeed())
		list, err := api.BundleDeployment().List("", metav1.ListOptions{LabelSelector: fleet.RepoLabel + "=untargeted"})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(BeEmpty())

		By("a ClusterGroup default created later is targeted")
		_, err = api.ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultClusterGroup, Namespace: ns},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "x"}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string {
			b, err := api.Bundle().Get(ns, "untargeted-app", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return b.Status.Display.ReadyClusters
		}).Should(Equal("0/1"))
	})
})

var _ = Describe("a GitRepo naming no clientSecretName", func() {
	It("clones with the namespace's Secret gitcredential, as on Fleet, where the Secret lists the repository's host, and sends it to no other", func(ctx context.Context) {
		const ns = "default-credentials"
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		commit := publish("needs-auth", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "needs-auth", Namespace: ns},
			Spec: fleet.GitRepoSpec{Repo: git.RepoURL("needs-auth"), Branch: "main", PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}})
		Expect(err).NotTo(HaveOccurred())
		polling := func(g Gomega) string {
			gr, err := api.GitRepo().Get(ns, "needs-auth", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionGitPolling)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			return c.Message
		}
		Eventually(polling).Should(Not(BeEmpty()), "the server wants credentials")

		// A gitcredential that lists no hosts is used for none, and the condition says why.
		_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitcredential"},
			Type: corev1.SecretTypeBasicAuth, StringData: map[string]string{corev1.BasicAuthUsernameKey: gitUser, corev1.BasicAuthPasswordKey: gitPassword}},
			metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(polling).Should(And(ContainSubstring("secret "+ns+"/gitcredential lists no hosts"), ContainSubstring(secretuse.GitHostsAnnotation)))

		// A tenant's GitRepo naming another server of its choosing gets no credentials sent there.
		evil, err := localserver.StartGitServer(filepath.Join(GinkgoT().TempDir(), "evil"), localserver.BasicAuth{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(evil.Close)
		_, err = evil.Publish(ctx, "bait", "main", files(map[string]string{"app/cm.yaml": configMap("bait", "1")}), "first")
		Expect(err).NotTo(HaveOccurred())
		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "bait", Namespace: ns},
			Spec: fleet.GitRepoSpec{Repo: evil.RepoURL("bait"), Branch: "main", PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}})
		Expect(err).NotTo(HaveOccurred())

		u, err := url.Parse(git.URL)
		Expect(err).NotTo(HaveOccurred())
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, "gitcredential", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		s.Annotations = map[string]string{secretuse.GitHostsAnnotation: u.Host}
		_, err = kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(ns, "needs-auth", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gr.Status.Commit).To(Equal(commit), "%+v", gr.Status.Conditions)
		}, time.Minute).Should(Succeed())

		// The bait repository is public: it is cloned, without the credentials.
		Eventually(func() string {
			gr, err := api.GitRepo().Get(ns, "bait", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return gr.Status.Commit
		}, time.Minute).ShouldNot(BeEmpty())
		Expect(evil.CredentialedRequests()).To(BeZero(), "the credentials went to a host gitcredential does not list")
	})
})

var _ = Describe("a GitRepo whose secret is a GitHub App's", func() {
	It("clones with an installation token the controller gets for the App, asking for it once while it lasts", func(ctx context.Context) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		Expect(err).NotTo(HaveOccurred())
		const token = "ghs_installation_token"
		gh := localserver.StartGitHubAPI(4242, 77, &key.PublicKey, token)
		DeferCleanup(gh.Close)
		appGit, err := localserver.StartGitServer(filepath.Join(GinkgoT().TempDir(), "app-git"), localserver.BasicAuth{Username: "x-access-token", Password: token})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(appGit.Close)
		commit, err := appGit.Publish(ctx, "app-repo", "main", files(map[string]string{"app/cm.yaml": configMap("app", "1")}), "first")
		Expect(err).NotTo(HaveOccurred())

		pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
		_, err = kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-app"},
			Data: map[string][]byte{"github_app_id": []byte("4242"), "github_app_installation_id": []byte("77"),
				"github_app_private_key": pemKey, "github_app_base_url": []byte(gh.URL)}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		newGitRepo("as-app", "app-repo", func(s *fleet.GitRepoSpec) { s.Repo, s.ClientSecretName = appGit.RepoURL("app-repo"), "github-app" })
		Eventually(func() string { return gitRepo("as-app").Status.Commit }, time.Minute).Should(Equal(commit))
		Expect(bundlesOf("as-app")).To(Equal(map[string]string{"as-app-app": commit}))
		Consistently(gh.Issued.Load, "5s").Should(BeNumerically("==", 1), "a token lasts an hour: polls every 2s reuse it")
	})
})
