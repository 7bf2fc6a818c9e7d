package realnode_test

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/harness/localcluster"
)

// managedAgent is one cluster of the walkthrough as the manager sees it (its Cluster) and where
// its agent runs.
type managedAgent struct {
	kind, clusterNS, clusterName string
	on                           *localcluster.Cluster
	agentNS                      string
}

// managedAgentSpecs: the manager manages every agent through the agent's own Bundle, the
// imported local cluster's and the two that registered with helm install fleet-agent. They run
// within the walkthrough, once dev and prod have registered.
func managedAgentSpecs() {
	Context("agents managed from the manager", managedAgentContext)
}

func managedAgentContext() {
	var agents []managedAgent

	// cluster reads a Cluster's status field by JSONPath.
	field := func(a managedAgent, path string) string {
		GinkgoHelper()
		return sh(mgmt.Kubeconfig, "kubectl", "get", "clusters.fleet.cattle.io", "-n", a.clusterNS, a.clusterName, "-o", "jsonpath={"+path+"}")
	}
	// running is the agent's one running, ready pod (a replaced one may still be terminating).
	running := func(ctx context.Context, g Gomega, a managedAgent) *corev1.Pod {
		pods, err := clientset(a.on).CoreV1().Pods(a.agentNS).List(ctx, metav1.ListOptions{LabelSelector: "app=fleet-agent"})
		g.Expect(err).NotTo(HaveOccurred())
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready {
				live = append(live, p)
			}
		}
		g.Expect(live).To(HaveLen(1), "%s: one running agent", a.kind)
		return &live[0]
	}
	deployment := func(ctx context.Context, g Gomega, a managedAgent) *appsv1.Deployment {
		d, err := clientset(a.on).AppsV1().Deployments(a.agentNS).Get(ctx, "fleet-agent", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return d
	}

	BeforeAll(func() {
		agents = []managedAgent{{kind: "imported (local)", clusterNS: "fleet-local", clusterName: "local", on: mgmt, agentNS: "cattle-fleet-local-system"}}
		for _, env := range []string{"dev", "prod"} {
			name := sh(mgmt.Kubeconfig, "kubectl", "get", "clusters.fleet.cattle.io", "-n", "fleet-default", "-l", "env="+env, "-o", "jsonpath={.items[0].metadata.name}")
			on := dev
			if env == "prod" {
				on = prod
			}
			agents = append(agents, managedAgent{kind: "registered (" + env + ")", clusterNS: "fleet-default", clusterName: strings.TrimSpace(name), on: on, agentNS: "cattle-fleet-system"})
		}
	})

	It("gives each agent its own Bundle, which the agent deploys itself, and reports what it was given", func(ctx context.Context) {
		for _, a := range agents {
			Eventually(func(g Gomega) {
				bd := sh(mgmt.Kubeconfig, "kubectl", "get", "bundles.fleet.cattle.io", "-n", a.clusterNS, "fleet-agent-"+a.clusterName,
					"-o", "jsonpath={.status.summary.ready}/{.status.summary.desiredReady}")
				g.Expect(bd).To(Equal("1/1"), a.kind)
				g.Expect(field(a, ".status.agentDeployedGeneration")).To(Equal("0"), a.kind)
				g.Expect(field(a, ".status.agentConfigChanged")).To(BeElementOf("", "false"), a.kind)
				g.Expect(field(a, ".status.agentTLSMode")).To(Equal("system-store"), a.kind)
				g.Expect(field(a, ".status.apiServerURL")).NotTo(BeEmpty(), a.kind)
				g.Expect(field(a, ".status.apiServerCAHash")).NotTo(BeEmpty(), a.kind)
				// The agent's Deployment now belongs to the agent's own release.
				d := deployment(ctx, g, a)
				g.Expect(d.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", "fleet-agent-"+a.clusterName), a.kind)
				running(ctx, g, a)
			}).Should(Succeed())
		}
	})

	It("makes every agent follow a changed check-in interval within one interval", func(ctx context.Context) {
		sh(mgmt.Kubeconfig, "helm", "-n", "cattle-fleet-system", "upgrade", "--reuse-values", "--wait",
			"--set", "agentCheckinInterval=6s", "fleet", "fleet/fleet")
		// The upgrade ran the chart's post-upgrade migration Job on a real node (helm waits for it).
		Expect(sh(mgmt.Kubeconfig, "kubectl", "-n", "cattle-fleet-system", "get", "configmap", "fleet-helm-url-regex-migrated",
			"-o", "jsonpath={.metadata.name}")).To(Equal("fleet-helm-url-regex-migrated"))
		for _, a := range agents {
			Eventually(func(g Gomega) {
				p := running(ctx, g, a)
				g.Expect(p.Spec.Containers[0].Args).To(ContainElement("--checkin-interval=6s"), a.kind)
			}).Should(Succeed())
		}
		// Each Cluster's lastSeen now moves every 6 seconds (to the second): watch three check-ins.
		for _, a := range agents {
			var seen []time.Time
			Eventually(func(g Gomega) {
				t, err := time.Parse(time.RFC3339, field(a, ".status.agent.lastSeen"))
				g.Expect(err).NotTo(HaveOccurred())
				if len(seen) == 0 || !t.Equal(seen[len(seen)-1]) {
					seen = append(seen, t)
				}
				g.Expect(len(seen)).To(BeNumerically(">=", 4), "%s: check-ins seen %v", a.kind, seen)
			}).WithPolling(500 * time.Millisecond).Should(Succeed())
			last := seen[len(seen)-2:]
			Expect(last[1].Sub(last[0])).To(BeNumerically("<=", 8*time.Second), "%s: check-ins %v", a.kind, seen)
		}
	})

	It("shapes a registered cluster's agent by its Cluster's agent settings", func(ctx context.Context) {
		a := agents[1]
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{
			"agentEnvVars":     []corev1.EnvVar{{Name: "FLEET_E2E", Value: "managed"}},
			"agentTolerations": []corev1.Toleration{{Key: "edge", Operator: corev1.TolerationOpExists}},
		}})
		Expect(err).NotTo(HaveOccurred())
		sh(mgmt.Kubeconfig, "kubectl", "patch", "clusters.fleet.cattle.io", "-n", a.clusterNS, a.clusterName, "--type", "merge", "-p", string(patch))
		Eventually(func(g Gomega) {
			p := running(ctx, g, a)
			g.Expect(p.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "FLEET_E2E", Value: "managed"}))
			g.Expect(p.Spec.Tolerations).To(ContainElement(HaveField("Key", "edge")))
			g.Expect(field(a, ".status.agentEnvVarsHash")).NotTo(BeEmpty())
			g.Expect(field(a, ".status.agentConfigChanged")).To(BeElementOf("", "false"))
		}).Should(Succeed())
	})

	It("redeploys the agent of every kind of cluster when redeployAgentGeneration is raised", func(ctx context.Context) {
		before := map[string]string{}
		for _, a := range agents {
			Eventually(func(g Gomega) { before[a.kind] = string(running(ctx, g, a).UID) }).Should(Succeed())
			sh(mgmt.Kubeconfig, "kubectl", "patch", "clusters.fleet.cattle.io", "-n", a.clusterNS, a.clusterName, "--type", "merge",
				"-p", `{"spec":{"redeployAgentGeneration":2}}`)
		}
		for _, a := range agents {
			Eventually(func(g Gomega) {
				g.Expect(string(running(ctx, g, a).UID)).NotTo(Equal(before[a.kind]), "%s: a new agent pod", a.kind)
				g.Expect(field(a, ".status.agentDeployedGeneration")).To(Equal("2"), a.kind)
			}).Should(Succeed())
		}
		// The registered agents kept their identity: no new Cluster appeared.
		out := sh(mgmt.Kubeconfig, "kubectl", "get", "clusters.fleet.cattle.io", "-n", "fleet-default", "-l", "type=walkthrough", "-o", "name")
		Expect(strings.Fields(out)).To(HaveLen(2))
	})
}
