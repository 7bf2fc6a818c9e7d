// Package ui_test drives `fleet ui` in headless Chromium (Debian's, through chromedp) against a
// real apiserver with the real manager controllers, while the test plays the agents: every page
// loads, states change on the page without a reload, actions act as the viewer, and a read-only
// viewer sees the apiserver's refusal and a banner for what it may not list. Screenshots of each
// page go to $FLEET_UI_SCREENSHOTS (docs/ui holds the README's).
package ui_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/cli/status"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/ui"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

func TestUI(t *testing.T) {
	testenv.RunSuite(t, "fleet ui", 30*time.Second, 200*time.Millisecond)
}

var (
	cluster *localcluster.Cluster
	api     fleetcontrollers.Interface
	kube    kubernetes.Interface
	browser context.Context
)

// chromium is Debian's headless Chromium (.ci/run installs it).
func chromium() string {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, _ := exec.LookPath("chromium")
	return p
}

var _ = BeforeSuite(func(ctx context.Context) {
	var err error
	cluster, api, err = testenv.StartWithCRDs(ctx, "ui")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cluster.Stop)
	kube, err = cluster.Clientset()
	Expect(err).NotTo(HaveOccurred())
	inForce := config.NewStore(config.Config{AgentCheckinInterval: metav1.Duration{Duration: time.Hour}}.WithDefaults())
	stop := testenv.RunController(cluster.RESTConfig(), config.Config{}, controller.Options{Config: inForce, HealthAddr: "", MetricsAddr: ""})
	DeferCleanup(func() { Expect(stop()).To(Succeed()) })

	bin := chromium()
	Expect(bin).NotTo(BeEmpty(), "headless Chromium (Debian's chromium package)")
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))...)
	DeferCleanup(cancel)
	var cancelBrowser context.CancelFunc
	browser, cancelBrowser = chromedp.NewContext(alloc)
	DeferCleanup(cancelBrowser)
	Expect(chromedp.Do(browser, chromedp.Navigate("about:blank"))).To(Succeed())
}, NodeTimeout(5*time.Minute))

// serve runs the UI with cfg's credential, opens the URL it printed (with the run's secret) in
// the browser, and returns its address: the browser's tabs are served from then on.
func serve(cfg *rest.Config) string {
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	printed := make(chan string, 1)
	go func() {
		defer GinkgoRecover()
		Expect(ui.Run(ctx, "127.0.0.1:0", cfg, func(u string) { printed <- u })).To(Succeed())
	}()
	u := <-printed
	tab, cancelTab := chromedp.NewContext(browser)
	defer cancelTab()
	Expect(chromedp.Do(tab, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#live")))).To(Succeed())
	base, _, _ := strings.Cut(u, "/?")
	return base
}

// screenshot saves the page to $FLEET_UI_SCREENSHOTS/name.png when that is set.
func screenshot(tab context.Context, name string) {
	dir := os.Getenv("FLEET_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	Expect(err).NotTo(HaveOccurred())
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)).To(Succeed())
}

// text is the live part's text.
func text(tab context.Context) string {
	s, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#live")))
	Expect(err).NotTo(HaveOccurred())
	return s
}

// newCluster creates a Cluster that has checked in and waits for its namespace.
func newCluster(name string, labels map[string]string) string {
	c, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace, Labels: labels}})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() string {
		c, err = api.Cluster().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		return c.Status.Namespace
	}).ShouldNot(BeEmpty())
	Eventually(func() error {
		c, err := api.Cluster().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Status.Agent.LastSeen = metav1.Now()
		_, err = api.Cluster().UpdateStatus(c)
		return err
	}).Should(Succeed())
	return c.Status.Namespace
}

// agentReports writes what an agent reports for the deployment: applied, ready or not.
func agentReports(ns, name string, ready bool) {
	Eventually(func() error {
		bd, err := api.BundleDeployment().Get(ns, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if bd.Spec.DeploymentID == "" {
			return errNotPromoted
		}
		now := time.Now()
		bd.Status.AppliedDeploymentID = bd.Spec.DeploymentID
		bd.Status.Ready, bd.Status.NonModified = ready, true
		bd.Status.NonReadyStatus = nil
		fleet.SetCondition(&bd.Status.Conditions, fleet.ConditionDeployed, corev1.ConditionTrue, "", "", now)
		if !ready {
			bd.Status.NonReadyStatus = []fleet.NonReadyStatus{{Kind: "Deployment", Namespace: "web", Name: "web",
				Summary: fleet.Summary{State: "in-progress", Message: []string{"0 of 1 replicas available"}}}}
		}
		_, err = api.BundleDeployment().UpdateStatus(bd)
		return err
	}).Should(Succeed())
}

type notPromoted struct{}

func (notPromoted) Error() string { return "not promoted yet" }

var errNotPromoted = notPromoted{}

var _ = Describe("fleet ui", Ordered, func() {
	var admin, viewer string
	var nsA, nsB string

	BeforeAll(func() {
		nsA = newCluster("edge-a", map[string]string{"env": "dev"})
		nsB = newCluster("edge-b", map[string]string{"env": "prod"})
		_, err := api.ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: fleet.DefaultNamespace},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}})
		Expect(err).NotTo(HaveOccurred())
		// A GitRepo whose repository cannot be reached (its first problem), and its Bundle as
		// an earlier run applied it.
		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: fleet.DefaultNamespace},
			Spec: fleet.GitRepoSpec{Repo: "http://127.0.0.1:1/shop.git", Branch: "main"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "shop-web", Namespace: fleet.DefaultNamespace,
			Labels: map[string]string{fleet.RepoLabel: "shop"}},
			Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: web\n"}},
				Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}}})
		Expect(err).NotTo(HaveOccurred())
		agentReports(nsA, "shop-web", true)
		agentReports(nsB, "shop-web", false)

		// The viewer may read Fleet's kinds but Rollouts, and write nothing.
		_, err = kube.RbacV1().ClusterRoles().Create(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fleet-viewer"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"fleet.cattle.io"}, Verbs: []string{"get", "list", "watch"},
				Resources: []string{"gitrepos", "helmops", "bundles", "bundledeployments", "clusters", "clustergroups",
					"bundlehistories", "bundlerevisions", "contents"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fleet-viewer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "fleet-viewer"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "viewer"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		ro := rest.CopyConfig(cluster.RESTConfig())
		ro.Impersonate = rest.ImpersonationConfig{UserName: "viewer"}
		admin, viewer = serve(cluster.RESTConfig()), serve(ro)
	})

	It("shows the overview, with the GitRepo's first problem", func() {
		tab, cancel := chromedp.NewContext(browser)
		DeferCleanup(cancel)
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/"), chromedp.WaitVisible(chromedp.CSS("#repos")))).To(Succeed())
		Eventually(func() string { return text(tab) }).Should(And(ContainSubstring("shop"), ContainSubstring("127.0.0.1:1")))
		screenshot(tab, "overview")
	})

	It("shows a GitRepo's bundles and clusters, and a cluster turning Ready without a reload", func() {
		tab, cancel := chromedp.NewContext(browser)
		DeferCleanup(cancel)
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/gitrepos/fleet-default/shop"), chromedp.WaitVisible(chromedp.CSS(".bundle")))).To(Succeed())
		_, err := chromedp.Run(tab, chromedp.Evaluate[bool](`window.notReloaded = true`))
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { return text(tab) }).Should(And(ContainSubstring("Bundle shop-web"), ContainSubstring("0 of 1 replicas available")))
		screenshot(tab, "gitrepo")
		agentReports(nsB, "shop-web", true)
		Eventually(func() string { return text(tab) }, 30*time.Second).Should(ContainSubstring("2/2 ready"))
		same, err := chromedp.Run(tab, chromedp.Evaluate[bool](`window.notReloaded === true`))
		Expect(err).NotTo(HaveOccurred())
		Expect(same).To(BeTrue(), "the page changed without a reload")
	})

	It("shows a bundle's rollout stages and approves the stage waiting for approval", func() {
		ro, err := api.Rollout().Create(&fleet.Rollout{ObjectMeta: metav1.ObjectMeta{Name: "shop-web", Namespace: fleet.DefaultNamespace,
			Labels: map[string]string{fleet.RepoLabel: "shop", fleet.BundleLabel: "shop-web"}}})
		Expect(err).NotTo(HaveOccurred())
		ro.Status = fleet.RolloutStatus{Policy: "careful", Revision: "abc123", Phase: fleet.RolloutWaitingForApproval, Stage: "rest",
			Message: "stage rest waits for approval (fleet rollout approve)",
			Stages: []fleet.RolloutStageStatus{{Name: "canary", Clusters: 1, Updated: 1, Passing: 1, State: "Complete"},
				{Name: "rest", Clusters: 1, State: "WaitingForApproval"}}}
		_, err = api.Rollout().UpdateStatus(ro)
		Expect(err).NotTo(HaveOccurred())
		tab, cancel := chromedp.NewContext(browser)
		DeferCleanup(cancel)
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/gitrepos/fleet-default/shop"), chromedp.WaitVisible(chromedp.CSS(`button[value="approve"]`)))).To(Succeed())
		Expect(text(tab)).To(And(ContainSubstring("Rollout by careful: WaitingForApproval at stage rest"), MatchRegexp(`canary\s+1\s+1\s+1\s+0\s+Complete`)))
		screenshot(tab, "rollout")
		Expect(chromedp.Do(tab, chromedp.Click(chromedp.CSS(`button[value="approve"]`)))).To(Succeed())
		Eventually(func() []string {
			r, err := api.Rollout().Get(fleet.DefaultNamespace, "shop-web", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return r.Spec.Approved
		}).Should(Equal([]string{"abc123/rest"}))
	})

	It("shows a HelmOp's page, with why its chart cannot be resolved", func() {
		_, err := api.HelmOp().Create(&fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: fleet.DefaultNamespace},
			Spec: fleet.HelmOpSpec{BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				Helm: &fleet.HelmOptions{Chart: "db", Repo: "http://127.0.0.1:1/charts", Version: "1.x"}}}}})
		Expect(err).NotTo(HaveOccurred())
		tab, cancel := chromedp.NewContext(browser)
		DeferCleanup(cancel)
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/"), chromedp.WaitVisible(chromedp.CSS("#repos")))).To(Succeed())
		Eventually(func() string { return text(tab) }).Should(ContainSubstring("HelmOp"))
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/helmops/fleet-default/db"), chromedp.WaitVisible(chromedp.CSS("h1")))).To(Succeed())
		Eventually(func() string { return text(tab) }, 30*time.Second).Should(And(ContainSubstring("HelmOp fleet-default/db"), ContainSubstring("127.0.0.1:1")))
		screenshot(tab, "helmop")
	})

	It("shows a GitRepo a GitRepoRestriction refuses as Refused, with the reason, as fleet status does", func(ctx context.Context) {
		ns := "team-r"
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.GitRepoRestriction().Create(&fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Name: "only-allowed", Namespace: ns},
			AllowedRepoPatterns: []string{"^https://git\\.example/allowed/"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: ns},
			Spec: fleet.GitRepoSpec{Repo: "https://git.example/other/app.git", Branch: "main"}})
		Expect(err).NotTo(HaveOccurred())
		var reason string
		Eventually(func(g Gomega) {
			r, err := status.Gather(api, status.Options{Namespace: ns, Name: "elsewhere"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.GitRepos).To(HaveLen(1))
			g.Expect(r.GitRepos[0].State).To(Equal("Refused"))
			g.Expect(r.GitRepos[0].Error).NotTo(BeEmpty())
			reason = r.GitRepos[0].Error
		}).Should(Succeed())

		tab, cancel := chromedp.NewContext(browser)
		DeferCleanup(cancel)
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/"), chromedp.WaitVisible(chromedp.CSS("#repos")))).To(Succeed())
		Eventually(func() string { return text(tab) }).Should(MatchRegexp(`team-r\s+GitRepo\s+elsewhere.*Refused`))
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/gitrepos/team-r/elsewhere"), chromedp.WaitVisible(chromedp.CSS("#repo-state")))).To(Succeed())
		Eventually(func() string {
			s, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#repo-state")))
			Expect(err).NotTo(HaveOccurred())
			return s
		}).Should(Equal("Refused"))
		Expect(text(tab)).To(ContainSubstring(reason))
	})

	It("lists clusters with their groups and cluster groups", func() {
		tab, cancel := chromedp.NewContext(browser)
		DeferCleanup(cancel)
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/clusters"), chromedp.WaitVisible(chromedp.CSS("#clusters")))).To(Succeed())
		Eventually(func() string { return text(tab) }).Should(And(ContainSubstring("edge-a"), ContainSubstring("env=prod")))
		Expect(text(tab)).To(MatchRegexp(`edge-b\s+env=prod\s+prod`))
		screenshot(tab, "clusters")
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/clustergroups"), chromedp.WaitVisible(chromedp.CSS("#groups")))).To(Succeed())
		Eventually(func() string { return text(tab) }).Should(ContainSubstring("env=prod"))
		screenshot(tab, "clustergroups")
	})

	It("rolls a bundle's dev clusters back to its first revision as the viewer and shows them held; a read-only viewer is refused with the apiserver's message", func() {
		Expect(testenv.UpdateBundle(api, fleet.DefaultNamespace, "shop-web", func(b *fleet.Bundle) {
			b.Spec.Resources[0].Content = "kind: ConfigMap\nmetadata:\n  name: web-two\n"
		})).To(Succeed())
		var first string
		Eventually(func(g Gomega) {
			list, err := api.BundleRevision().List(fleet.DefaultNamespace, metav1.ListOptions{LabelSelector: fleet.HistoryBundleLabel + "=shop-web"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Items).To(HaveLen(2), "the new revision reached the clusters")
			for _, r := range list.Items {
				if r.Spec.Order == 1 {
					g.Expect(r.Spec.Inputs).NotTo(BeNil())
					first = r.Spec.Revision
				}
			}
		}, time.Minute).Should(Succeed())
		flashOf := func(tab context.Context) func() string {
			return func() string {
				f, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#flash")))
				Expect(err).NotTo(HaveOccurred())
				return f
			}
		}
		rollBack := func(tab context.Context, base string) {
			Expect(chromedp.Do(tab, chromedp.Navigate(base+"/gitrepos/fleet-default/shop"), chromedp.WaitVisible(chromedp.CSS(`.rollback summary`)),
				chromedp.Click(chromedp.CSS(`.rollback summary`)), chromedp.SendKeys(chromedp.CSS(`.rollback input[name="to"]`), first),
				chromedp.SendKeys(chromedp.CSS(`.rollback input[name="clusters"]`), "env=dev"),
				chromedp.Click(chromedp.CSS(`.rollback button[value="rollback"]`)))).To(Succeed())
		}

		ro, cancelRO := chromedp.NewContext(browser)
		DeferCleanup(cancelRO)
		rollBack(ro, viewer)
		Eventually(flashOf(ro)).Should(And(ContainSubstring("rollback refused"), ContainSubstring(`User "viewer" cannot update resource "bundlehistories"`)))
		hist, err := api.BundleHistory().Get(fleet.DefaultNamespace, "shop-web", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(hist.Spec.Holds).To(BeEmpty())

		tab, cancel := chromedp.NewContext(browser)
		DeferCleanup(cancel)
		rollBack(tab, admin)
		Eventually(flashOf(tab)).Should(Equal("BundleHistory fleet-default/shop-web: 1 clusters held at revision " + first))
		Eventually(func() string {
			bd, err := api.BundleDeployment().Get(nsA, "shop-web", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return bd.Annotations[fleet.HeldAnnotation]
		}).Should(Equal(first))
		Eventually(func() string { return text(tab) }, 30*time.Second).Should(And(ContainSubstring("Rolled back: 1 of 1 clusters held at revision "+first),
			MatchRegexp(`edge-a\s+\S+\s+held at revision `+first)))
		Expect(text(tab)).NotTo(MatchRegexp(`edge-b\s+\S+\s+held at revision`))
		screenshot(tab, "rollback")
	})

	It("shows a cluster's bundles with revision, commit, state and what it ran, and a bundle's timeline", func() {
		list, err := api.BundleRevision().List(fleet.DefaultNamespace, metav1.ListOptions{LabelSelector: fleet.HistoryBundleLabel + "=shop-web"})
		Expect(err).NotTo(HaveOccurred())
		revOf := map[int64]string{}
		for _, r := range list.Items {
			revOf[r.Spec.Order] = r.Spec.Revision
		}
		first, second := revOf[1], revOf[2]
		Expect(first).NotTo(BeEmpty())
		cells := func(tab context.Context, sel string) func() string {
			return func() string {
				s, err := chromedp.Run(tab, chromedp.Evaluate[string](`Array.from(document.querySelectorAll(`+"`"+sel+"`"+`)).map(r => Array.from(r.cells).map(c => c.textContent.trim()).join("|")).join("\n")`))
				Expect(err).NotTo(HaveOccurred())
				return s
			}
		}
		tab, cancel := chromedp.NewContext(browser)
		DeferCleanup(cancel)
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/clusters"), chromedp.WaitVisible(chromedp.CSS(`a[href="/clusters/fleet-default/edge-a"]`)),
			chromedp.Click(chromedp.CSS(`a[href="/clusters/fleet-default/edge-a"]`)), chromedp.WaitVisible(chromedp.CSS(".ran")))).To(Succeed())
		Expect(text(tab)).To(And(ContainSubstring("Cluster fleet-default/edge-a"), ContainSubstring("Bundle fleet-default/shop-web"), ContainSubstring("held at revision "+first)))
		// Newest first: back at the first revision, the second ended by the rollback, the first before it.
		Eventually(cells(tab, ".ran tbody tr")).Should(MatchRegexp(`^` + first + `\|\|\S+\|now\|\|diff with ` + second + `\n` +
			second + `\|\|\S+\|\S+\|RolledBack\|diff with ` + first + `\n` + first + `\|\|\S+\|\S+\|Replaced\|$`))
		screenshot(tab, "cluster")

		By("the diff between the two revisions for the cluster, rendered as its agent renders them")
		diffLink := `a.diff[href$="from=` + first + `&to=` + second + `"]`
		Expect(chromedp.Do(tab, chromedp.Click(chromedp.CSS(diffLink)), chromedp.WaitVisible(chromedp.CSS("#diff")))).To(Succeed())
		lines := func(class string) string {
			s, err := chromedp.Run(tab, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#diff .`+class+`")).map(l => l.textContent).join("\n")`))
			Expect(err).NotTo(HaveOccurred())
			return s
		}
		Expect(lines("del")).To(Equal("-  name: web"))
		Expect(lines("add")).To(Equal("+  name: web-two"))
		Expect(text(tab)).To(ContainSubstring("revision " + first + " to " + second + " on cluster fleet-default/edge-a"))
		screenshot(tab, "diff")
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/bundles/fleet-default/shop-web/diff?cluster=fleet-default/edge-a&from=nope&to="+second),
			chromedp.WaitVisible(chromedp.CSS("#diff-problem")))).To(Succeed())
		Expect(text(tab)).To(MatchRegexp(`No diff: revision nope of bundle fleet-default/shop-web: .*not found`))

		Expect(chromedp.Do(tab, chromedp.Click(chromedp.CSS(`a[href="/bundles/fleet-default/shop-web/history"]`)), chromedp.WaitVisible(chromedp.CSS("#timeline")))).To(Succeed())
		// revision, commit, first promoted, last ran, clusters that ran it, clusters that run it now
		Eventually(cells(tab, "#timeline tbody tr")).Should(MatchRegexp(`^` + second + `\|\|\S+\|\S+\|2\|1\n` + first + `\|\|\S+\|now\|2\|1$`))
		screenshot(tab, "timeline")
	})

	It("pauses a GitRepo as the viewer; a read-only viewer sees the apiserver's refusal and a banner", func() {
		tab, cancel := chromedp.NewContext(browser)
		DeferCleanup(cancel)
		Expect(chromedp.Do(tab, chromedp.Navigate(admin+"/gitrepos/fleet-default/shop"), chromedp.WaitVisible(chromedp.CSS(`button[value="pause"]`)),
			chromedp.Click(chromedp.CSS(`button[value="pause"]`)))).To(Succeed())
		Eventually(func() bool {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "shop", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return gr.Spec.Paused
		}).Should(BeTrue())
		flashOf := func(tab context.Context) func() string {
			return func() string {
				f, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#flash")))
				Expect(err).NotTo(HaveOccurred())
				return f
			}
		}
		Eventually(flashOf(tab)).Should(Equal("GitRepo fleet-default/shop: paused"))

		ro, cancelRO := chromedp.NewContext(browser)
		DeferCleanup(cancelRO)
		Expect(chromedp.Do(ro, chromedp.Navigate(viewer+"/gitrepos/fleet-default/shop"), chromedp.WaitVisible(chromedp.CSS(`button[value="redeploy"]`)),
			chromedp.Click(chromedp.CSS(`button[value="redeploy"]`)))).To(Succeed())
		Eventually(flashOf(ro)).Should(And(ContainSubstring("redeploy refused"), ContainSubstring(`User "viewer" cannot update resource "gitrepos"`)))
		Eventually(func() string { return text(ro) }, 30*time.Second).Should(ContainSubstring("Rollouts: "))
		Expect(text(ro)).To(ContainSubstring("forbidden"))
		screenshot(ro, "read-only")
		gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "shop", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(gr.Spec.ForceSyncGeneration).To(BeZero(), "nothing pretends to work")
		Expect(strings.Contains(flashOf(ro)(), "paused")).To(BeFalse())
	})
})

var _ = Describe("fleet ui --in-cluster", Ordered, func() {
	It("signs a viewer in with a token and acts only with it: reads what it may, is refused what it may not", func(ctx context.Context) {
		_, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ui-viewer"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fleet-ui-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"fleet.cattle.io"}, Verbs: []string{"get", "list", "watch"},
				Resources: []string{"gitrepos", "helmops", "bundles", "bundledeployments", "clusters", "clustergroups", "rollouts"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "catalog", Namespace: fleet.DefaultNamespace},
			Spec: fleet.GitRepoSpec{Repo: "http://127.0.0.1:1/catalog.git", Branch: "main"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ui-viewer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "fleet-ui-reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ui-viewer", Namespace: "default"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "ui-viewer", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		addr, err := testenv.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		runCtx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		// The pod's own credential is the admin's here: the UI must not use it.
		go func() {
			defer GinkgoRecover()
			Expect(ui.RunViewers(runCtx, addr, cluster.RESTConfig(), ui.AuthToken, ui.DefaultLimits)).To(Succeed())
		}()
		url := "http://" + addr
		Eventually(func() error { _, err := http.Get(url + "/login"); return err }).Should(Succeed())
		resp, err := http.Get(url + "/")
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "nothing is shown before signing in")

		tab, cancelTab := chromedp.NewContext(browser)
		DeferCleanup(cancelTab)
		tab, cancelTab = context.WithTimeout(tab, 3*time.Minute)
		DeferCleanup(cancelTab)
		Expect(chromedp.Do(tab, chromedp.Navigate(url+"/login"), chromedp.WaitVisible(chromedp.CSS("textarea")),
			chromedp.SendKeys(chromedp.CSS("textarea"), tr.Status.Token), chromedp.Submit(chromedp.CSS("form")),
			chromedp.WaitVisible(chromedp.CSS("#repos")))).To(Succeed())
		Eventually(func() string { return text(tab) }).Should(ContainSubstring("catalog"))
		Expect(text(tab)).NotTo(ContainSubstring("cannot be shown"))
		Expect(chromedp.Do(tab, chromedp.Navigate(url+"/gitrepos/fleet-default/catalog"), chromedp.WaitVisible(chromedp.CSS(`button[value="redeploy"]`)),
			chromedp.Click(chromedp.CSS(`button[value="redeploy"]`)))).To(Succeed())
		Eventually(func() string {
			f, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#flash")))
			Expect(err).NotTo(HaveOccurred())
			return f
		}).Should(ContainSubstring(`User "system:serviceaccount:default:ui-viewer" cannot update resource "gitrepos"`))

		// Signing out from the header ends the session: the next page is the sign-in form.
		Expect(chromedp.Do(tab, chromedp.Click(chromedp.CSS("#sign-out")), chromedp.WaitVisible(chromedp.CSS("textarea")))).To(Succeed())
		Expect(chromedp.Do(tab, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("textarea")))).To(Succeed())
	})
})
