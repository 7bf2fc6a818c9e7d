package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/bundlebuild"
	"github.com/fleetgo/fleet/internal/controller/gitrepo"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// fleetValuesHash is a Bundle's valuesHash as Fleet 0.13+ computes it: the hex SHA-256 of the
// JSON of the values Secret's data (keys sorted, values base64).
func fleetValuesHash(data map[string][]byte) string {
	raw, err := json.Marshal(data)
	Expect(err).NotTo(HaveOccurred())
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

var _ = Describe("A GitRepo's Job applying Helm values", func() {
	It("keeps them in the Bundle's values Secret, as Fleet 0.13+ does, and may write no other Secret", func(ctx context.Context) {
		ns := newNamespace(ctx)
		admin, err := cluster.Clientset()
		Expect(err).NotTo(HaveOccurred())
		gr, err := clients.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: ns},
			Spec: fleet.GitRepoSpec{Repo: "https://git.example/a"}})
		Expect(err).NotTo(HaveOccurred())
		// The Job's identity, with its Role as the manager writes it.
		cfg := identityConfig(ctx, ns, "git-team-a", gitrepo.JobRules("team-a"))
		jobKube, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		jobFleet, err := fleetfactory.NewFactoryFromConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		dir := GinkgoT().TempDir()
		Expect(os.MkdirAll(filepath.Join(dir, "app"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "app", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"), 0o644)).To(Succeed())
		applyAs := func(kube kubernetes.Interface, bundles fleetcontrollers.BundleClient, fleetYAML string) error {
			Expect(os.WriteFile(filepath.Join(dir, "app", "fleet.yaml"), []byte(fleetYAML), 0o644)).To(Succeed())
			o := bundlebuild.FromGitRepo(gr, "c1")
			o.Root, o.Secrets = dir, kube.CoreV1()
			return bundlebuild.Run(ctx, o, bundles, io.Discard)
		}
		apply := func(fleetYAML string) {
			GinkgoHelper()
			Expect(applyAs(jobKube, jobFleet.Fleet().V1alpha1().Bundle(), fleetYAML)).To(Succeed())
		}
		apply("helm:\n  values:\n    password: s3cret\n    replicas: 2\ntargetCustomizations:\n- name: prod\n  clusterSelector:\n    matchLabels:\n      env: prod\n  helm:\n    values:\n      replicas: 3\n")

		b, err := clients.Bundle().Get(ns, "team-a-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Spec.Helm.Values).To(BeNil(), "no values in the Bundle")
		Expect(b.Spec.Targets[0].Name).To(Equal("prod"))
		Expect(b.Spec.Targets[0].Helm.Values).To(BeNil(), "nor in its target")
		s, err := admin.CoreV1().Secrets(ns).Get(ctx, "team-a-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(s.Type)).To(Equal("fleet.cattle.io/bundle-values/v1alpha1"))
		Expect(s.Data).To(HaveLen(2))
		Expect(s.Data["values.yaml"]).To(MatchJSON(`{"password":"s3cret","replicas":2}`))
		Expect(s.Data["prod"]).To(MatchJSON(`{"replicas":3}`))
		Expect(b.Spec.ValuesHash).To(Equal(fleetValuesHash(s.Data)))
		Expect(s.Labels).To(HaveKeyWithValue(fleet.RepoLabel, "team-a"))
		Expect(s.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Bundle"), HaveField("UID", b.UID), HaveField("Controller", HaveValue(BeTrue())))))

		// New values overwrite the Secret (the Job cannot read it); none delete it.
		apply("helm:\n  values:\n    replicas: 4\n")
		s, err = admin.CoreV1().Secrets(ns).Get(ctx, "team-a-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Data).To(HaveLen(1))
		Expect(s.Data["values.yaml"]).To(MatchJSON(`{"replicas":4}`))
		apply("defaultNamespace: app\n")
		_, err = admin.CoreV1().Secrets(ns).Get(ctx, "team-a-app", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		b, err = clients.Bundle().Get(ns, "team-a-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Spec.ValuesHash).To(BeEmpty())

		// The Job's token writes no other Secret of the namespace, and reads none.
		refused := func(err error) {
			GinkgoHelper()
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		}
		_, err = admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitcredential"},
			Data: map[string][]byte{"password": []byte("team")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "an administrator's Secret writes are not limited")
		_, err = jobKube.CoreV1().Secrets(ns).Get(ctx, "gitcredential", metav1.GetOptions{})
		refused(err)
		_, err = jobKube.CoreV1().Secrets(ns).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitcredential"},
			Data: map[string][]byte{"password": []byte("mine")}}, metav1.UpdateOptions{})
		refused(err)
		Expect(err.Error()).To(ContainSubstring("may write only the values Secrets"))
		refused(jobKube.CoreV1().Secrets(ns).Delete(ctx, "gitcredential", metav1.DeleteOptions{}))
		_, err = jobKube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "planted"},
			Data: map[string][]byte{"token": []byte("x")}}, metav1.CreateOptions{})
		refused(err)
		_, err = jobKube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-b-app",
			Labels: map[string]string{fleet.RepoLabel: "team-b"}}, Type: "fleet.cattle.io/bundle-values/v1alpha1",
			Data: map[string][]byte{"values.yaml": []byte(`{}`)}}, metav1.CreateOptions{})
		refused(err)
		kept, err := admin.CoreV1().Secrets(ns).Get(ctx, "gitcredential", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(kept.Data["password"])).To(Equal("team"))

		// A Secret of another kind under the Bundle's name is not written over: not by the Job,
		// nor by whoever may read it (fleet apply by an administrator, the manager's own runs).
		_, err = admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-a-app"},
			Data: map[string][]byte{"password": []byte("app")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(applyAs(jobKube, jobFleet.Fleet().V1alpha1().Bundle(), "helm:\n  values:\n    replicas: 5\n")).To(HaveOccurred())
		Expect(applyAs(admin, clients.Bundle(), "helm:\n  values:\n    replicas: 5\n")).To(MatchError(ContainSubstring("not a values Secret")))
		kept, err = admin.CoreV1().Secrets(ns).Get(ctx, "team-a-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(kept.Data).To(Equal(map[string][]byte{"password": []byte("app")}))
	})
})
