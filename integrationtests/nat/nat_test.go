// Package nat_test registers a downstream cluster that only reaches out: its apiserver and its
// agent (the real fleet binary) run in a network namespace of their own, joined to the host by
// a veth pair. The manager listens on the host's end; the downstream apiserver listens on the
// namespace's loopback, where nothing outside can connect. Needs root, as CI has.
package nat_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestNAT(t *testing.T) {
	testenv.RunSuite(t, "downstream cluster behind NAT", 90*time.Second, 250*time.Millisecond)
}

var _ = Describe("a downstream cluster with outbound-only reach to the manager", func() {
	It("registers from `fleet install agent-token` output and deploys, while the manager cannot connect to it", func(ctx context.Context) {
		netns, err := localcluster.NewNetNS(fmt.Sprintf("fleet-nat-%d", os.Getpid()), os.Getpid()%200+20)
		Expect(err).NotTo(HaveOccurred(), "creating a network namespace (needs root)")
		DeferCleanup(netns.Delete)

		manager, api, err := testenv.StartWithCRDsOptions(ctx, localcluster.Options{Name: "nat-manager", BindAddress: "0.0.0.0",
			ExtraIPs: []net.IP{netns.HostIP}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(manager.Stop)
		down, err := localcluster.Start(ctx, localcluster.Options{Name: "nat-downstream", NetNS: netns.Name})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(down.Stop)

		// The manager's host cannot open a connection to the downstream apiserver, at either
		// address it might try.
		Expect(testenv.Unreachable(down, netns)).To(Succeed())
		// From inside, the manager is reachable at the host's end of the link.
		managerURL := testenv.HostURL(manager, netns)

		mcfg := manager.RESTConfig()
		stop := testenv.RunController(mcfg, config.Config{APIServerURL: managerURL, APIServerCA: string(mcfg.CAData),
			AgentCheckinInterval: metav1.Duration{Duration: 2 * time.Second}}, controller.Options{})
		DeferCleanup(func() { Expect(stop()).To(Succeed()) })

		kubectl := func(manifest string) {
			Expect(testenv.KubectlApply(down.Kubeconfig, manifest, netns.Command)).To(Succeed())
		}
		_, err = api.ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "north", Namespace: fleet.DefaultNamespace},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "north"}}}})
		Expect(err).NotTo(HaveOccurred())
		kubectl(fleetCLI("install", "agent-config", "-l", "env=edge"))
		kubectl(fleetCLI("install", "agent-token", "--kubeconfig", manager.Kubeconfig, "--ttl", "1h", "--group", "north", "--label-keys", "env"))

		bin, err := gexec.Build("github.com/fleetgo/fleet")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
		agentCmd := netns.Command(bin, "agent", "--kubeconfig", down.Kubeconfig, "--namespace", "cattle-fleet-system",
			"--leader-elect=false", "--health-addr=", "--metrics-addr=", "--checkin-interval=2s")
		session, err := gexec.Start(agentCmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Kill().Wait(10 * time.Second) })

		downKube, err := kubernetes.NewForConfig(down.RESTConfig()) // dials from inside the namespace
		Expect(err).NotTo(HaveOccurred())
		ks, err := downKube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		clusterName := registration.ClusterName(string(ks.UID))
		Eventually(func(g Gomega) {
			c, err := api.Cluster().Get(fleet.DefaultNamespace, clusterName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Labels).To(HaveKeyWithValue("env", "edge"), "a key --label-keys lists")
			g.Expect(c.Labels).To(HaveKeyWithValue("region", "north"), "agent-token --group gives the group's labels")
			g.Expect(c.Status.Agent.LastSeen.IsZero()).To(BeFalse())
		}).Should(Succeed())

		_, err = api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "behind-nat", Namespace: fleet.DefaultNamespace},
			Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "behind-nat"},
				Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\ndata:\n  from: manager\n"}},
				Targets:   []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "edge"}}}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string {
			cm, err := downKube.CoreV1().ConfigMaps("behind-nat").Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return ""
			}
			return cm.Data["from"]
		}).Should(Equal("manager"))
		Eventually(func(g Gomega) {
			b, err := api.Bundle().Get(fleet.DefaultNamespace, "behind-nat", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Status.Summary.Ready).To(Equal(1))
			cg, err := api.ClusterGroup().Get(fleet.DefaultNamespace, "north", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cg.Status.ClusterCount).To(Equal(1))
		}).Should(Succeed())
	}, NodeTimeout(8*time.Minute))
})

// fleetCLI runs the fleet command line in-process and returns what it printed.
func fleetCLI(args ...string) string {
	out, err := testenv.FleetCLI(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}
