package controller_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/ocistorage"
	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A tenant who may write GitRepos and Bundles in a namespace names, as its registry Secret
// (ociRegistrySecret), a credential kept there: the manager refuses it, names the Secret and why,
// and copies nothing next to the BundleDeployments.
var _ = Describe("a GitRepo naming a credential as its OCI registry Secret", func() {
	DescribeTable("is refused, naming the Secret and why, and nothing is copied to the clusters",
		func(ctx context.Context, secret *corev1.Secret, cluster *fleet.Cluster, why string) {
			ns := newNamespace(ctx)
			secret.Namespace = ns
			_, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			newCluster(ns, "edge", map[string]string{"env": "tenant"})
			if cluster != nil {
				cluster.Namespace = ns
				_, err := api.Cluster().Create(cluster)
				Expect(err).NotTo(HaveOccurred())
			}
			_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
				Spec: fleet.GitRepoSpec{Repo: "http://127.0.0.1:1/tenant.git", OCIRegistrySecret: secret.Name}})
			Expect(err).NotTo(HaveOccurred())
			_, err = api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "tenant-app", Namespace: ns,
				Labels: map[string]string{fleet.RepoLabel: "tenant"}},
				Spec: fleet.BundleSpec{ContentsID: "s-0123456789abcdef", Targets: []fleet.BundleTarget{{ClusterSelector: sel("env", "tenant")}}}})
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() string {
				c := fleet.FindCondition(bundleStatus(ns, "tenant-app")().Conditions, fleet.ConditionReady)
				if c == nil {
					return ""
				}
				return c.Message
			}).Should(ContainSubstring("secret " + ns + "/" + secret.Name + " cannot be used: " + why))
			Consistently(func() int {
				list, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ocistorage.AgentSecretName("tenant-app")})
				Expect(err).NotTo(HaveOccurred())
				return len(list.Items) + len(deployments(ns, "tenant-app"))
			}, "2s").Should(BeZero())
		},
		Entry("a registration token's values", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token-values"},
			Type: secretuse.RegistrationValuesType, Data: map[string][]byte{"values": []byte("token: x\n")}},
			nil, "it holds a registration token"),
		Entry("a Cluster's kubeConfigSecret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "imported-kubeconfig"},
			Data: map[string][]byte{"value": []byte("apiVersion: v1\nkind: Config\n")}},
			&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "imported"}, Spec: fleet.ClusterSpec{KubeConfigSecret: "imported-kubeconfig"}},
			"it is the kubeConfigSecret of a Cluster"),
	)
})
