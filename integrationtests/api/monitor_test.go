package api_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/cli/monitor"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("fleet monitor and fleet analyze", func() {
	It("snapshot the manager with the issues found, and tell what changed between snapshots", func(ctx context.Context) {
		kube, err := kubernetes.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		const ns = "monitored"
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = clients.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns}})
		Expect(err).NotTo(HaveOccurred())
		// A BundleDeployment left behind: its Bundle is gone and its Content was never written.
		_, err = clients.BundleDeployment().Create(&fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns,
			Labels: map[string]string{fleet.BundleLabel: "gone", fleet.BundleNamespaceLabel: ns}},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-monitored:1", StagedDeploymentID: "s-monitored:1"}})
		Expect(err).NotTo(HaveOccurred())

		snapshot := func() (string, monitor.Snapshot) {
			out, err := testenv.FleetCLI("monitor", "--kubeconfig", cluster.Kubeconfig, "-n", ns)
			Expect(err).NotTo(HaveOccurred())
			var s monitor.Snapshot
			Expect(json.Unmarshal([]byte(out), &s)).To(Succeed())
			return out, s
		}
		first, s := snapshot()
		var keys []string
		for _, i := range s.Issues {
			keys = append(keys, i.Key())
		}
		Expect(keys).To(ConsistOf(
			"ContentMissing BundleDeployment "+ns+"/orphan",
			"NoBundle BundleDeployment "+ns+"/orphan",
			"NotApplied BundleDeployment "+ns+"/orphan",
			"NoClusterNamespace Cluster "+ns+"/edge"))
		Expect(s.BundleDeployments).To(ConsistOf(HaveField("DeploymentID", "s-monitored:1")))

		_, err = clients.Content().Create(&fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: "s-monitored"}})
		Expect(err).NotTo(HaveOccurred())
		// (Contents are cluster-scoped: other specs count them.)
		DeferCleanup(func() { Expect(clients.Content().Delete("s-monitored", &metav1.DeleteOptions{})).To(Succeed()) })
		second, _ := snapshot()
		file := filepath.Join(GinkgoT().TempDir(), "snapshots.json")
		Expect(os.WriteFile(file, []byte(first+second), 0o644)).To(Succeed())
		out, err := testenv.FleetCLI("analyze", file, "--detailed")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("1 bundledeployments, 1 clusters, 3 issues"))
		Expect(out).To(ContainSubstring("  NoBundle: 1\n    BundleDeployment " + ns + "/orphan: its Bundle " + ns + "/gone does not exist"))
		Expect(out).To(ContainSubstring("(2 snapshots): 0 appeared, 1 resolved, 3 in every snapshot"))
		Expect(out).To(ContainSubstring("resolved: ContentMissing BundleDeployment " + ns + "/orphan"))
		Expect(strings.Count(out, "stuck: ")).To(Equal(3))
	})
})
