package gitrepo_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// copyCredentials copies the git credentials Secret into namespace ns.
func copyCredentials(ctx context.Context, ns string) {
	secret, err := kube.CoreV1().Secrets(fleet.DefaultNamespace).Get(ctx, credentials, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: credentials, Namespace: ns},
		Type: secret.Type, Data: secret.Data}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("GitRepoRestriction", func() {
	It("binds the repository: fleet.yaml cannot pick another serviceAccount or widen the namespace selector", func(ctx context.Context) {
		const ns = "tenant-sa"
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.GitRepoRestriction().Create(&fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: ns},
			DefaultServiceAccount: "team", AllowedServiceAccounts: []string{"team"},
			AllowedTargetNamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "team"}}})
		Expect(err).NotTo(HaveOccurred())
		copyCredentials(ctx, ns)
		// The repository asks to deploy as the agent's own identity, everywhere and per target.
		commit := publish("escalate", "main", map[string]string{
			"app/cm.yaml": configMap("app", "1"),
			"app/fleet.yaml": "serviceAccount: fleet-agent\n" +
				"allowedTargetNamespaceSelector:\n  matchLabels: {}\n" +
				"targetCustomizations:\n- name: all\n  clusterSelector: {}\n  serviceAccount: fleet-agent\n" +
				"  allowedTargetNamespaceSelector:\n    matchExpressions: [{key: tenant, operator: Exists}]\n",
		})
		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "escalate", Namespace: ns},
			Spec: fleet.GitRepoSpec{Repo: git.RepoURL("escalate"), Branch: "main", ClientSecretName: credentials,
				PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			b, err := api.Bundle().Get(ns, "escalate-app", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Labels).To(HaveKeyWithValue(fleet.CommitLabel, commit))
			g.Expect(b.Spec.ServiceAccount).To(Equal("team"))
			g.Expect(b.Spec.AllowedTargetNamespaceSelector).To(Equal(&metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "team"}}))
			g.Expect(b.Spec.Targets).NotTo(BeEmpty())
			for _, t := range b.Spec.Targets {
				g.Expect(t.ServiceAccount).To(BeEmpty(), "target %s", t.Name)
				g.Expect(t.AllowedTargetNamespaceSelector).To(BeNil(), "target %s", t.Name)
			}
		}).Should(Succeed())
	})

	It("follows the namespace's Policies: their defaults fill the spec, and a repository no pattern allows is refused", func(ctx context.Context) {
		const ns = "tenant-policy"
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Policy().Create(&fleet.Policy{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: ns},
			AllowedServiceAccounts: []string{"team"},
			GitRepo:                &fleet.GitRepoPolicy{DefaultServiceAccount: "team", AllowedRepoPatterns: []string{"/allowed-[a-z]+"}}})
		Expect(err).NotTo(HaveOccurred())
		copyCredentials(ctx, ns)
		commit := publish("allowed-repo", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		publish("other-repo", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		publish("allowed-root", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		for name, sa := range map[string]string{"allowed-repo": "", "other-repo": "", "allowed-root": "root"} {
			_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: fleet.GitRepoSpec{Repo: git.RepoURL(name), Branch: "main", ClientSecretName: credentials, ServiceAccount: sa,
					PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func() string {
			gr, err := api.GitRepo().Get(ns, "allowed-repo", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return gr.Spec.ServiceAccount
		}).Should(Equal("team"), "as on Fleet, the Policy's default is written into the GitRepo")
		Eventually(func(g Gomega) {
			b, err := api.Bundle().Get(ns, "allowed-repo-app", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Labels).To(HaveKeyWithValue(fleet.CommitLabel, commit))
			g.Expect(b.Spec.ServiceAccount).To(Equal("team"), "the Policy's default serviceAccount")
		}, 60*time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(ns, "other-repo", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionAccepted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Message).To(HavePrefix("disallowed repo " + git.RepoURL("other-repo") + ": "))
			g.Expect(c.Message).To(ContainSubstring("gitRepo.allowedRepoPatterns"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(ns, "allowed-root", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionAccepted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(HavePrefix("disallowed serviceAccount root: "), "Fleet's words")
		}).Should(Succeed())
		_, err = api.Bundle().Get(ns, "other-repo-app", metav1.GetOptions{})
		Expect(err).To(HaveOccurred(), "a refused GitRepo writes no Bundle")
	})
})

var _ = Describe("GitRepoRestriction on Bundles written without a GitRepo", func() {
	It("refuses a Bundle that names a service account or namespace the restriction does not allow, and fills the default", func(ctx context.Context) {
		const ns = "tenant-direct"
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.GitRepoRestriction().Create(&fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: ns},
			DefaultServiceAccount: "team", AllowedServiceAccounts: []string{"team"}, AllowedTargetNamespaces: []string{"team-apps"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns}})
		Expect(err).NotTo(HaveOccurred())
		var clusterNS string
		Eventually(func() string {
			c, _ := api.Cluster().Get(ns, "edge", metav1.GetOptions{})
			if c != nil {
				clusterNS = c.Status.Namespace
			}
			return clusterNS
		}).ShouldNot(BeEmpty())
		bundle := func(name, sa, targetNS string) {
			_, err := api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{ServiceAccount: sa, TargetNamespace: targetNS},
					Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: configMap(name, "1")}},
					Targets:   []fleet.BundleTarget{{ClusterName: "edge"}}}})
			Expect(err).NotTo(HaveOccurred())
		}
		refused := func(name, want string) {
			Eventually(func(g Gomega) {
				b, err := api.Bundle().Get(ns, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionAccepted)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
				g.Expect(c.Reason).To(Equal("Restricted"))
				g.Expect(c.Message).To(ContainSubstring("GitRepoRestriction team"))
				g.Expect(c.Message).To(ContainSubstring(want))
			}).Should(Succeed(), name)
			_, err := api.BundleDeployment().Get(clusterNS, name, metav1.GetOptions{})
			Expect(err).To(HaveOccurred(), "a refused Bundle is not deployed")
		}
		bundle("as-agent", "fleet-agent", "team-apps")
		refused("as-agent", `disallowed serviceAccount fleet-agent: `)
		bundle("elsewhere", "", "kube-system")
		refused("elsewhere", `disallowed namespace kube-system: `)

		bundle("allowed", "", "team-apps")
		Eventually(func(g Gomega) {
			bd, err := api.BundleDeployment().Get(clusterNS, "allowed", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bd.Spec.Options.ServiceAccount).To(Equal("team"), "the restriction's default")
		}).Should(Succeed())
	})
})
