package e2e_test

import (
	"context"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/harness/chartinstall"
)

var _ = Describe("charts", func() {
	It("installs charts/fleet into the management cluster with the Helm SDK; the apiserver accepts every object", func(ctx context.Context) {
		root, err := testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		// Into a namespace of its own, so the controller process the suite runs is not disturbed.
		rel, err := chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{Kubeconfig: manager.Kubeconfig, Namespace: "fleet-chart",
			ReleaseName: "fleet", ChartDir: filepath.Join(root, "charts", "fleet"),
			Values: map[string]any{"apiServerURL": "https://manager.example:6443",
				"image":  map[string]any{"repository": "registry.example/fleet", "tag": "e2e"},
				"shards": []any{map[string]any{"id": "east", "nodeSelector": map[string]any{"zone": "east"}}}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(rel.Info.Status.String()).To(Equal("deployed"))
		d, err := managerKube.AppsV1().Deployments("fleet-chart").Get(ctx, "fleet-controller", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example/fleet:e2e"))
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--git-job-image=registry.example/fleet:e2e"))
		// One Deployment per shard besides the unsharded controller.
		shard, err := managerKube.AppsV1().Deployments("fleet-chart").Get(ctx, "fleet-controller-shard-east", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(shard.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--shard-id=east"))
		// Its GitRepos' Jobs go to its nodes too.
		Expect(shard.Spec.Template.Spec.Containers[0].Args).To(ContainElement(`--shard-node-selector={"zone":"east"}`))
		Expect(shard.Spec.Template.Spec.NodeSelector).To(Equal(map[string]string{"zone": "east"}))
		Expect(shard.Spec.Template.Labels).To(HaveKeyWithValue("fleet.cattle.io/shard-id", "east"))
		Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--shard-id")))
		Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--shard-node-selector")))
		cm, err := managerKube.CoreV1().ConfigMaps("fleet-chart").Get(ctx, "fleet-controller", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.Data["config"]).To(ContainSubstring(`"apiServerURL":"https://manager.example:6443"`))
		for _, svc := range []string{"fleet-controller", "gitjob"} {
			_, err := managerKube.CoreV1().Services("fleet-chart").Get(ctx, svc, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred(), svc)
		}
		_, err = managerKube.RbacV1().ClusterRoles().Get(ctx, "fleet-controller", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The agent chart as a user installs it with a token's values (into the manager here,
		// only to show the apiserver takes it).
		_, err = chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{Kubeconfig: manager.Kubeconfig, Namespace: "fleet-agent-chart",
			ReleaseName: "fleet-agent", ChartDir: filepath.Join(root, "charts", "fleet-agent"),
			Values: map[string]any{"token": "t", "apiServerURL": "https://manager.example:6443", "labels": map[string]any{"env": "dev"}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = managerKube.CoreV1().Secrets("fleet-agent-chart").Get(ctx, "fleet-agent-bootstrap", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = managerKube.CoreV1().Secrets("fleet-chart").Get(ctx, "fleet-agent-bootstrap", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})
})
