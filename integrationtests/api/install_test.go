package api_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
)

// In a suite of its own cluster: the manifest binds the ClusterRole fleet-controller to the
// ServiceAccount of its namespace, which would take it from a manager running elsewhere.
var _ = Describe("fleet install controller", func() {
	It("prints a manifest the apiserver accepts: the CRDs, the controller, its permissions and configuration", func(ctx context.Context) {
		out, err := testenv.FleetCLI("install", "controller", "--controller-image", "registry.local:5000/fleet:test", "--system-namespace", "fleet-manager")
		Expect(err).NotTo(HaveOccurred())
		Expect(testenv.KubectlApply(cluster.Kubeconfig, out, nil)).To(Succeed())
		kube, err := kubernetes.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		d, err := kube.AppsV1().Deployments("fleet-manager").Get(ctx, "fleet-controller", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.local:5000/fleet:test"))
		Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal("fleet-controller"))
		_, err = kube.CoreV1().ConfigMaps("fleet-manager").Get(ctx, "fleet-controller", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.RbacV1().Roles("fleet-manager").Get(ctx, "fleet-controller-leader-election", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "leases in a namespaced Role")
	})
})
