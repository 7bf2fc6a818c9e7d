package gitrepo_test

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	"github.com/fleetgo/fleet/internal/rancherca"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// As on Fleet, a GitRepo's caBundle is trusted for the charts its bundles take from git
// (helm.chart: git::https://...), not only for its own clone.
var _ = Describe("a GitRepo on a git server of its own CA", func() {
	It("clones it with spec.caBundle, and fetches the git:: charts of its bundles with it too", func(ctx context.Context) {
		tlsGit, ca, err := localserver.StartTLSGitServer(filepath.Join(GinkgoT().TempDir(), "tls-git"), localserver.BasicAuth{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(tlsGit.Close)
		_, err = tlsGit.Publish(ctx, "charts", "main", files(map[string]string{
			"web/Chart.yaml":        "apiVersion: v2\nname: web\nversion: 1.2.3\n",
			"web/templates/cm.yaml": configMap("web", "from-git"),
			"web/fleet.yaml":        "# a chart, not a bundle of this repository\n",
		}), "chart")
		Expect(err).NotTo(HaveOccurred())
		commit, err := tlsGit.Publish(ctx, "apps", "main", files(map[string]string{
			"app/fleet.yaml": "defaultNamespace: web\nhelm:\n  chart: git::" + tlsGit.RepoURL("charts") + "//web?ref=main\n",
		}), "app")
		Expect(err).NotTo(HaveOccurred())
		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "tls-apps", Namespace: fleet.DefaultNamespace},
			Spec: fleet.GitRepoSpec{Repo: tlsGit.RepoURL("apps"), Branch: "main", CABundle: ca,
				PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "tls-apps", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gr.Status.Commit).To(Equal(commit), "status: %+v", gr.Status.Conditions)
			b, err := api.Bundle().Get(fleet.DefaultNamespace, "tls-apps-app", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			var names []string
			for _, r := range b.Spec.Resources {
				names = append(names, r.Name)
			}
			g.Expect(names).To(ContainElement(HavePrefix(bundlereader.EmbeddedChartDir+"/")), "the chart from git is embedded")
			g.Expect(b.Spec.Helm.Chart).To(HavePrefix(bundlereader.EmbeddedChartDir + "/"))
			g.Expect(strings.Join(names, " ")).To(ContainSubstring("web"))
		}, time.Minute).Should(Succeed())
	})
})

var _ = Describe("a GitRepo without a caBundle, on a server signed by Rancher's CA", func() {
	It("trusts Rancher's CA bundle (cattle-system/tls-ca, tls-ca-additional), as on Fleet", func(ctx context.Context) {
		tlsGit, ca, err := localserver.StartTLSGitServer(filepath.Join(GinkgoT().TempDir(), "rancher-git"), localserver.BasicAuth{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(tlsGit.Close)
		commit, err := tlsGit.Publish(ctx, "apps", "main", files(map[string]string{"app/cm.yaml": configMap("app", "1")}), "app")
		Expect(err).NotTo(HaveOccurred())
		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "rancher-ca", Namespace: fleet.DefaultNamespace},
			Spec: fleet.GitRepoSpec{Repo: tlsGit.RepoURL("apps"), Branch: "main", PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}})
		Expect(err).NotTo(HaveOccurred())
		polling := func(g Gomega) string {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "rancher-ca", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionGitPolling)
			g.Expect(c).NotTo(BeNil())
			return c.Message
		}
		Eventually(polling).Should(ContainSubstring("certificate"), "an unknown CA")

		// (Joining tls-ca-additional to it is rancherca's unit test: httptest servers share one
		// certificate.)
		testenv.RancherCA(ctx, kube, rancherca.Secret, rancherca.Key, ca)
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "rancher-ca", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gr.Status.Commit).To(Equal(commit), "status: %+v", gr.Status.Conditions)
			_, err = api.Bundle().Get(fleet.DefaultNamespace, "rancher-ca-app", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred(), "the Job cloned it too")
		}, time.Minute).Should(Succeed())
	})
})
