package registration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"time"

	"filippo.io/age"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/agent/register"
	"github.com/fleetgo/fleet/internal/agent/sealkey"
	"github.com/fleetgo/fleet/internal/controller/bundle"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	"github.com/fleetgo/fleet/internal/sealing"
	"github.com/fleetgo/fleet/internal/sopsfile/sopstest"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// teamKey gives the manager, as an admin does, an age key for the SOPS files of the namespace
// fleet-default, and returns its recipient.
func teamKey(ctx context.Context) string {
	id, err := age.GenerateX25519Identity()
	Expect(err).NotTo(HaveOccurred())
	_, err = managerKube.CoreV1().Secrets(systemNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-sops",
		Annotations: map[string]string{bundle.SOPSNamespacesAnnotation: fleet.DefaultNamespace}},
		Data: map[string][]byte{"team.agekey": []byte(id.String() + "\n")}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_ = managerKube.CoreV1().Secrets(systemNS).Delete(context.Background(), "team-sops", metav1.DeleteOptions{})
	})
	return id.Recipient().String()
}

// publishSOPS serves a repository "secrets" whose folder db holds a SOPS-encrypted Secret with
// the canary, and a GitRepo deploying it to the clusters labelled env=dev or env=prod.
func publishSOPS(ctx context.Context, recipient, canary string) {
	g, err := localserver.StartGitServer(filepath.Join(GinkgoT().TempDir(), "git"), localserver.BasicAuth{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(g.Close)
	src := GinkgoT().TempDir()
	Expect(os.MkdirAll(filepath.Join(src, "db"), 0o755)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(src, "db", "fleet.yaml"), []byte("defaultNamespace: sealed\n"), 0o644)).To(Succeed())
	plain := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: " + canary + "\n  host: ${ .ClusterName }.db\n"
	Expect(os.WriteFile(filepath.Join(src, "db", "db.yaml"), sopstest.Encrypt(GinkgoT(), "db.yaml", []byte(plain), recipient, nil), 0o644)).To(Succeed())
	_, err = g.Publish(ctx, "secrets", "main", src, "sealed db")
	Expect(err).NotTo(HaveOccurred())
	_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "secrets", Namespace: fleet.DefaultNamespace},
		Spec: fleet.GitRepoSpec{Repo: g.RepoURL("secrets"), Branch: "main", Paths: []string{"db"},
			Targets: []fleet.GitTarget{{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"dev", "prod"}}}}}}}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = api.GitRepo().Delete(fleet.DefaultNamespace, "secrets", &metav1.DeleteOptions{}) })
}

// downstreamSecret is a value of the Secret db the GitRepo deploys, in cluster d.
func downstreamSecret(d *localcluster.Cluster, key string) func() string {
	return func() string {
		s, err := clientsetOf(d).CoreV1().Secrets("sealed").Get(context.Background(), "db", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return string(s.Data[key])
	}
}

// sealsGitSecretsToEachCluster is the spec of issue 65's acceptance: a SOPS file in git reaches
// two registered clusters, each through its own sealed copy, and its value is nowhere on the
// manager; cluster B's agent can neither read cluster A's copy nor open it, nor swap A's key.
func sealsGitSecretsToEachCluster(ctx context.Context, downA, downB *localcluster.Cluster) {
	stopB := startAgent(downB, 0)
	DeferCleanup(func() { stopB() })
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	canary := "canary-" + hex.EncodeToString(nonce)
	publishSOPS(ctx, teamKey(ctx), canary)

	for _, d := range []*localcluster.Cluster{downA, downB} {
		Eventually(downstreamSecret(d, "password"), 2*time.Minute).Should(Equal(canary))
		Expect(downstreamSecret(d, "host")()).To(Equal(storedCredential(d).ClusterName + ".db"))
	}
	where, err := testenv.Served(ctx, manager, []byte(canary))
	Expect(err).NotTo(HaveOccurred())
	Expect(where).To(BeEmpty(), "the canary is in no object the manager serves and in no byte of its etcd")
	where, err = testenv.InEtcd(manager, []byte("password: ENC[AES256_GCM,"))
	Expect(err).NotTo(HaveOccurred())
	Expect(where).NotTo(BeEmpty(), "the scan reads what etcd holds: the Bundle's ciphertext")

	credA, credB := storedCredential(downA), storedCredential(downB)
	copyA, err := api.BundleDeployment().Get(credA.ClusterNamespace, "secrets-db", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(copyA.Spec.SealedFiles).To(HaveLen(1))
	agentBCannotUseACopy(ctx, downA, downB, credA, credB, copyA)
}

// agentBCannotUseACopy: B's credential reads no BundleDeployment of A's and writes no key into
// A's Cluster; B's private key opens A's copy neither as A's nor as its own, A's key does.
func agentBCannotUseACopy(ctx context.Context, downA, downB *localcluster.Cluster, credA, credB *register.Credential, copyA *fleet.BundleDeployment) {
	_, flB := asAgent(credB)
	_, err := flB.BundleDeployment().Get(credA.ClusterNamespace, copyA.Name, metav1.GetOptions{})
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want 403, got %v", err)
	_, forged, err := sealing.NewKey()
	Expect(err).NotTo(HaveOccurred())
	_, err = flB.Cluster().Patch(fleet.DefaultNamespace, credA.ClusterName, types.MergePatchType,
		[]byte(`{"status":{"agent":{"sealingKey":"`+forged+`"}}}`), "status")
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want 403, got %v", err)
	Expect(err.Error()).To(ContainSubstring("status of its own Cluster"))

	private := func(d *localcluster.Cluster) string {
		s, err := clientsetOf(d).CoreV1().Secrets(agentNS).Get(ctx, sealkey.SecretName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		return string(s.Data["private"])
	}
	sealed := copyA.Spec.SealedFiles[0].Sealed
	for _, bind := range []string{sealing.Binding(credA.ClusterNamespace, copyA.Name, "db.yaml"), sealing.Binding(credB.ClusterNamespace, copyA.Name, "db.yaml")} {
		_, err = sealing.Unseal(private(downB), bind, sealed)
		Expect(err).To(MatchError(ContainSubstring("unsealing")), "cluster B's key on cluster A's copy, bound as %s", bind)
	}
	opened, err := sealing.Unseal(private(downA), sealing.Binding(credA.ClusterNamespace, copyA.Name, "db.yaml"), sealed)
	Expect(err).NotTo(HaveOccurred(), "cluster A's own key opens it")
	Expect(string(opened["file"])).To(ContainSubstring("password: canary-"))
}
