package apply_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/cmd"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("fleet target against a live manager", func() {
	It("plans BundleDeployments for the Clusters and ClusterGroups of the bundle's namespace", func(ctx context.Context) {
		ns := newNamespace(ctx)
		for name, env := range map[string]string{"c-prod": "prod", "c-dev": "dev"} {
			_, err := clients.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"env": env}}})
			Expect(err).NotTo(HaveOccurred())
		}
		_, err := clients.ClusterGroup().Create(&fleet.ClusterGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "production", Namespace: ns},
			Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
		})
		Expect(err).NotTo(HaveOccurred())

		root := repo(map[string]string{"app/fleet.yaml": "defaultNamespace: app\n", "app/cm.yaml": "kind: ConfigMap\n"})
		targets := filepath.Join(root, "..", "targets.yaml")
		Expect(os.WriteFile(targets, []byte("targets:\n- clusterGroup: production\n"), 0o644)).To(Succeed())
		bundles := filepath.Join(root, "..", "bundles.yaml")

		run := func(args ...string) string {
			var out bytes.Buffer
			c := cmd.New()
			c.SetOut(&out)
			c.SetErr(&out)
			c.SetArgs(args)
			Expect(c.ExecuteContext(ctx)).To(Succeed(), out.String())
			return out.String()
		}
		run("apply", "-n", ns, "--root", root, "--targets-file", targets, "-o", bundles, "repo", "app")
		out := run("target", "--kubeconfig", cluster.Kubeconfig, "-b", bundles)
		Expect(out).To(ContainSubstring("targets 1 cluster(s): [" + ns + "/c-prod]"))
		Expect(out).To(ContainSubstring("kind: BundleDeployment"))
		Expect(out).NotTo(ContainSubstring("fleet.cattle.io/cluster: c-dev"))
	})
})
