package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/cli/plan"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A pull request's fleet.yaml may give a bundle the name of another GitRepo's Bundle: `fleet
// plan --live` reads the deployments of the GitRepo it plans only, so what another team's
// Bundle runs never reaches the plan (and the pull request's comment).
var _ = Describe("fleet plan --live", func() {
	It("reads only the deployments of the GitRepo it plans", func(ctx context.Context) {
		kube, err := kubernetes.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		const clusterNS = "cluster-plan-live"
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		deployment := func(bundle, repo, content string) {
			_, err := clients.BundleDeployment().Create(&fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: bundle, Namespace: clusterNS,
				Labels: map[string]string{fleet.BundleLabel: bundle, fleet.BundleNamespaceLabel: "plans", fleet.RepoLabel: repo,
					fleet.ClusterLabel: "edge", fleet.ClusterNamespaceLabel: "plans"}},
				Spec: fleet.BundleDeploymentSpec{DeploymentID: content + ":1"}})
			Expect(err).NotTo(HaveOccurred())
		}
		deployment("payments-secrets", "payments", "s-payments")
		deployment("shop-web", "shop", "s-shop")

		live, err := plan.Live(ctx, clients, kube.CoreV1(), "plans", "shop", []string{"payments-secrets"})
		Expect(err).NotTo(HaveOccurred(), "another GitRepo's deployment is not read: its Content is never asked for")
		Expect(live["payments-secrets"]).To(BeEmpty())

		// The GitRepo's own bundle is read: its Content is asked for (and here is missing).
		_, err = plan.Live(ctx, clients, kube.CoreV1(), "plans", "shop", []string{"shop-web"})
		Expect(err).To(MatchError(ContainSubstring("content s-shop")))
	})
})

// The manager keeps a BundleDeployment's Helm values in its options Secret, as Fleet 0.13+ does:
// `fleet plan --live` renders what runs with them, as the cluster's agent does.
var _ = Describe("fleet plan --live of a deployment whose values are in its options Secret", func() {
	It("renders what runs with those values", func(ctx context.Context) {
		kube, err := kubernetes.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		const clusterNS = "cluster-plan-live-values"
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		Expect(json.NewEncoder(zw).Encode(map[string]any{"resources": []fleet.BundleResource{
			{Name: "Chart.yaml", Content: "apiVersion: v2\nname: shop\nversion: 1.0.0\n"},
			{Name: "templates/cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop\ndata:\n  tier: {{ .Values.tier | quote }}\n"}}})).To(Succeed())
		Expect(zw.Close()).To(Succeed())
		_, err = clients.Content().Create(&fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: "s-shop-values"}, Content: gz.Bytes()})
		Expect(err).NotTo(HaveOccurred())
		// Contents are cluster-wide: `fleet dump` of another spec would find it.
		DeferCleanup(func() { Expect(clients.Content().Delete("s-shop-values", &metav1.DeleteOptions{})).To(Succeed()) })
		values := []byte(`{"tier":"gold"}`)
		sum := sha256.Sum256(append(append([]byte{}, values...), values...))
		opts := fleet.BundleDeploymentOptions{DefaultNamespace: "shop", Helm: &fleet.HelmOptions{}}
		_, err = clients.BundleDeployment().Create(&fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "shop-chart", Namespace: clusterNS,
			Labels: map[string]string{fleet.BundleLabel: "shop-chart", fleet.BundleNamespaceLabel: "plans", fleet.RepoLabel: "shop",
				fleet.ClusterLabel: "edge", fleet.ClusterNamespaceLabel: "plans"}},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-shop-values:1", ValuesHash: hex.EncodeToString(sum[:]), Options: opts, StagedOptions: opts}})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Secrets(clusterNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-chart"},
			Type: fleet.SecretTypeBundleDeploymentOptions, Data: map[string][]byte{"values": values, "stagedValues": values}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		live, err := plan.Live(ctx, clients, kube.CoreV1(), "plans", "shop", []string{"shop-chart"})
		Expect(err).NotTo(HaveOccurred())
		Expect(live["shop-chart"]).To(HaveKeyWithValue("plans/edge", ContainSubstring("tier: gold")))
	})
})
