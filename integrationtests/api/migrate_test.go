package api_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("fleet migrate gitrepo-helm-url-regex", func() {
	It("gives GitRepos with Helm credentials and no pattern one from their Bundles' chart repositories, once", func(ctx context.Context) {
		kube, err := kubernetes.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		const ns, system = "migrated-helm", "migrate-system"
		for _, n := range []string{ns, system} {
			_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		for name, spec := range map[string]fleet.GitRepoSpec{
			"with-secret": {Repo: "https://git.example/a", HelmSecretName: "charts"},
			"no-bundles":  {Repo: "https://git.example/b", HelmSecretNameForPaths: "paths"},
			"has-regex":   {Repo: "https://git.example/c", HelmSecretName: "charts", HelmRepoURLRegex: "^https://mine/"},
			"no-secret":   {Repo: "https://git.example/d"},
		} {
			_, err := clients.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec})
			Expect(err).NotTo(HaveOccurred())
			_, err = clients.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name + "-app", Namespace: ns,
				Labels: map[string]string{fleet.RepoLabel: name}},
				Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
					Helm: &fleet.HelmOptions{Repo: map[bool]string{true: "", false: "https://charts.example.com/stable"}[name == "no-bundles"], Chart: "web"}}}})
			Expect(err).NotTo(HaveOccurred())
		}

		out, err := testenv.FleetCLI("migrate", "gitrepo-helm-url-regex", "--kubeconfig", cluster.Kubeconfig, "--system-namespace", system)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("gitrepo " + ns + "/no-bundles: no chart repository in its Bundles"))
		get := func(name string) *fleet.GitRepo {
			gr, err := clients.GitRepo().Get(ns, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return gr
		}
		gr := get("with-secret")
		Expect(gr.Spec.HelmRepoURLRegex).To(Equal(`^https://charts\.example\.com/`))
		Expect(gr.Annotations).To(HaveKeyWithValue("fleet.cattle.io/helm-regex-auto-migrated", "true"))
		Expect(get("no-bundles").Spec.HelmRepoURLRegex).To(BeEmpty())
		Expect(get("has-regex").Spec.HelmRepoURLRegex).To(Equal("^https://mine/"))
		Expect(get("no-secret").Spec.HelmRepoURLRegex).To(BeEmpty())

		By("once: a second run changes nothing")
		gr.Spec.HelmRepoURLRegex = ""
		_, err = clients.GitRepo().Update(gr)
		Expect(err).NotTo(HaveOccurred())
		out, err = testenv.FleetCLI("migrate", "gitrepo-helm-url-regex", "--kubeconfig", cluster.Kubeconfig, "--system-namespace", system)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("already done"))
		Expect(get("with-secret").Spec.HelmRepoURLRegex).To(BeEmpty())
	})
})
