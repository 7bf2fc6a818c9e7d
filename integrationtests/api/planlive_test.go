package api_test

import (
	"context"

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

		live, err := plan.Live(clients, "plans", "shop", []string{"payments-secrets"})
		Expect(err).NotTo(HaveOccurred(), "another GitRepo's deployment is not read: its Content is never asked for")
		Expect(live["payments-secrets"]).To(BeEmpty())

		// The GitRepo's own bundle is read: its Content is asked for (and here is missing).
		_, err = plan.Live(clients, "plans", "shop", []string{"shop-web"})
		Expect(err).To(MatchError(ContainSubstring("content s-shop")))
	})
})
