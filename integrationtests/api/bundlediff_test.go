package api_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("fleet bundlediff", func() {
	It("lists the resources clusters hold differently from their Bundles", func(ctx context.Context) {
		kube, err := kubernetes.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		const clusterNS = "cluster-diff-1"
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		bd, err := clients.BundleDeployment().Create(&fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "shop-web", Namespace: clusterNS,
			Labels: map[string]string{fleet.BundleLabel: "shop-web", fleet.BundleNamespaceLabel: "diffs",
				fleet.ClusterLabel: "edge", fleet.ClusterNamespaceLabel: "diffs"}},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-1:1"}})
		Expect(err).NotTo(HaveOccurred())
		bd.Status.ModifiedStatus = []fleet.ModifiedStatus{
			{Kind: "ConfigMap", APIVersion: "v1", Namespace: "shop", Name: "settings", Patch: `{"data":{"mode":"fast"}}`},
			{Kind: "Deployment", APIVersion: "apps/v1", Namespace: "shop", Name: "web", Create: true}}
		_, err = clients.BundleDeployment().UpdateStatus(bd)
		Expect(err).NotTo(HaveOccurred())

		out, err := testenv.FleetCLI("bundlediff", "--kubeconfig", cluster.Kubeconfig, "-n", "diffs")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring(`shop-web  diffs/edge  ConfigMap shop/settings  modified  {"data":{"mode":"fast"}}`))
		Expect(out).To(ContainSubstring("shop-web  diffs/edge  Deployment shop/web  missing"))

		out, err = testenv.FleetCLI("bundlediff", "--kubeconfig", cluster.Kubeconfig, "-n", "elsewhere")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("no differences"))
	})
})
