package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/fleetgo/fleet/dev/example"
	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func replicas(d *downstreamCluster, ns, name string) func() (int32, error) {
	return func() (int32, error) {
		dep, err := d.kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return -1, err
		}
		return dep.Status.ReadyReplicas, nil
	}
}

// kubectlGet runs kubectl get against the manager and returns its table.
func kubectlGet(args ...string) string {
	dir, err := localcluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig", manager.Kubeconfig, "get"}, args...)...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	return string(out)
}

var _ = Describe("the documented journey", Ordered, func() {
	var commit string

	BeforeAll(func(ctx context.Context) {
		var err error
		commit, err = example.Publish(ctx, root, git, charts.URL, "the example", nil)
		Expect(err).NotTo(HaveOccurred())
	})

	It("registers both downstream clusters with their labels; the Cluster list shows BUNDLES-READY and LAST-SEEN", func() {
		for _, d := range []struct {
			c      *downstreamCluster
			labels map[string]string
		}{{dev, example.DevLabels}, {prod, example.ProdLabels}} {
			Eventually(func(g Gomega) {
				c, err := api.Cluster().Get(fleet.DefaultNamespace, d.c.name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				for k, v := range d.labels {
					g.Expect(c.Labels).To(HaveKeyWithValue(k, v))
				}
				g.Expect(c.Status.Agent.LastSeen.IsZero()).To(BeFalse())
				g.Expect(c.Status.Display.ReadyBundles).To(Equal("0/0"))
			}).Should(Succeed())
		}
		table := kubectlGet("clusters.fleet.cattle.io", "-n", fleet.DefaultNamespace)
		lines := strings.Split(strings.TrimSpace(table), "\n")
		Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "BUNDLES-READY", "LAST-SEEN", "STATUS"}), table)
		Expect(lines).To(HaveLen(3), table)
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			Expect(f[0]).To(BeElementOf(dev.name, prod.name))
			Expect(f[1]).To(Equal("0/0"))
			_, err := time.Parse(time.RFC3339, f[2])
			Expect(err).NotTo(HaveOccurred(), "LAST-SEEN of %s: %s", f[0], table)
		}
		Expect(testenv.Unreachable(prod.Cluster, netns)).To(Succeed(), "prod is reached by nobody: it only reaches out")
	})

	It("deploys a namespace from a GitRepo in fleet-local to the management cluster's own agent", func(ctx context.Context) {
		newGitRepo(fleet.LocalNamespace, "example-local", func(s *fleet.GitRepoSpec) { s.Paths = []string{"namespace"} })
		Eventually(func() error {
			_, err := managerKube.CoreV1().Namespaces().Get(ctx, "fleet-example", metav1.GetOptions{})
			return err
		}).Should(Succeed())
		expectGitRepoReady(fleet.LocalNamespace, "example-local", commit, "1/1")
		// The Cluster's roll-up follows its deployments' reports, a few seconds after the Bundle's.
		Eventually(func() string { return kubectlGet("clusters.fleet.cattle.io", "-n", fleet.LocalNamespace) }).Should(MatchRegexp(`local\s+1/1\s+\d{4}-`))
		for _, d := range []*downstreamCluster{dev, prod} {
			Expect(notFound(func() error {
				_, err := d.kube.CoreV1().Namespaces().Get(ctx, "fleet-example", metav1.GetOptions{})
				return err
			})()).To(BeTrue(), "fleet-local's bundle stays on the management cluster")
		}
	})

	It("deploys a GitRepo targeting env=dev only there, applied by a Job", func(ctx context.Context) {
		newGitRepo(fleet.DefaultNamespace, "dev-only", func(s *fleet.GitRepoSpec) {
			s.Paths = []string{"app"}
			s.Targets = []fleet.GitTarget{{Name: "dev", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}}
		})
		Eventually(replicas(dev, "example-app", "web")).Should(Equal(int32(1)))
		Eventually(configMapData(dev.kube, "example-app", "web-settings")).Should(HaveKeyWithValue("greeting", "hello from fleet"))
		expectGitRepoReady(fleet.DefaultNamespace, "dev-only", commit, "1/1")
		Consistently(notFound(func() error {
			_, err := prod.kube.CoreV1().Namespaces().Get(ctx, "example-app", metav1.GetOptions{})
			return err
		}), 3*time.Second).Should(BeTrue(), "prod is not env=dev")
		jobs, err := managerKube.BatchV1().Jobs(fleet.DefaultNamespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(jobs.Items).NotTo(BeEmpty(), "the commit was applied by a Job")
	})

	It("renders the chart repository's chart and the repository's chart with dev.yaml on type=edge and stage.yaml on type=alpha, and kustomize overlays per env", func() {
		newGitRepo(fleet.DefaultNamespace, "everywhere", func(s *fleet.GitRepoSpec) {
			s.Paths = []string{"helm", "helm-external", "kustomize"}
			s.Targets = []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}
		})
		// The chart from the chart repository.
		Eventually(configMapData(dev.kube, "example-external", "example-web-banner")).Should(HaveKeyWithValue("banner", "dev cluster"))
		Eventually(configMapData(prod.kube, "example-external", "example-web-banner")).Should(HaveKeyWithValue("banner", "staging cluster"))
		Eventually(replicas(dev, "example-external", "example-web")).Should(Equal(int32(1)))
		Eventually(replicas(prod, "example-external", "example-web")).Should(Equal(int32(3)))
		// The chart in the repository.
		Eventually(configMapData(dev.kube, "example-helm", "stage-settings")).Should(Equal(map[string]string{"stage": "dev", "color": "green"}))
		Eventually(configMapData(prod.kube, "example-helm", "stage-settings")).Should(Equal(map[string]string{"stage": "stage", "color": "orange"}))
		// Kustomize overlays.
		Eventually(configMapData(dev.kube, "example-kustomize", "api-settings")).Should(Equal(map[string]string{"environment": "dev", "logLevel": "debug"}))
		Eventually(configMapData(prod.kube, "example-kustomize", "api-settings")).Should(Equal(map[string]string{"environment": "prod", "logLevel": "info"}))
		Eventually(replicas(prod, "example-kustomize", "api")).Should(Equal(int32(2)))
		expectGitRepoReady(fleet.DefaultNamespace, "everywhere", commit, "6/6")
		// The Cluster's roll-up follows its deployments' reports, a few seconds after the Bundles'.
		Eventually(func() string { return kubectlGet("clusters.fleet.cattle.io", "-n", fleet.DefaultNamespace) }).Should(MatchRegexp(prod.name + `\s+3/3\s+\d{4}-`))

		// fleet status: the whole rollout in one view (piped: no color), and as JSON.
		tree := fleetCmd("status", "--kubeconfig", manager.Kubeconfig, "everywhere")
		fmt.Fprintf(GinkgoWriter, "fleet status everywhere:\n%s", tree)
		Expect(tree).To(HavePrefix("GitRepo fleet-default/everywhere  commit " + commit[:7] + "  2/2 clusters ready  Ready\n"))
		for _, b := range []string{"everywhere-helm", "everywhere-helm-external", "everywhere-kustomize"} {
			Expect(tree).To(MatchRegexp(`Bundle ` + b + `  2/2 ready  Ready`))
		}
		Expect(tree).To(MatchRegexp(dev.name + `\s+Ready`))
		Expect(tree).NotTo(ContainSubstring("\x1b["), "no color when piped")
		var report struct {
			GitRepos []struct {
				Commit  string `json:"commit"`
				Bundles []struct {
					Clusters []struct{ Name, State string } `json:"clusters"`
				} `json:"bundles"`
			} `json:"gitRepos"`
		}
		Expect(json.Unmarshal([]byte(fleetCmd("status", "--kubeconfig", manager.Kubeconfig, "everywhere", "-o", "json")), &report)).To(Succeed())
		Expect(report.GitRepos).To(HaveLen(1))
		Expect(report.GitRepos[0].Commit).To(Equal(commit))
		Expect(report.GitRepos[0].Bundles).To(HaveLen(3))
		Expect(report.GitRepos[0].Bundles[0].Clusters).To(HaveLen(2))
		// --watch ends once Ready, with the progress line.
		Expect(fleetCmd("status", "--kubeconfig", manager.Kubeconfig, "everywhere", "--watch")).To(HavePrefix("2/2 clusters ready, 0 deployments waiting, 0 not ready\n"))
	})

	It("converges when the agents and the controller restart in the middle of a rollout", func(ctx context.Context) {
		devBD := func() *fleet.BundleDeployment {
			c, err := api.Cluster().Get(fleet.DefaultNamespace, dev.name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			bd, err := api.BundleDeployment().Get(c.Status.Namespace, "everywhere-helm-external", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return bd
		}
		before := devBD().Spec.DeploymentID
		// dev's agent is down while the commit arrives, so the rollout stops half way.
		dev.agent.stop()
		var err error
		commit, err = example.Publish(ctx, root, git, charts.URL, "second", func(path, content string) string {
			switch path {
			case "helm-external/dev.yaml":
				return strings.Replace(content, "dev cluster", "dev cluster, second", 1)
			case "kustomize/overlays/prod/kustomization.yaml":
				return strings.Replace(content, "environment: prod", "environment: prod-second", 1)
			}
			return content
		})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { return devBD().Spec.DeploymentID }).ShouldNot(Equal(before), "the new commit reaches dev's BundleDeployment")
		Expect(devBD().Status.AppliedDeploymentID).To(Equal(before), "dev has not deployed the new commit")
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "everywhere", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gr.Status.Commit).To(Equal(commit))
			g.Expect(fleet.FindCondition(gr.Status.Conditions, fleet.ConditionReady).Status).NotTo(Equal(corev1.ConditionTrue), "the rollout is under way")
		}).Should(Succeed())
		// Then the controller and prod's agent go down too, and everything comes back.
		controller.stop()
		prod.agent.stop()
		dev.agent.start()
		prod.agent.start()
		controller.start()

		Eventually(configMapData(dev.kube, "example-external", "example-web-banner")).Should(HaveKeyWithValue("banner", "dev cluster, second"))
		Eventually(configMapData(prod.kube, "example-kustomize", "api-settings")).Should(HaveKeyWithValue("environment", "prod-second"))
		expectGitRepoReady(fleet.DefaultNamespace, "everywhere", commit, "6/6")
		expectGitRepoReady(fleet.DefaultNamespace, "dev-only", commit, "1/1")
	})

	It("removes a deleted GitRepo's workloads, and keeps them with keepResources", func(ctx context.Context) {
		Expect(api.GitRepo().Delete(fleet.DefaultNamespace, "dev-only", &metav1.DeleteOptions{})).To(Succeed())
		Eventually(notFound(func() error {
			_, err := dev.kube.AppsV1().Deployments("example-app").Get(ctx, "web", metav1.GetOptions{})
			return err
		})).Should(BeTrue())
		Eventually(notFound(func() error {
			_, err := dev.kube.CoreV1().ConfigMaps("example-app").Get(ctx, "web-settings", metav1.GetOptions{})
			return err
		})).Should(BeTrue())

		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "everywhere", metav1.GetOptions{})
			if err != nil {
				return err
			}
			gr.Spec.KeepResources = true
			_, err = api.GitRepo().Update(gr)
			return err
		})).To(Succeed())
		// Every deployment has the option before the GitRepo goes.
		Eventually(func(g Gomega) {
			for _, d := range []*downstreamCluster{dev, prod} {
				c, err := api.Cluster().Get(fleet.DefaultNamespace, d.name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				bds, err := api.BundleDeployment().List(c.Status.Namespace, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(bds.Items).To(HaveLen(3))
				for _, bd := range bds.Items {
					g.Expect(bd.Spec.Options.KeepResources).To(BeTrue(), bd.Name)
					g.Expect(bd.Status.AppliedDeploymentID).To(Equal(bd.Spec.DeploymentID), bd.Name)
					g.Expect(bd.Status.Ready).To(BeTrue(), bd.Name)
				}
			}
		}).Should(Succeed())
		Expect(api.GitRepo().Delete(fleet.DefaultNamespace, "everywhere", &metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			for _, d := range []*downstreamCluster{dev, prod} {
				c, err := api.Cluster().Get(fleet.DefaultNamespace, d.name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.Status.Display.ReadyBundles).To(Equal("0/0"))
				secrets, err := d.kube.CoreV1().Secrets("example-external").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(secrets.Items).To(BeEmpty(), "the release is uninstalled")
			}
		}).Should(Succeed())
		for _, d := range []*downstreamCluster{dev, prod} {
			Expect(configMapData(d.kube, "example-kustomize", "api-settings")()).To(HaveKey("environment"), d.Name)
			Expect(configMapData(d.kube, "example-external", "example-web-banner")()).To(HaveKey("banner"), d.Name)
			_, err := d.kube.AppsV1().Deployments("example-helm").Get(ctx, "worker", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), d.Name)
		}
	})
})
