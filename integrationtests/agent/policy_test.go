package agent_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// newPolicy creates a Policy in fleet-default and deletes it after the spec.
func newPolicy(p *fleet.Policy) {
	p.Namespace = fleet.DefaultNamespace
	_, err := api.Policy().Create(p)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(api.Policy().Delete(fleet.DefaultNamespace, p.Name, nil)).To(Succeed()) })
}

func bundleCondition(name, t string) func() string {
	return func() string {
		b, err := api.Bundle().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, c := range b.Status.Conditions {
			if c.Type == t {
				return string(c.Status) + ": " + c.Message
			}
		}
		return ""
	}
}

var _ = Describe("Policies", func() {
	It("refuse a Bundle without the required ServiceAccount, keep what it deployed, and turn namespace creation off", func() {
		name := unique("policy")
		newBundle(name, fleet.BundleSpec{Resources: []fleet.BundleResource{res("cm.yaml", configMap(name, "v", "1"))}})
		Eventually(state(name), 60*time.Second).Should(Equal(string(fleet.Ready)))

		deny := false
		newPolicy(&fleet.Policy{ObjectMeta: metav1.ObjectMeta{Name: "strict"}, RequireServiceAccount: true, AllowNamespaceCreation: &deny})
		Eventually(bundleCondition(name, "Accepted")).Should(Equal("False: serviceAccount is empty, but a Policy of the namespace has requireServiceAccount"))
		updateBundle(name, func(b *fleet.Bundle) {
			b.Spec.Resources = []fleet.BundleResource{res("cm.yaml", configMap(name, "v", "2"))}
		})
		Consistently(cmData("default", name), 3*time.Second).Should(HaveKeyWithValue("v", "1"), "a refused Bundle changes nothing deployed")
		Expect(bd(name)).NotTo(BeNil(), "nor removes it")

		// Allowed once it names a ServiceAccount: its deployment may not create namespaces.
		updateBundle(name, func(b *fleet.Bundle) { b.Spec.ServiceAccount = "deployer" })
		Eventually(bundleCondition(name, "Accepted")).Should(Equal("True: "))
		Eventually(func(g Gomega) {
			d := bd(name)
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Spec.Options.ServiceAccount).To(Equal("deployer"))
			g.Expect(d.Spec.Options.CreateNamespace).To(HaveValue(BeFalse()))
		}).Should(Succeed())
	})

	It("refuse a HelmOp whose chart no pattern allows, naming the rule", func() {
		newPolicy(&fleet.Policy{ObjectMeta: metav1.ObjectMeta{Name: "charts"},
			HelmOp: &fleet.HelmOpPolicy{AllowedChartPatterns: []string{"^approved-"}}})
		_, err := api.HelmOp().Create(&fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "unapproved", Namespace: fleet.DefaultNamespace},
			Spec: fleet.HelmOpSpec{BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				Helm: &fleet.HelmOptions{Repo: "http://127.0.0.1:1/charts", Chart: "miner"}}}}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(api.HelmOp().Delete(fleet.DefaultNamespace, "unapproved", nil)).To(Succeed()) })
		Eventually(func(g Gomega) {
			s, msg := helmOpCondition("unapproved", "Accepted")
			g.Expect(s).To(Equal(corev1.ConditionFalse))
			g.Expect(msg).To(ContainSubstring("helmOp.allowedChartPatterns"))
		}).Should(Succeed())
	})
})
