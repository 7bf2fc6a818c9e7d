package agent_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("allowedTargetNamespaceSelector", func() {
	It("deploys only into an existing namespace whose labels match, and says why it does not", func(ctx context.Context) {
		name, ns := unique("restricted"), unique("tenant-ns")
		_, err := local.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"tenant": "b"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns,
				AllowedTargetNamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}},
				// Labels the bundle would put on its namespace do not let it in.
				NamespaceLabels: map[string]string{"tenant": "a"}},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("guarded", "k", "v"))},
		})
		Eventually(func(g Gomega) {
			b := bd(name)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Status.Display.State).To(Equal(string(fleet.ErrApplied)))
			g.Expect(b.Status.Display.Deployed).To(ContainSubstring("namespace " + ns + " is not allowed"))
		}).Should(Succeed())
		Expect(cmData(ns, "guarded")()).To(BeNil(), "nothing was deployed")
		n, err := local.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Labels).To(HaveKeyWithValue("tenant", "b"), "the namespace's labels are untouched")

		// An administrator of the downstream cluster admits the namespace.
		n.Labels["tenant"] = "a"
		_, err = local.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		updateBundle(name, func(b *fleet.Bundle) { b.Spec.ForceSyncGeneration++ })
		readyAndCurrent(name)
		Expect(cmData(ns, "guarded")()).To(HaveKeyWithValue("k", "v"))
	})
})
