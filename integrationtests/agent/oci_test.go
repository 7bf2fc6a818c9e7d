package agent_test

import (
	"context"
	"io"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/bundlebuild"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	"github.com/fleetgo/fleet/internal/ocistorage"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Fleet's OCI content storage: the Bundle holds no resources, the registry does; the agent
// pulls them with the registry's agent credentials, which the manager copies next to the
// BundleDeployment.
var _ = Describe("a Bundle whose contents an OCI registry keeps", func() {
	It("is written without resources, and the agent deploys what it pulls from the registry", func(ctx context.Context) {
		reg, err := localserver.StartOCIRegistry(ctx, GinkgoT().TempDir(), localserver.BasicAuth{Username: "fleet", Password: "push-pass"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(reg.Close)
		st := ocistorage.Storage{Reference: reg.Host + "/fleet/contents", Username: "fleet", Password: "push-pass", BasicHTTP: true}
		name, ns := unique("oci"), unique("oci-ns")
		managerKube, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())

		// The bundle folder and the targets a GitRepo would give it.
		root := GinkgoT().TempDir()
		Expect(os.MkdirAll(filepath.Join(root, "app"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(root, "app", "fleet.yaml"), []byte("defaultNamespace: "+ns+"\n"), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(root, "app", "cm.yaml"), []byte(configMap("from-registry", "k", "v")), 0o644)).To(Succeed())
		targets, err := yaml.Marshal(bundlebuild.TargetsFile{Targets: []fleet.BundleTarget{{ClusterName: clusterName}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(root, "targets.yaml"), targets, 0o644)).To(Succeed())

		// The namespace's storage Secret, as the bundle controller reads it.
		data := map[string][]byte{ocistorage.KeyReference: []byte(st.Reference), ocistorage.KeyUsername: []byte("fleet"),
			ocistorage.KeyPassword: []byte("push-pass"), ocistorage.KeyBasicHTTP: []byte("true")}
		_, err = managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ocistorage.DefaultSecretName}, Type: ocistorage.SecretType, Data: data}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			_ = managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Delete(context.Background(), ocistorage.DefaultSecretName, metav1.DeleteOptions{})
		})

		o := bundlebuild.Options{Root: root, Paths: []string{"app"}, TargetsFile: filepath.Join(root, "targets.yaml"), OCI: &st}
		o.Name, o.Namespace = name, fleet.DefaultNamespace
		Expect(bundlebuild.Run(ctx, o, api.Bundle(), io.Discard)).To(Succeed())
		DeferCleanup(func() { _ = api.Bundle().Delete(fleet.DefaultNamespace, name+"-app", nil) })

		b, err := api.Bundle().Get(fleet.DefaultNamespace, name+"-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Spec.Resources).To(BeEmpty(), "the registry holds the resources")
		Expect(b.Spec.ContentsID).To(HavePrefix("s-"))
		pulled, err := st.Pull(ctx, b.Spec.ContentsID)
		Expect(err).NotTo(HaveOccurred())
		Expect(pulled).NotTo(BeEmpty())

		got := readyAndCurrent(name + "-app")
		Expect(got.Spec.OCIContents).To(BeTrue())
		Expect(cmData(ns, "from-registry")()).To(HaveKeyWithValue("k", "v"))
		copyOf, err := managerKube.CoreV1().Secrets(got.Namespace).Get(ctx, ocistorage.AgentSecretName(got.Name), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(copyOf.OwnerReferences).To(ConsistOf(HaveField("UID", got.UID)), "it goes with the BundleDeployment")
		Expect(copyOf.Labels).To(HaveKeyWithValue(fleet.ManagedLabel, "true"))
		_, err = api.Content().Get(b.Spec.ContentsID, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Content is written")
		Eventually(func() string {
			b, err := api.Bundle().Get(fleet.DefaultNamespace, name+"-app", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return b.Status.OCIReference
		}).Should(Equal(st.Ref(b.Spec.ContentsID)))
	})
})
