package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	wcondition "github.com/rancher/wrangler/v3/pkg/condition"
	"helm.sh/helm/v3/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	"github.com/fleetgo/fleet/internal/rancherca"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// chartVersion writes a chart "web" of the given version, whose ConfigMap says the version, and
// adds it to the repository. It returns the package's file name.
func chartVersion(repo *localserver.ChartRepo, version string) string {
	dir := GinkgoT().TempDir()
	for name, content := range map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: web\nversion: " + version + "\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: helmop-web\ndata:\n  chart: \"" + version +
			"\"\n  replicas: \"{{ .Values.replicas }}\"\n",
		"values.yaml": "replicas: 1\n",
	} {
		Expect(os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)).To(Succeed())
	}
	pkg, err := repo.AddChart(dir)
	Expect(err).NotTo(HaveOccurred())
	return pkg
}

func helmOp(name string) *fleet.HelmOp {
	op, err := api.HelmOp().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	return op
}

func helmOpCondition(name, t string) (corev1.ConditionStatus, string) {
	c := fleet.FindCondition(helmOp(name).Status.Conditions, wcondition.Cond(t))
	if c == nil {
		return "", ""
	}
	return c.Status, c.Message
}

var _ = Describe("HelmOps", Ordered, func() {
	var repo *localserver.ChartRepo
	BeforeAll(func(ctx context.Context) {
		var err error
		repo, err = localserver.StartChartRepo(filepath.Join(GinkgoT().TempDir(), "charts"), localserver.BasicAuth{Username: "charts", Password: "chart-pass"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(repo.Close)
		chartVersion(repo, "1.0.0")
		kube, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "chart-auth", Namespace: fleet.DefaultNamespace},
			StringData: map[string]string{"username": "charts", "password": "chart-pass"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	})

	It("deploys the newest chart version in range from a Helm repository with basic auth, and rolls a new one out without a commit", func() {
		_, err := api.HelmOp().Create(&fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: fleet.DefaultNamespace},
			Spec: fleet.HelmOpSpec{
				BundleSpec: fleet.BundleSpec{
					BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "helmop",
						Helm: &fleet.HelmOptions{Repo: repo.URL, Chart: "web", Version: ">=1.0.0 <2.0.0",
							Values: &fleet.GenericMap{Data: map[string]any{"replicas": 2}}}},
					Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}}},
				},
				PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
				HelmSecretName:  "chart-auth",
			}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(cmData("helmop", "helmop-web"), 90*time.Second).Should(Equal(map[string]string{"chart": "1.0.0", "replicas": "2"}))
		Eventually(func(g Gomega) {
			op := helmOp("web")
			g.Expect(op.Status.Version).To(Equal("1.0.0"))
			g.Expect(op.Status.Display.ReadyBundleDeployments).To(Equal("1/1"))
			g.Expect(op.Status.ReadyClusters).To(Equal(1))
			g.Expect(op.Status.Resources).To(ContainElement(And(HaveField("Kind", "ConfigMap"), HaveField("Name", "helmop-web"),
				HaveField("State", "Ready"))))
			for _, t := range []string{"Accepted", "Polled", "Ready"} {
				s, msg := helmOpCondition("web", t)
				g.Expect(s).To(Equal(corev1.ConditionTrue), "%s: %s", t, msg)
			}
			// Right after the outage spec the manager's watches may still be listing again (client-go
			// backs off up to a minute): allow three, as the specs after it do.
		}, 3*time.Minute).Should(Succeed())
		b, err := api.Bundle().Get(fleet.DefaultNamespace, "web", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Labels).To(HaveKeyWithValue(fleet.HelmNameLabel, "web"))
		Expect(b.Spec.Resources).To(BeEmpty(), "agents fetch the chart themselves")
		Expect(b.Spec.HelmOpOptions.SecretName).To(Equal("chart-auth"))

		chartVersion(repo, "1.1.0")
		chartVersion(repo, "2.0.0")
		Eventually(cmData("helmop", "helmop-web"), 90*time.Second).Should(Equal(map[string]string{"chart": "1.1.0", "replicas": "2"}))
		Eventually(func() string { return helmOp("web").Status.Version }).Should(Equal("1.1.0"))
	})

	It("keeps what is deployed when no version matches or the repository is unreachable, and says so", func() {
		op := helmOp("web")
		op.Spec.Helm.Version = ">=5.0.0"
		_, err := api.HelmOp().Update(op)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			s, msg := helmOpCondition("web", "Polled")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
			g.Expect(msg).To(ContainSubstring(">=5.0.0"))
		}).Should(Succeed())
		Consistently(cmData("helmop", "helmop-web"), 3*time.Second).Should(Equal(map[string]string{"chart": "1.1.0", "replicas": "2"}))
		Expect(helmOp("web").Status.Version).To(Equal("1.1.0"))

		_, err = api.HelmOp().Create(&fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "unreachable", Namespace: fleet.DefaultNamespace},
			Spec: fleet.HelmOpSpec{BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				Helm: &fleet.HelmOptions{Repo: "http://127.0.0.1:1/charts", Chart: "web"}}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			s, msg := helmOpCondition("unreachable", "Polled")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
			g.Expect(msg).To(ContainSubstring("127.0.0.1:1"))
			r, _ := helmOpCondition("unreachable", "Ready")
			g.Expect(r).To(Equal(corev1.ConditionFalse))
		}).Should(Succeed())
		_, err = api.Bundle().Get(fleet.DefaultNamespace, "unreachable", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no version, no Bundle")
		// Retried with backoff (5 s, then 10 s...), not in a loop: over 4 s the poll time moves
		// at most once (it has a resolution of a second).
		seen := map[string]bool{}
		Consistently(func() int {
			seen[helmOp("unreachable").Status.LastPollingTime.String()] = true
			return len(seen)
		}, 4*time.Second, 200*time.Millisecond).Should(BeNumerically("<=", 2))

		_, err = api.HelmOp().Create(&fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "bad-range", Namespace: fleet.DefaultNamespace},
			Spec: fleet.HelmOpSpec{BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				Helm: &fleet.HelmOptions{Repo: repo.URL, Chart: "web", Version: "one point oh"}}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			s, msg := helmOpCondition("bad-range", "Accepted")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
			g.Expect(msg).To(ContainSubstring("spec.helm.version"))
		}).Should(Succeed())
	})

	It("deploys from an OCI registry, following new tags, and from a chart URL", func(ctx context.Context) {
		reg, err := localserver.StartOCIRegistry(ctx, GinkgoT().TempDir(), localserver.BasicAuth{Username: "charts", Password: "chart-pass"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(reg.Close)
		rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptBasicAuth("charts", "chart-pass"))
		Expect(err).NotTo(HaveOccurred())
		push := func(version string) {
			data, err := os.ReadFile(filepath.Join(repo.Dir, chartVersion(repo, version)))
			Expect(err).NotTo(HaveOccurred())
			_, err = rc.Push(data, reg.Host+"/charts/web:"+version)
			Expect(err).NotTo(HaveOccurred())
		}
		push("3.0.0")
		newOp := func(name, ns string, h *fleet.HelmOptions) {
			_, err := api.HelmOp().Create(&fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace},
				Spec: fleet.HelmOpSpec{
					BundleSpec: fleet.BundleSpec{
						BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: h},
						Targets:                 []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}}},
					},
					PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
					HelmSecretName:  "chart-auth",
					// The local registry speaks plain HTTP, which an oci:// source is reached
					// over only with TLS checks off.
					InsecureSkipTLSVerify: true,
				}})
			Expect(err).NotTo(HaveOccurred())
		}
		newOp("oci", "helmop-oci", &fleet.HelmOptions{Chart: "oci://" + reg.Host + "/charts/web", Version: ">=3.0.0", ReleaseName: "web-oci"})
		Eventually(cmData("helmop-oci", "helmop-web"), 90*time.Second).Should(HaveKeyWithValue("chart", "3.0.0"))
		push("3.1.0")
		Eventually(cmData("helmop-oci", "helmop-web"), 90*time.Second).Should(HaveKeyWithValue("chart", "3.1.0"))
		Eventually(func() string { return helmOp("oci").Status.Version }).Should(Equal("3.1.0"))

		// The form Fleet and the Rancher UI write: the reference in helm.repo, no helm.chart.
		newOp("oci-repo", "helmop-oci-repo", &fleet.HelmOptions{Repo: "oci://" + reg.Host + "/charts/web", Version: "3.0.0", ReleaseName: "web-oci-repo"})
		Eventually(cmData("helmop-oci-repo", "helmop-web"), 90*time.Second).Should(HaveKeyWithValue("chart", "3.0.0"))

		// 1.0.0 is the repository's from the start (BeforeAll): this spec runs on its own too.
		newOp("url", "helmop-url", &fleet.HelmOptions{Chart: repo.URL + "/web-1.0.0.tgz", ReleaseName: "web-url"})
		Eventually(cmData("helmop-url", "helmop-web"), 90*time.Second).Should(HaveKeyWithValue("chart", "1.0.0"))
		Eventually(func() string { return helmOp("url").Status.Version }).Should(Equal("1.0.0"))
	})

	It("trusts an HTTPS chart repository through the CA bundle of helmSecretName, and only then", func(ctx context.Context) {
		tlsRepo, ca, err := localserver.StartTLSChartRepo(filepath.Join(GinkgoT().TempDir(), "tls"), localserver.BasicAuth{Username: "charts", Password: "chart-pass"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(tlsRepo.Close)
		chartVersion(tlsRepo, "4.0.0")
		kube, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())
		for name, data := range map[string]map[string][]byte{
			"chart-tls":      {"username": []byte("charts"), "password": []byte("chart-pass"), "cacerts": ca},
			"chart-tls-noca": {"username": []byte("charts"), "password": []byte("chart-pass")},
		} {
			_, err = kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace}, Data: data}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		for name, secret := range map[string]string{"tls": "chart-tls", "tls-noca": "chart-tls-noca"} {
			_, err = api.HelmOp().Create(&fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace},
				Spec: fleet.HelmOpSpec{
					BundleSpec: fleet.BundleSpec{
						BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "helmop-" + name,
							Helm: &fleet.HelmOptions{Repo: tlsRepo.URL, Chart: "web", ReleaseName: "web-" + name}},
						Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}}},
					},
					HelmSecretName: secret,
				}})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { Expect(api.HelmOp().Delete(fleet.DefaultNamespace, name, nil)).To(Succeed()) })
		}
		Eventually(cmData("helmop-tls", "helmop-web"), 90*time.Second).Should(HaveKeyWithValue("chart", "4.0.0"))
		Eventually(func(g Gomega) {
			s, msg := helmOpCondition("tls-noca", "Polled")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
			g.Expect(msg).To(ContainSubstring("certificate"))
		}).Should(Succeed())

		// Without a CA of its own, it trusts Rancher's CA bundle, as on Fleet: the manager to
		// poll, the agent to fetch.
		testenv.RancherCA(ctx, kube, rancherca.SecretExtra, rancherca.KeyExtra, ca)
		Eventually(cmData("helmop-tls-noca", "helmop-web"), 2*time.Minute).Should(HaveKeyWithValue("chart", "4.0.0"))
	})

	It("removes the Bundle, and what it deployed, with the HelmOp", func() {
		Expect(api.HelmOp().Delete(fleet.DefaultNamespace, "web", &metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := api.Bundle().Get(fleet.DefaultNamespace, "web", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
		Eventually(cmData("helmop", "helmop-web"), 60*time.Second).Should(BeNil())
	})
})
