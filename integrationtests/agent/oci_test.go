package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
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
		st := startStorage(ctx)
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

		storageSecret(ctx, managerKube, st)

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

	// A Bundle moved from Fleet whose contents Fleet pushed: Fleet's layout (a repository per
	// content ID under the reference, tag latest, one layer of the manifest's JSON) is read when
	// the registry has none of ours for the ID.
	It("deploys contents Fleet pushed, in Fleet's layout", func(ctx context.Context) {
		st := startStorage(ctx)
		name, ns := unique("fleet-pushed"), unique("fleet-pushed-ns")
		managerKube, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())

		manifest, err := json.Marshal(map[string]any{"resources": []fleet.BundleResource{{Name: "cm.yaml", Content: configMap("pushed-by-fleet", "k", "fleet")}}})
		Expect(err).NotTo(HaveOccurred())
		sum := sha256.Sum256(manifest)
		id := ("s-" + hex.EncodeToString(sum[:]))[:63]
		pushAsFleet(ctx, st, id, manifest)

		storageSecret(ctx, managerKube, st)

		bundleAsFleetWrites(name, ns, id)

		got := readyAndCurrent(name)
		Expect(got.Spec.OCIContents).To(BeTrue())
		Expect(cmData(ns, "pushed-by-fleet")()).To(HaveKeyWithValue("k", "fleet"))
	})

	// Whoever may push to the registry cannot swap what a Bundle deploys: contents in Fleet's
	// layout are checked against the content ID as ours are.
	It("refuses contents in Fleet's layout that are not the content ID's", func(ctx context.Context) {
		st := startStorage(ctx)
		name, ns := unique("fleet-swapped"), unique("fleet-swapped-ns")
		managerKube, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())
		manifestOf := func(cm string) []byte {
			m, err := json.Marshal(map[string]any{"resources": []fleet.BundleResource{{Name: "cm.yaml", Content: configMap(cm, "k", "v")}}})
			Expect(err).NotTo(HaveOccurred())
			return m
		}
		sum := sha256.Sum256(manifestOf("expected"))
		id := ("s-" + hex.EncodeToString(sum[:]))[:63]
		pushAsFleet(ctx, st, id, manifestOf("swapped-in"))
		storageSecret(ctx, managerKube, st)

		bundleAsFleetWrites(name, ns, id)

		Eventually(func(g Gomega) {
			b := bd(name)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("the registry holds"))))
		}).Should(Succeed())
		Expect(cmData(ns, "swapped-in")()).To(BeNil())
	})
})

// pushAsFleet pushes manifest as the contents of id the way Fleet does: repository
// <reference>/<id>, tag latest, an image manifest of artifact type application/fleet.manifest
// whose one layer (application/fleet.file, annotated with the ID) is the manifest's JSON.
func pushAsFleet(ctx context.Context, st ocistorage.Storage, id string, manifest []byte) {
	store := memory.New()
	layer := content.NewDescriptorFromBytes("application/fleet.file", manifest)
	layer.Annotations = map[string]string{"id": id}
	Expect(store.Push(ctx, layer, bytes.NewReader(manifest))).To(Succeed())
	desc, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, "application/fleet.manifest",
		oras.PackManifestOptions{Layers: []ocispec.Descriptor{layer}})
	Expect(err).NotTo(HaveOccurred())
	Expect(store.Tag(ctx, desc, "latest")).To(Succeed())
	repo, err := remote.NewRepository(st.Reference + "/" + id)
	Expect(err).NotTo(HaveOccurred())
	repo.PlainHTTP = true
	repo.Client = &auth.Client{Credential: auth.StaticCredential(repo.Reference.Registry, auth.Credential{Username: st.Username, Password: st.Password})}
	_, err = oras.Copy(ctx, store, "latest", repo, "latest", oras.DefaultCopyOptions)
	Expect(err).NotTo(HaveOccurred())
}

// startStorage starts a registry for the spec and returns it as the storage a Secret describes.
func startStorage(ctx context.Context) ocistorage.Storage {
	reg, err := localserver.StartOCIRegistry(ctx, GinkgoT().TempDir(), localserver.BasicAuth{Username: "fleet", Password: "push-pass"})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(reg.Close)
	return ocistorage.Storage{Reference: reg.Host + "/fleet/contents", Username: "fleet", Password: "push-pass", BasicHTTP: true}
}

// storageSecret writes the namespace's storage Secret, as the bundle controller reads it, for
// the spec's length.
func storageSecret(ctx context.Context, kube kubernetes.Interface, st ocistorage.Storage) {
	data := map[string][]byte{ocistorage.KeyReference: []byte(st.Reference), ocistorage.KeyUsername: []byte(st.Username),
		ocistorage.KeyPassword: []byte(st.Password), ocistorage.KeyBasicHTTP: []byte("true")}
	_, err := kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ocistorage.DefaultSecretName}, Type: ocistorage.SecretType, Data: data}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_ = kube.CoreV1().Secrets(fleet.DefaultNamespace).Delete(context.Background(), ocistorage.DefaultSecretName, metav1.DeleteOptions{})
	})
}

// bundleAsFleetWrites creates Bundle name as Fleet writes one whose contents a registry keeps:
// the contents ID, no resources; deleted after the spec.
func bundleAsFleetWrites(name, ns, id string) {
	_, err := api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace},
		Spec: fleet.BundleSpec{ContentsID: id, BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Targets: []fleet.BundleTarget{{ClusterName: clusterName}}}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = api.Bundle().Delete(fleet.DefaultNamespace, name, nil) })
}
