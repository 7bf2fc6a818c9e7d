package gitrepo_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/rancher/wrangler/v3/pkg/condition"

	"github.com/fleetgo/fleet/charts"
	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/cli/status"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
)

func newGitRepo(name, repo string, mutate func(*fleet.GitRepoSpec)) {
	spec := fleet.GitRepoSpec{Repo: git.RepoURL(repo), Branch: "main", ClientSecretName: credentials,
		PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}
	if mutate != nil {
		mutate(&spec)
	}
	_, err := api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace}, Spec: spec})
	Expect(err).NotTo(HaveOccurred())
}

func gitRepo(name string) *fleet.GitRepo {
	gr, err := api.GitRepo().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	return gr
}

// bundlesOf returns the names of the GitRepo's Bundles and the commit label each carries.
func bundlesOf(repo string) map[string]string {
	list, err := api.Bundle().List(fleet.DefaultNamespace, metav1.ListOptions{LabelSelector: labels.Set{fleet.RepoLabel: repo}.String()})
	Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, b := range list.Items {
		out[b.Name] = b.Labels[fleet.CommitLabel]
	}
	return out
}

func names(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func cond(gr *fleet.GitRepo, t string) (corev1.ConditionStatus, string) {
	c := fleet.FindCondition(gr.Status.Conditions, condition.Cond(t))
	if c == nil {
		return "", ""
	}
	return c.Status, c.Message
}

var _ = Describe("GitRepo", func() {
	It("turns a pushed commit into Bundles within one polling interval, prunes removed paths and deletes its Bundles with it", func() {
		first := publish("poll", "main", map[string]string{"one/cm.yaml": configMap("one", "a"), "two/cm.yaml": configMap("two", "a")})
		newGitRepo("poll", "poll", nil)
		Eventually(func() map[string]string { return bundlesOf("poll") }).Should(Equal(map[string]string{"poll-one": first, "poll-two": first}))
		b, err := api.Bundle().Get(fleet.DefaultNamespace, "poll-one", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Spec.Targets).To(Equal([]fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}}), "a GitRepo without targets targets the ClusterGroup default")
		Eventually(func(g Gomega) {
			gr := gitRepo("poll")
			g.Expect(gr.Status.Commit).To(Equal(first))
			g.Expect(gr.Status.PollingCommit).To(Equal(first))
			g.Expect(gr.Status.GitJobStatus).To(Equal("Current"))
			s, _ := cond(gr, "GitPolling")
			g.Expect(s).To(Equal(corev1.ConditionTrue))
			s, _ = cond(gr, "Stalled")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
		}).Should(Succeed())

		// A new commit without path two: within one polling interval (2 s) plus the run.
		second := publish("poll", "main", map[string]string{"one/cm.yaml": configMap("one", "b")})
		start := time.Now()
		Eventually(func() map[string]string { return bundlesOf("poll") }, 10*time.Second, 100*time.Millisecond).
			Should(Equal(map[string]string{"poll-one": second}))
		Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second+3*time.Second), "polling every 2 s (with a tenth of jitter) and a run")
		// Events tell the story: each commit found, then applied.
		Eventually(func(g Gomega) {
			ev, err := testenv.Events(context.Background(), kube, fleet.DefaultNamespace, "GitRepo", "poll")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev["GotNewCommit"]).To(ContainElement(ContainSubstring(second)))
			g.Expect(ev["Applied"]).To(ContainElements(ContainSubstring(first), ContainSubstring(second)))
		}).Should(Succeed())

		// The GitOps metrics: two runs started and timed, polls that succeeded.
		key := map[string]string{"name": "poll", "namespace": fleet.DefaultNamespace}
		gitOps := func(g Gomega, family string) (float64, bool) {
			f, err := testenv.Scrape(metricsAddr)
			g.Expect(err).NotTo(HaveOccurred())
			return f.Sample(family, key)
		}
		Eventually(func(g Gomega) {
			for family, atLeast := range map[string]float64{"fleet_gitjobs_created_success_total": 2, "fleet_gitjob_duration_seconds": 2,
				"fleet_gitrepo_fetch_latest_commit_success_total": 2, "fleet_gitrepo_fetch_latest_commit_duration_seconds": 2} {
				v, ok := gitOps(g, family)
				g.Expect(ok).To(BeTrue(), family)
				g.Expect(v).To(BeNumerically(">=", atLeast), family)
			}
			_, ok := gitOps(g, "fleet_gitjobs_created_failure_total")
			g.Expect(ok).To(BeFalse())
		}).Should(Succeed())

		Expect(api.GitRepo().Delete(fleet.DefaultNamespace, "poll", &metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() map[string]string { return bundlesOf("poll") }).Should(BeEmpty())
		Eventually(func() bool {
			_, err := api.GitRepo().Get(fleet.DefaultNamespace, "poll", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
		Eventually(func(g Gomega) {
			_, ok := gitOps(g, "fleet_gitjobs_created_success_total")
			g.Expect(ok).To(BeFalse(), "a deleted GitRepo's series are dropped")
		}).Should(Succeed())
	})

	It("passes serviceAccount, targetNamespace, paused, keepResources, deleteNamespace, correctDrift, forceSyncGeneration and targets down to its Bundles", func() {
		commit := publish("passdown", "main", map[string]string{"app/cm.yaml": configMap("app", "x")})
		newGitRepo("passdown", "passdown", func(s *fleet.GitRepoSpec) {
			s.ServiceAccount, s.TargetNamespace, s.Paused, s.KeepResources, s.DeleteNamespace = "deployer", "apps", true, true, true
			s.CorrectDrift = &fleet.CorrectDrift{Enabled: true}
			s.ForceSyncGeneration = 2
			s.Targets = []fleet.GitTarget{{Name: "dev", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}}
		})
		Eventually(func() map[string]string { return bundlesOf("passdown") }).Should(Equal(map[string]string{"passdown-app": commit}))
		b, err := api.Bundle().Get(fleet.DefaultNamespace, "passdown-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Spec.ServiceAccount).To(Equal("deployer"))
		Expect(b.Spec.TargetNamespace).To(Equal("apps"))
		Expect(b.Spec.Paused).To(BeTrue())
		Expect(b.Spec.KeepResources).To(BeTrue())
		Expect(b.Spec.DeleteNamespace).To(BeTrue())
		Expect(b.Spec.CorrectDrift).NotTo(BeNil())
		Expect(b.Spec.CorrectDrift.Enabled).To(BeTrue())
		Expect(b.Spec.ForceSyncGeneration).To(Equal(int64(2)), "Force Update redeploys")
		Expect(b.Spec.Targets).NotTo(BeEmpty())
		Expect(b.Spec.Targets[len(b.Spec.Targets)-1].ClusterSelector.MatchLabels).To(HaveKeyWithValue("env", "dev"))
	})

	It("reports wrong credentials, a missing branch and an unreachable repository, and deletes no Bundle", func() {
		commit := publish("bad", "main", map[string]string{"app/cm.yaml": configMap("app", "x")})
		newGitRepo("bad", "bad", nil)
		Eventually(func() map[string]string { return bundlesOf("bad") }).Should(Equal(map[string]string{"bad-app": commit}))

		_, err := kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "wrong-credentials", Namespace: fleet.DefaultNamespace}, Type: corev1.SecretTypeBasicAuth,
			StringData: map[string]string{corev1.BasicAuthUsernameKey: gitUser, corev1.BasicAuthPasswordKey: "wrong"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, c := range []struct {
			mutate func(*fleet.GitRepoSpec)
			want   string
		}{
			{func(s *fleet.GitRepoSpec) { s.ClientSecretName = "wrong-credentials" }, "authentication required"},
			{func(s *fleet.GitRepoSpec) { s.ClientSecretName, s.Branch = credentials, "nope" }, "branch nope not found"},
			{func(s *fleet.GitRepoSpec) { s.Branch, s.Repo = "main", "http://127.0.0.1:1/unreachable.git" }, "connection refused"},
		} {
			gr := gitRepo("bad")
			c.mutate(&gr.Spec)
			_, err := api.GitRepo().Update(gr)
			Expect(err).NotTo(HaveOccurred())
			Eventually(func(g Gomega) {
				gr := gitRepo("bad")
				s, msg := cond(gr, "GitPolling")
				g.Expect(s).To(Equal(corev1.ConditionFalse))
				g.Expect(msg).To(ContainSubstring(c.want))
				s, msg = cond(gr, "Ready")
				g.Expect(s).To(Equal(corev1.ConditionFalse))
				g.Expect(msg).To(ContainSubstring(c.want))
			}).Should(Succeed())
			Expect(bundlesOf("bad")).To(Equal(map[string]string{"bad-app": commit}), "no Bundle is deleted")
		}
	})

	It("stalls on a broken fleet.yaml in one path, naming the file, and changes no Bundle", func() {
		good := publish("broken", "main", map[string]string{"a/cm.yaml": configMap("a", "1"), "b/cm.yaml": configMap("b", "1")})
		newGitRepo("broken", "broken", func(s *fleet.GitRepoSpec) { s.Paths = []string{"a", "b"} })
		Eventually(func() map[string]string { return bundlesOf("broken") }).Should(Equal(map[string]string{"broken-a": good, "broken-b": good}))
		publish("broken", "main", map[string]string{"a/cm.yaml": configMap("a", "2"), "b/cm.yaml": configMap("b", "2"),
			"b/fleet.yaml": "defaultNamespace: [not, a, string\n"})
		Eventually(func(g Gomega) {
			gr := gitRepo("broken")
			s, msg := cond(gr, "Stalled")
			g.Expect(s).To(Equal(corev1.ConditionTrue))
			g.Expect(msg).To(ContainSubstring("fleet.yaml"))
			g.Expect(gr.Status.GitJobStatus).To(Equal("Failed"))
			s, _ = cond(gr, "Ready")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
			ev, err := testenv.Events(context.Background(), kube, fleet.DefaultNamespace, "GitRepo", "broken")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev["ApplyFailed"]).To(ContainElement(ContainSubstring("fleet.yaml")))
		}).Should(Succeed())
		Consistently(func() map[string]string { return bundlesOf("broken") }, 3*time.Second).
			Should(Equal(map[string]string{"broken-a": good, "broken-b": good}), "nothing is applied from a commit with a broken bundle")
	})

	It("clones over SSH with a key and known_hosts, and refuses an unknown host key", func(ctx context.Context) {
		sshd, err := localserver.StartSSHGitServer(ctx, git.Root)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(sshd.Close)
		commit := publish("over-ssh", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		for name, knownHosts := range map[string][]byte{"ssh-key": sshd.KnownHosts,
			"ssh-wrong-host": []byte(strings.Replace(string(sshd.KnownHosts), "127.0.0.1", "127.0.0.9", 1))} {
			_, err = kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace}, Type: corev1.SecretTypeSSHAuth,
				Data: map[string][]byte{corev1.SSHAuthPrivateKey: sshd.ClientKey, "known_hosts": knownHosts}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			newGitRepo(name, "over-ssh", func(s *fleet.GitRepoSpec) { s.Repo, s.ClientSecretName = sshd.RepoURL("over-ssh"), name })
		}
		Eventually(func() map[string]string { return bundlesOf("ssh-key") }).Should(Equal(map[string]string{"ssh-key-app": commit}))
		Eventually(func(g Gomega) {
			s, msg := cond(gitRepo("ssh-wrong-host"), "GitPolling")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
			g.Expect(msg).To(ContainSubstring("key is unknown"))
		}).Should(Succeed())
		Expect(bundlesOf("ssh-wrong-host")).To(BeEmpty())
	})

	It("checks SSH host keys against the ConfigMap known-hosts when the secret holds no known_hosts", func(ctx context.Context) {
		sshd, err := localserver.StartSSHGitServer(ctx, git.Root)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(sshd.Close)
		commit := publish("shared-hosts", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		// What the fleet chart writes: the providers' keys and additionalKnownHosts.
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cattle-fleet-system"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		_, err = kube.CoreV1().ConfigMaps("cattle-fleet-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "known-hosts"},
			Data: map[string]string{"known_hosts": string(charts.KnownHosts()) + string(sshd.KnownHosts)}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "ssh-no-hosts", Namespace: fleet.DefaultNamespace}, Type: corev1.SecretTypeSSHAuth,
			Data: map[string][]byte{corev1.SSHAuthPrivateKey: sshd.ClientKey}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		newGitRepo("ssh-shared", "shared-hosts", func(s *fleet.GitRepoSpec) { s.Repo, s.ClientSecretName = sshd.RepoURL("shared-hosts"), "ssh-no-hosts" })
		// The same server under a name the ConfigMap does not know.
		newGitRepo("ssh-unnamed", "shared-hosts", func(s *fleet.GitRepoSpec) {
			s.Repo, s.ClientSecretName = strings.Replace(sshd.RepoURL("shared-hosts"), "127.0.0.1", "localhost", 1), "ssh-no-hosts"
		})
		Eventually(func() map[string]string { return bundlesOf("ssh-shared") }, time.Minute).Should(Equal(map[string]string{"ssh-shared-app": commit}))
		Eventually(func(g Gomega) {
			s, msg := cond(gitRepo("ssh-unnamed"), "GitPolling")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
			g.Expect(msg).To(ContainSubstring("key is unknown"))
		}).Should(Succeed())
		Expect(bundlesOf("ssh-unnamed")).To(BeEmpty(), "insecureSkipHostKeyChecks is false")
	})

	It("downloads charts with the credentials helmSecretNameForPaths gives each path", func(ctx context.Context) {
		repo, err := localserver.StartChartRepo(filepath.Join(GinkgoT().TempDir(), "charts"), localserver.BasicAuth{Username: "charts", Password: "chart-pass"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(repo.Close)
		chartDir := files(map[string]string{"Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n",
			"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n"})
		_, err = repo.AddChart(chartDir)
		Expect(err).NotTo(HaveOccurred())
		commit := publish("charted", "main", map[string]string{
			"private/fleet.yaml": "helm:\n  repo: " + repo.URL + "\n  chart: web\n  version: 1.0.0\n"})
		_, err = kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "chart-paths", Namespace: fleet.DefaultNamespace},
			StringData: map[string]string{"secrets.yaml": "private:\n  username: charts\n  password: chart-pass\n"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		newGitRepo("charted-without", "charted", nil)
		// Credentials go where helmRepoURLRegex says; without it (below), nowhere.
		newGitRepo("charted", "charted", func(s *fleet.GitRepoSpec) {
			s.HelmSecretNameForPaths, s.HelmRepoURLRegex = "chart-paths", "^"+regexp.QuoteMeta(repo.URL)
		})
		newGitRepo("charted-no-regex", "charted", func(s *fleet.GitRepoSpec) { s.HelmSecretNameForPaths = "chart-paths" })
		Eventually(func() map[string]string { return bundlesOf("charted") }).Should(Equal(map[string]string{"charted-private": commit}))
		for _, name := range []string{"charted-without", "charted-no-regex"} {
			Eventually(func(g Gomega) {
				s, msg := cond(gitRepo(name), "Stalled")
				g.Expect(s).To(Equal(corev1.ConditionTrue))
				g.Expect(msg).To(ContainSubstring("401"))
			}).Should(Succeed(), name)
		}
	})

	It("rolls its BundleDeployments up: ready clusters, per-state counts, resources per cluster, Ready", func() {
		for _, name := range []string{"roll-a", "roll-b"} {
			_, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace,
				Labels: map[string]string{"rollup": "yes"}}})
			Expect(err).NotTo(HaveOccurred())
		}
		publish("rollup", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		newGitRepo("rollup", "rollup", func(s *fleet.GitRepoSpec) {
			s.Targets = []fleet.GitTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rollup": "yes"}}}}
		})
		var bds []fleet.BundleDeployment
		Eventually(func() int {
			list, err := api.BundleDeployment().List("", metav1.ListOptions{LabelSelector: labels.Set{fleet.RepoLabel: "rollup"}.String()})
			Expect(err).NotTo(HaveOccurred())
			bds = list.Items
			return len(bds)
		}).Should(Equal(2))
		Eventually(func() string { return gitRepo("rollup").Status.Display.ReadyBundleDeployments }).Should(Equal("0/2"))
		res := fleet.BundleDeploymentResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: "app"}
		for i, bd := range bds {
			ready := i == 0
			Eventually(func() error {
				cur, err := api.BundleDeployment().Get(bd.Namespace, bd.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Status.AppliedDeploymentID, cur.Status.Ready, cur.Status.NonModified = cur.Spec.DeploymentID, ready, true
				cur.Status.Resources = []fleet.BundleDeploymentResource{res}
				if !ready {
					cur.Status.NonReadyStatus = []fleet.NonReadyStatus{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: "app"}}
				}
				fleet.SetCondition(&cur.Status.Conditions, fleet.ConditionDeployed, corev1.ConditionTrue, "", "", time.Now())
				_, err = api.BundleDeployment().UpdateStatus(cur)
				return err
			}).Should(Succeed())
		}
		Eventually(func(g Gomega) {
			st := gitRepo("rollup").Status
			g.Expect(st.Display.ReadyBundleDeployments).To(Equal("1/2"))
			g.Expect(st.ReadyClusters).To(Equal(1))
			g.Expect(st.DesiredReadyClusters).To(Equal(2))
			g.Expect(st.Summary.Ready).To(Equal(1))
			g.Expect(st.Summary.NotReady).To(Equal(1))
			g.Expect(st.Resources).To(HaveLen(1))
			r := st.Resources[0]
			g.Expect(r.Type).To(Equal("configmap"))
			g.Expect(r.ID).To(Equal("app/app"))
			g.Expect(r.State).To(Equal("NotReady"))
			g.Expect(r.PerClusterState.Ready).To(HaveLen(1))
			g.Expect(r.PerClusterState.NotReady).To(HaveLen(1))
			s, msg := cond(gitRepo("rollup"), "Ready")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
			g.Expect(msg).NotTo(BeEmpty())
		}).Should(Succeed())

		By("fleet status shows the tree: commit, Bundle, each cluster's state and what stops it")
		readyCluster, slowCluster := bds[0].Labels[fleet.ClusterLabel], bds[1].Labels[fleet.ClusterLabel]
		// The GitRepo rolls up the BundleDeployments themselves, the Bundle its own pass: the
		// Bundle's figures may follow the GitRepo's a moment later.
		Eventually(func(gm Gomega) {
			r, err := status.Gather(api, status.Options{Namespace: fleet.DefaultNamespace, Name: "rollup"})
			gm.Expect(err).NotTo(HaveOccurred())
			gm.Expect(r.GitRepos).To(HaveLen(1))
			g := r.GitRepos[0]
			gm.Expect(g.Commit).To(Equal(gitRepo("rollup").Status.Commit))
			gm.Expect(g.Complete).To(BeTrue())
			gm.Expect(g.ReadyClusters).To(Equal(1))
			gm.Expect(g.Bundles).To(ConsistOf(And(HaveField("Name", "rollup-app"), HaveField("Ready", 1), HaveField("Desired", 2))))
			gm.Expect(g.Bundles[0].Clusters).To(ConsistOf(
				And(HaveField("Name", readyCluster), HaveField("State", "Ready")),
				And(HaveField("Name", slowCluster), HaveField("State", "NotReady"), HaveField("Message", ContainSubstring("configmap.v1 app/app")))))
		}).Should(Succeed())

		By("a user who may read only the namespace's GitRepos, Bundles and Clusters sees the non-ready clusters from the Bundle")
		viewer := viewerConfig(fleet.DefaultNamespace)
		vf, err := fleetfactory.NewFactoryFromConfig(viewer)
		Expect(err).NotTo(HaveOccurred())
		r, err := status.Gather(vf.Fleet().V1alpha1(), status.Options{Namespace: fleet.DefaultNamespace, Name: "rollup"})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.GitRepos[0].Complete).To(BeFalse())
		Expect(r.GitRepos[0].Bundles[0].Clusters).To(ConsistOf(And(HaveField("Name", slowCluster), HaveField("State", "NotReady"))))
		_, err = status.Gather(vf.Fleet().V1alpha1(), status.Options{Namespace: "restricted", All: true})
		Expect(err).To(MatchError("you may not read gitrepos in namespace restricted"))
		_, err = status.Gather(api, status.Options{Namespace: fleet.DefaultNamespace, Name: "nope"})
		Expect(err).To(MatchError(`gitrepo "nope" not found in namespace fleet-default`))
	})

	It("applies the namespace's GitRepoRestrictions: defaults reach the Bundles, a disallowed repository is not accepted", func() {
		_, err := api.GitRepoRestriction().Create(&fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "restricted"},
			DefaultServiceAccount: "team-deployer", DefaultClientSecretName: credentials, AllowedRepoPatterns: []string{`/allowed\.git$`}})
		if apierrors.IsNotFound(err) {
			_, err = kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restricted"}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = api.GitRepoRestriction().Create(&fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "restricted"},
				DefaultServiceAccount: "team-deployer", DefaultClientSecretName: credentials, AllowedRepoPatterns: []string{`/allowed\.git$`}})
		}
		Expect(err).NotTo(HaveOccurred())
		secret, err := kube.CoreV1().Secrets(fleet.DefaultNamespace).Get(context.Background(), credentials, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Secrets("restricted").Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: credentials, Namespace: "restricted"},
			Type: secret.Type, Data: secret.Data}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		commit := publish("allowed", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		publish("other", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		for name, repo := range map[string]string{"allowed": "allowed", "other": "other"} {
			_, err := api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "restricted"},
				Spec: fleet.GitRepoSpec{Repo: git.RepoURL(repo), Branch: "main", PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func(g Gomega) {
			b, err := api.Bundle().Get("restricted", "allowed-app", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Labels).To(HaveKeyWithValue(fleet.CommitLabel, commit))
			g.Expect(b.Spec.ServiceAccount).To(Equal("team-deployer"), "defaultServiceAccount")
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get("restricted", "other", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			c := fleet.FindCondition(gr.Status.Conditions, "Accepted")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("allowedRepoPatterns"))
			s, _ := cond(gr, "Ready")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
			ev, err := testenv.Events(context.Background(), kube, "restricted", "GitRepo", "other")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev["RestrictionRefused"]).To(ContainElement(ContainSubstring("allowedRepoPatterns")))
		}).Should(Succeed())
		Consistently(func() (bool, error) {
			list, err := api.Bundle().List("restricted", metav1.ListOptions{LabelSelector: labels.Set{fleet.RepoLabel: "other"}.String()})
			return len(list.Items) == 0, err
		}, 2*time.Second).Should(BeTrue())
	})

	Describe("webhooks", func() {
		type provider struct {
			name    string
			headers func(body []byte) map[string]string
			payload func(url, commit string) map[string]any
		}
		hmacHex := func(key string, body []byte) string {
			m := hmac.New(sha256.New, []byte(key))
			m.Write(body)
			return hex.EncodeToString(m.Sum(nil))
		}
		providers := []provider{
			{"github", func(b []byte) map[string]string {
				return map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hmacHex("gh-secret", b)}
			}, func(url, commit string) map[string]any {
				return map[string]any{"ref": "refs/heads/main", "after": commit, "repository": map[string]any{"clone_url": url, "html_url": "https://example.invalid/x"}}
			}},
			{"gitlab", func(b []byte) map[string]string {
				return map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "gl-token"}
			}, func(url, commit string) map[string]any {
				return map[string]any{"object_kind": "push", "ref": "refs/heads/main", "checkout_sha": commit, "project": map[string]any{"git_http_url": url}}
			}},
			{"gogs", func(b []byte) map[string]string {
				return map[string]string{"X-Gogs-Event": "push", "X-Gogs-Signature": hmacHex("gogs-secret", b)}
			}, func(url, commit string) map[string]any {
				return map[string]any{"ref": "refs/heads/main", "after": commit, "repository": map[string]any{"clone_url": url}}
			}},
			{"bitbucket", func(b []byte) map[string]string {
				return map[string]string{"X-Event-Key": "repo:push", "X-Hook-UUID": "bb-uuid"}
			}, func(url, commit string) map[string]any {
				return map[string]any{"push": map[string]any{"changes": []any{map[string]any{"new": map[string]any{
					"type": "branch", "name": "main", "target": map[string]any{"hash": commit}}}}},
					"repository": map[string]any{"links": map[string]any{"html": map[string]any{"href": url}}}}
			}},
			{"bitbucket-server", func(b []byte) map[string]string {
				return map[string]string{"X-Event-Key": "repo:refs_changed", "X-Hub-Signature": "sha256=" + hmacHex("bbs-secret", b)}
			}, func(url, commit string) map[string]any {
				return map[string]any{"eventKey": "repo:refs_changed", "changes": []any{map[string]any{"refId": "refs/heads/main", "toHash": commit}},
					"repository": map[string]any{"links": map[string]any{"clone": []any{map[string]any{"href": url, "name": "http"}}}}}
			}},
			{"azure-devops", func(b []byte) map[string]string {
				return map[string]string{"Authorization": basic("az-user", "az-pass")}
			}, func(url, commit string) map[string]any {
				return map[string]any{"eventType": "git.push", "resource": map[string]any{
					"refUpdates": []any{map[string]any{"name": "refs/heads/main", "newObjectId": commit}},
					"repository": map[string]any{"remoteUrl": url}}}
			}},
		}
		post := func(headers map[string]string, body []byte) int {
			req, err := http.NewRequest(http.MethodPost, webhookURL, bytes.NewReader(body))
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Content-Type", "application/json")
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, p := range providers {
			It("takes a "+p.name+" push within 2 seconds and refuses a bad signature with 401", func() {
				repo := "wh-" + p.name
				first := publish(repo, "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
				newGitRepo(repo, repo, func(s *fleet.GitRepoSpec) { s.DisablePolling, s.WebhookSecret = true, webhookSecret })
				// Without polling, the first commit is still fetched; the next one waits for a webhook.
				Eventually(func() string { return gitRepo(repo).Status.Commit }).Should(Equal(first))
				second := publish(repo, "main", map[string]string{"app/cm.yaml": configMap("app", "2")})
				Consistently(func() map[string]string { return bundlesOf(repo) }, 5*time.Second).Should(Equal(map[string]string{repo + "-app": first}),
					"more than two polling intervals pass without a look")

				body, _ := json.Marshal(p.payload(git.RepoURL(repo), second))
				bad := p.headers(body)
				secretHeader := map[string]string{"github": "X-Hub-Signature-256", "gitlab": "X-Gitlab-Token", "gogs": "X-Gogs-Signature",
					"bitbucket": "X-Hook-UUID", "bitbucket-server": "X-Hub-Signature", "azure-devops": "Authorization"}[p.name]
				bad[secretHeader] = map[bool]string{true: basic("az-user", "wrong"), false: bad[secretHeader][:len(bad[secretHeader])-1] + "x"}[p.name == "azure-devops"]
				Expect(post(bad, body)).To(Equal(http.StatusUnauthorized))
				Consistently(func() string { return gitRepo(repo).Status.WebhookCommit }, time.Second).Should(BeEmpty(), "a refused webhook changes nothing")

				Expect(post(p.headers(body), body)).To(Equal(http.StatusOK))
				Eventually(func() map[string]string { return bundlesOf(repo) }, 2*time.Second, 50*time.Millisecond).
					Should(Equal(map[string]string{repo + "-app": second}))
				Expect(gitRepo(repo).Status.WebhookCommit).To(Equal(second))
			})
		}

		It("runs the commit the branch points at, never one a signed payload names", func() {
			gh, repo := providers[0], "wh-steer"
			first := publish(repo, "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
			newGitRepo(repo, repo, func(s *fleet.GitRepoSpec) { s.DisablePolling, s.WebhookSecret = true, webhookSecret })
			Eventually(func() string { return gitRepo(repo).Status.Commit }).Should(Equal(first))
			second := publish(repo, "main", map[string]string{"app/cm.yaml": configMap("app", "2")})
			forged := strings.Repeat("ab", 20)
			body, _ := json.Marshal(gh.payload(git.RepoURL(repo), forged))
			Expect(post(gh.headers(body), body)).To(Equal(http.StatusOK))
			Eventually(func() map[string]string { return bundlesOf(repo) }).Should(Equal(map[string]string{repo + "-app": second}),
				"a made-up commit only made the controller look: it runs the branch's head")
			Eventually(func() string { return gitRepo(repo).Status.Commit }).Should(Equal(second), "the Bundles are written before the status")

			third := publish(repo, "main", map[string]string{"app/cm.yaml": configMap("app", "3")})
			body, _ = json.Marshal(gh.payload(git.RepoURL(repo), first))
			Expect(post(gh.headers(body), body)).To(Equal(http.StatusOK))
			Eventually(func() map[string]string { return bundlesOf(repo) }).Should(Equal(map[string]string{repo + "-app": third}),
				"a payload naming an older commit cannot pin the GitRepo to it")
		})

		It("takes a payload without a configured secret as a reason to poll, never as a commit", func() {
			repo := "wh-unsigned"
			first := publish(repo, "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
			newGitRepo(repo, repo, func(s *fleet.GitRepoSpec) { s.DisablePolling = true })
			Eventually(func() string { return gitRepo(repo).Status.Commit }).Should(Equal(first))
			second := publish(repo, "main", map[string]string{"app/cm.yaml": configMap("app", "2")})
			body, _ := json.Marshal(providers[0].payload(git.RepoURL(repo), strings.Repeat("cd", 20)))
			Expect(post(map[string]string{"X-GitHub-Event": "push"}, body)).To(Equal(http.StatusOK))
			Eventually(func() map[string]string { return bundlesOf(repo) }).Should(Equal(map[string]string{repo + "-app": second}))
			Expect(gitRepo(repo).Status.WebhookCommit).To(BeEmpty(), "an unverified payload records no commit")
		})
	})
})

func basic(user, pass string) string {
	req, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	req.SetBasicAuth(user, pass)
	return req.Header.Get("Authorization")
}

// viewerConfig is the credential of a ServiceAccount that may get and list GitRepos, Bundles and
// Clusters in ns, and nothing else.
func viewerConfig(ns string) *rest.Config {
	ctx := context.Background()
	_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{fleet.SchemeGroupVersion.Group}, Resources: []string{"gitrepos", "bundles", "clusters"}, Verbs: []string{"get", "list"}}}},
		metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "viewer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "viewer", Namespace: ns}}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "viewer", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	cfg := rest.AnonymousClientConfig(manager.RESTConfig())
	cfg.BearerToken = tr.Status.Token
	return cfg
}

var _ = Describe("a GitRepo with disablePolling", func() {
	It("fetches the first commit, and again when its spec changes or forceSyncGeneration rises", func() {
		repo := "no-polling"
		first := publish(repo, "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		newGitRepo(repo, repo, func(s *fleet.GitRepoSpec) { s.DisablePolling = true })
		Eventually(func() string { return gitRepo(repo).Status.Commit }).Should(Equal(first))
		Expect(bundlesOf(repo)).To(Equal(map[string]string{repo + "-app": first}))

		second := publish(repo, "main", map[string]string{"app/cm.yaml": configMap("app", "2")})
		Consistently(func() string { return gitRepo(repo).Status.Commit }, 5*time.Second).Should(Equal(first),
			"more than two polling intervals pass without a look")
		Expect(testenv.UpdateGitRepo(api, fleet.DefaultNamespace, repo, func(gr *fleet.GitRepo) { gr.Spec.ForceSyncGeneration++ })).To(Succeed())
		Eventually(func() string { return gitRepo(repo).Status.Commit }).Should(Equal(second))

		third := publish(repo, "main", map[string]string{"app/cm.yaml": configMap("app", "3")})
		Expect(testenv.UpdateGitRepo(api, fleet.DefaultNamespace, repo, func(gr *fleet.GitRepo) {
			gr.Spec.Paths = []string{"app"}
		})).To(Succeed())
		Eventually(func() string { return gitRepo(repo).Status.Commit }).Should(Equal(third))
	})
})

var _ = Describe("a GitRepo listing its bundles (spec.bundles)", func() {
	It("makes Bundles of the listed folders with their options files only, and names a missing folder", func() {
		commit := publish("listed", "main", map[string]string{
			"a/cm.yaml":    configMap("a", "1"),
			"b/cm.yaml":    configMap("b", "1"),
			"b/prod.yaml":  "defaultNamespace: b-prod\n",
			"b/fleet.yaml": "defaultNamespace: b\n",
			"c/cm.yaml":    configMap("c", "1"),
		})
		newGitRepo("listed", "listed", func(s *fleet.GitRepoSpec) {
			s.Bundles = []fleet.BundlePath{{Base: "a"}, {Base: "b", Options: "prod.yaml"}}
		})
		Eventually(func() map[string]string { return bundlesOf("listed") }).Should(Equal(map[string]string{
			"listed-a": commit, "listed-b-prod": commit}), "folder c is not listed, nor b's fleet.yaml")
		b, err := api.Bundle().Get(fleet.DefaultNamespace, "listed-b-prod", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Spec.DefaultNamespace).To(Equal("b-prod"), "the options file listed")

		newGitRepo("listed-missing", "listed", func(s *fleet.GitRepoSpec) {
			s.Bundles = []fleet.BundlePath{{Base: "a"}, {Base: "nowhere"}}
		})
		Eventually(func(g Gomega) {
			s, msg := cond(gitRepo("listed-missing"), "Stalled")
			g.Expect(s).To(Equal(corev1.ConditionTrue))
			g.Expect(msg).To(ContainSubstring(`"nowhere"`))
		}).Should(Succeed())
		Expect(bundlesOf("listed-missing")).To(BeEmpty(), "nothing is written")
	})
})
