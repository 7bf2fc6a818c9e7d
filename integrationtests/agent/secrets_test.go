package agent_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"filippo.io/age"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/agent/sealkey"
	"github.com/fleetgo/fleet/internal/controller/bundle"
	"github.com/fleetgo/fleet/internal/sealing"
	"github.com/fleetgo/fleet/internal/sopsfile/sopstest"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// sopsKey gives the manager an age key for the namespace fleet-default's SOPS files, as an admin
// does, and returns its recipient.
func sopsKey(ctx context.Context) string {
	id, err := age.GenerateX25519Identity()
	Expect(err).NotTo(HaveOccurred())
	kube, err := manager.Clientset()
	Expect(err).NotTo(HaveOccurred())
	name := unique("sops-key")
	_, err = kube.CoreV1().Secrets("cattle-fleet-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{bundle.SOPSNamespacesAnnotation: fleet.DefaultNamespace}},
		Data: map[string][]byte{"team.agekey": []byte("# the team's key\n" + id.String() + "\n")}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_ = kube.CoreV1().Secrets("cattle-fleet-system").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return id.Recipient().String()
}

// served is where canary shows on the manager ("": nowhere).
func served(ctx context.Context, canary []byte) string {
	where, err := testenv.Served(ctx, manager, canary)
	Expect(err).NotTo(HaveOccurred())
	return where
}

// inEtcd is the first file of the manager's etcd data holding b ("": none).
func inEtcd(b []byte) string {
	where, err := testenv.InEtcd(manager, b)
	Expect(err).NotTo(HaveOccurred())
	return where
}

var _ = Describe("a bundle's SOPS-encrypted Secret", func() {
	It("is decrypted by the manager and sealed to this cluster's key: the Secret downstream holds the value, nothing of the manager's does", func(ctx context.Context) {
		recipient := sopsKey(ctx)
		nonce := make([]byte, 8)
		_, _ = rand.Read(nonce)
		canary := "canary-" + hex.EncodeToString(nonce)
		plain := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + canary + "\n  host: ${ .ClusterName }.db.example\n"
		enc := sopstest.Encrypt(GinkgoT(), "db.yaml", []byte(plain), recipient, nil)
		name := unique("sops")
		ns := unique("sops-ns")
		newBundle(name, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources: []fleet.BundleResource{res("db.yaml", string(enc)), res("cm.yaml", configMap("settings", "mode", "on"))}})
		b := readyAndCurrent(name)
		Expect(b.Spec.SealedFiles).To(HaveLen(1))
		Eventually(secretValue(ns, "db", "password")).Should(Equal(canary))
		s, err := local.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(s.Data["host"])).To(Equal(clusterName+".db.example"), "templated for the cluster inside the decrypted file")

		By("the canary is nowhere on the manager: no object it serves, no byte of its etcd")
		Expect(served(ctx, []byte(canary))).To(BeEmpty())
		Expect(inEtcd([]byte("password: ENC[AES256_GCM,"))).NotTo(BeEmpty(), "the scan reads what etcd holds: the Bundle's ciphertext")

		By("another cluster's key does not unseal this cluster's copy, nor does this one elsewhere")
		other, _, err := sealing.NewKey()
		Expect(err).NotTo(HaveOccurred())
		f := b.Spec.SealedFiles[0]
		_, err = sealing.Unseal(other, sealing.Binding(b.Namespace, b.Name, "db.yaml"), f.Sealed)
		Expect(err).To(HaveOccurred())

		By("the cluster's key rotated: the manager seals its copy again, to the new key")
		stopAgent()
		Expect(local.CoreV1().Secrets(agentNS).Delete(ctx, sealkey.SecretName, metav1.DeleteOptions{})).To(Succeed())
		startAgent()
		var private string
		Eventually(func() error {
			s, err := local.CoreV1().Secrets(agentNS).Get(ctx, sealkey.SecretName, metav1.GetOptions{})
			if err == nil {
				private = string(s.Data["private"])
			}
			return err
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			cur := bd(name)
			g.Expect(cur.Spec.SealedFiles).To(HaveLen(1))
			g.Expect(cur.Spec.SealedFiles[0].Source).NotTo(Equal(f.Source))
			_, err := sealing.Unseal(private, sealing.Binding(cur.Namespace, cur.Name, "db.yaml"), cur.Spec.SealedFiles[0].Sealed)
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())
	})

	It("rolled back by fleet rollback, gives the cluster the values of the revision it returns to, not the Bundle's current ones", func(ctx context.Context) {
		recipient := sopsKey(ctx)
		ns := unique("sops-back")
		files := func(password, mode string) []fleet.BundleResource {
			plain := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + password + "\n"
			return []fleet.BundleResource{res("db.yaml", string(sopstest.Encrypt(GinkgoT(), "db.yaml", []byte(plain), recipient, nil))),
				res("cm.yaml", configMap("settings", "mode", mode))}
		}
		name := unique("sops-back")
		newBundle(name, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns}, Resources: files("first-secret", "one")})
		readyAndCurrent(name)
		Eventually(secretValue(ns, "db", "password")).Should(Equal("first-secret"))
		revisions := func() map[int64]*fleet.BundleRevision {
			list, err := api.BundleRevision().List(fleet.DefaultNamespace, metav1.ListOptions{LabelSelector: fleet.HistoryBundleLabel + "=" + name})
			Expect(err).NotTo(HaveOccurred())
			out := map[int64]*fleet.BundleRevision{}
			for i := range list.Items {
				if list.Items[i].Spec.Inputs != nil {
					out[list.Items[i].Spec.Order] = &list.Items[i]
				}
			}
			return out
		}
		Eventually(revisions, time.Minute).Should(HaveKey(int64(1)))
		updateBundle(name, func(b *fleet.Bundle) { b.Spec.Resources = files("second-secret", "two") })
		Eventually(cmData(ns, "settings"), time.Minute).Should(HaveKeyWithValue("mode", "two"))
		Eventually(secretValue(ns, "db", "password")).Should(Equal("second-secret"))
		Eventually(revisions, time.Minute).Should(HaveKey(int64(2)))

		out, err := testenv.FleetCLI("rollback", name, "--kubeconfig", manager.Kubeconfig, "-n", fleet.DefaultNamespace, "--to", revisions()[1].Spec.Revision)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(cmData(ns, "settings"), time.Minute).Should(HaveKeyWithValue("mode", "one"))
		Eventually(secretValue(ns, "db", "password"), time.Minute).Should(Equal("first-secret"), "the held revision's SOPS file, sealed to the cluster")
		Consistently(secretValue(ns, "db", "password"), "3s").Should(Equal("first-secret"))
	})

	It("that no key of the manager's decrypts, or that was changed after encrypting, deploys nothing and says why", func(ctx context.Context) {
		recipient := sopsKey(ctx)
		tampered := unique("sops-tampered")
		enc := sopstest.Encrypt(GinkgoT(), "db.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  replicas_unencrypted: \"1\"\nstringData:\n  password: x\n"),
			recipient, nil)
		enc = bytes.Replace(enc, []byte(`replicas_unencrypted: "1"`), []byte(`replicas_unencrypted: "2"`), 1)
		newBundle(tampered, fleet.BundleSpec{Resources: []fleet.BundleResource{res("db.yaml", string(enc))}})
		Eventually(func() string { return readyMessage(tampered) }).Should(ContainSubstring("secrets: db.yaml: the MAC does not match"))

		stranger, err := age.GenerateX25519Identity()
		Expect(err).NotTo(HaveOccurred())
		enc = sopstest.Encrypt(GinkgoT(), "db.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: x\n"),
			stranger.Recipient().String(), nil)
		name := unique("sops-wrong")
		newBundle(name, fleet.BundleSpec{Resources: []fleet.BundleResource{res("db.yaml", string(enc)), res("cm.yaml", configMap(name, "a", "b"))}})
		Eventually(func() string { return readyMessage(name) }).Should(ContainSubstring("secrets: db.yaml: no key given to the manager decrypts it"))
		Consistently(func() []*fleet.BundleDeployment { return []*fleet.BundleDeployment{bd(name), bd(tampered)} }, "3s").Should(HaveEach(BeNil()))
		kube, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			ev, err := testenv.Events(ctx, kube, fleet.DefaultNamespace, "Bundle", name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev["SecretsRefused"]).To(ContainElement(ContainSubstring("db.yaml: no key given to the manager decrypts it")))
		}).Should(Succeed())
	})
})

var _ = Describe("a bundle's SOPS file whose key the admin gives after the bundle is made", func() {
	It("deploys nothing while no key decrypts it, and deploys once the key Secret is there, with no other change", func(ctx context.Context) {
		id, err := age.GenerateX25519Identity()
		Expect(err).NotTo(HaveOccurred())
		name, ns := unique("sops-late"), unique("sops-late-ns")
		enc := sopstest.Encrypt(GinkgoT(), "db.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: late\n"),
			id.Recipient().String(), nil)
		newBundle(name, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources: []fleet.BundleResource{res("db.yaml", string(enc))}})
		// (No key of the namespace at all, or none that decrypts: other specs' keys may be there.)
		Eventually(func() string { return readyMessage(name) }).Should(Or(ContainSubstring("secrets: db.yaml: no key given to the manager decrypts it"),
			ContainSubstring("secrets: no SOPS key for namespace "+fleet.DefaultNamespace)))

		kube, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())
		key := unique("sops-late-key")
		_, err = kube.CoreV1().Secrets("cattle-fleet-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key,
			Annotations: map[string]string{bundle.SOPSNamespacesAnnotation: "other-ns, " + fleet.DefaultNamespace}},
			Data: map[string][]byte{"late.agekey": []byte(id.String() + "\n")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			_ = kube.CoreV1().Secrets("cattle-fleet-system").Delete(context.Background(), key, metav1.DeleteOptions{})
		})
		Eventually(secretValue(ns, "db", "password")).Should(Equal("late"))
	})
})

var _ = Describe("a bundle's SOPS file aimed at a cluster without a sealing key", func() {
	It("deploys to no cluster and names the one without a key; once its key is reported, it deploys everywhere", func(ctx context.Context) {
		recipient := sopsKey(ctx)
		keyless, name, ns := unique("keyless"), unique("sops-keyless"), unique("sops-keyless-ns")
		_, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: keyless, Namespace: fleet.DefaultNamespace}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = api.Cluster().Delete(fleet.DefaultNamespace, keyless, nil) })
		Eventually(func() string {
			c, err := api.Cluster().Get(fleet.DefaultNamespace, keyless, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return c.Status.Namespace
		}).ShouldNot(BeEmpty())
		enc := sopstest.Encrypt(GinkgoT(), "db.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: x\n"), recipient, nil)
		newBundle(name, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Targets:   []fleet.BundleTarget{{ClusterName: clusterName}, {ClusterName: keyless}},
			Resources: []fleet.BundleResource{res("db.yaml", string(enc)), res("cm.yaml", configMap("beside", "a", "b"))}})
		Eventually(func() string { return readyMessage(name) }).Should(ContainSubstring("secrets: clusters without a sealing key (their agents report one when they check in): " + keyless))
		Consistently(func() *fleet.BundleDeployment { return bd(name) }, "3s").Should(BeNil(), "the cluster with a key gets nothing either")

		_, public, err := sealing.NewKey()
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Cluster().Patch(fleet.DefaultNamespace, keyless, types.MergePatchType, []byte(`{"status":{"agent":{"sealingKey":"`+public+`"}}}`), "status")
		Expect(err).NotTo(HaveOccurred())
		Eventually(cmData(ns, "beside")).Should(HaveKeyWithValue("a", "b"))
		Eventually(secretValue(ns, "db", "password")).Should(Equal("x"))
	})
})

var _ = Describe("Helm values kept in a SOPS Secret", func() {
	It("reach a chart through helm.valuesFrom, from a bundle it depends on, and nothing of the manager's holds them", func(ctx context.Context) {
		recipient := sopsKey(ctx)
		canary := unique("canary-values")
		plain := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: chart-values\nstringData:\n  values.yaml: |\n    password: " + canary + "\n"
		ns := unique("sops-values-ns")
		src, user := unique("sops-values"), unique("sops-values-user")
		newBundle(src, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources: []fleet.BundleResource{res("values.yaml", string(sopstest.Encrypt(GinkgoT(), "values.yaml", []byte(plain), recipient, nil)))}})
		newBundle(user, fleet.BundleSpec{DependsOn: []fleet.BundleRef{{Name: src}},
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: &fleet.HelmOptions{
				ValuesFrom: []fleet.ValuesFrom{{SecretKeyRef: &fleet.SecretKeySelector{Name: "chart-values", Namespace: ns, Key: "values.yaml"}}}}},
			Resources: []fleet.BundleResource{res("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: uses\ndata:\n  password: {{ .Values.password }}\n")}})
		Eventually(cmData(ns, "uses")).Should(HaveKeyWithValue("password", canary))
		Expect(served(ctx, []byte(canary))).To(BeEmpty())
	})
})

// readyMessage is the message of a Bundle's Ready condition.
func readyMessage(name string) string {
	b, err := api.Bundle().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	if c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// secretValue reads a key of a downstream Secret ("" while there is none).
func secretValue(ns, name, key string) func() string {
	return func() string {
		s, err := local.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return string(s.Data[key])
	}
}
