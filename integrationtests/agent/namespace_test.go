package agent_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
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

	It("does not create the namespace when createNamespace is false, and deploys once it exists", func(ctx context.Context) {
		name, ns := unique("nocreate"), unique("absent-ns")
		no := false
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, CreateNamespace: &no},
			Resources:               []fleet.BundleResource{res("cm.yaml", configMap("waiting", "k", "v"))},
		})
		Eventually(func(g Gomega) {
			b := bd(name)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Status.Display.State).To(Equal(string(fleet.ErrApplied)))
			g.Expect(b.Status.Display.Deployed).To(ContainSubstring("createNamespace is false"))
		}).Should(Succeed())
		_, err := local.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		Expect(err).To(HaveOccurred(), "the namespace was not created")

		_, err = local.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		updateBundle(name, func(b *fleet.Bundle) { b.Spec.ForceSyncGeneration++ })
		readyAndCurrent(name)
		Expect(cmData(ns, "waiting")()).To(HaveKeyWithValue("k", "v"))
	})

	It("puts every object into the bundle's namespace, refuses cluster-scoped ones there, and keeps CRDs when the bundle goes", func(ctx context.Context) {
		name, ns := unique("forced"), unique("forced-ns")
		crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.` + ns + `.example.com}
spec:
  group: ` + ns + `.example.com
  names: {kind: Gadget, plural: gadgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{TargetNamespace: ns},
			Resources: []fleet.BundleResource{res("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: escapee\n  namespace: kube-system\ndata: {k: v}\n"),
				res("crd.yaml", crd)},
		})
		Eventually(func(g Gomega) {
			b := bd(name)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Status.Display.Deployed).To(ContainSubstring("is cluster-scoped"))
		}).Should(Succeed())
		Expect(cmData(metav1.NamespaceSystem, "escapee")()).To(BeNil())

		// Without the namespace option the same CRD is installed, and kept when the bundle goes.
		kept := unique("kept")
		newBundle(kept, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources:               []fleet.BundleResource{res("crd.yaml", crd)},
		})
		readyAndCurrent(kept)
		updateBundle(name, func(b *fleet.Bundle) { b.Spec.Resources = b.Spec.Resources[:1] })
		readyAndCurrent(name)
		Expect(cmData(ns, "escapee")()).To(HaveKeyWithValue("k", "v"), "forced into the bundle's namespace")
		Expect(cmData(metav1.NamespaceSystem, "escapee")()).To(BeNil())

		Expect(api.Bundle().Delete(fleet.DefaultNamespace, kept, nil)).To(Succeed())
		Eventually(func() bool { return bd(kept) == nil }).Should(BeTrue())
		Eventually(func() ([]string, error) {
			rels, err := local.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + kept})
			if err != nil {
				return nil, err
			}
			var out []string
			for _, r := range rels.Items {
				out = append(out, r.Name)
			}
			return out, nil
		}).Should(BeEmpty(), "the release is uninstalled")
		apiext, err := apiextensionsclient.NewForConfig(downstream.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		_, err = apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "gadgets."+ns+".example.com", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the CRD (and every Gadget) outlives the bundle")
	})
})
