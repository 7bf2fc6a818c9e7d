package realnode_test

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The README's walkthrough, command for command (README: "Install"). Only the addresses differ:
// the Helm repository and the manager are local.
var _ = Describe("the walkthrough", Ordered, func() {
	It("installs fleet-crd and fleet from the Helm repository; the controller and the local agent run from the pushed image", func(ctx context.Context) {
		sh(mgmt.Kubeconfig, "helm", "repo", "add", "fleet", chartRepoURL)
		sh(mgmt.Kubeconfig, "helm", "-n", "cattle-fleet-system", "install", "--create-namespace", "--wait", "fleet-crd", "fleet/fleet-crd")
		ca := filepath.Join(work, "ca.pem")
		Expect(os.WriteFile(ca, mgmt.RESTConfig().CAData, 0o644)).To(Succeed())
		sh(mgmt.Kubeconfig, "helm", "-n", "cattle-fleet-system", "install", "--create-namespace", "--wait",
			"--set", "apiServerURL="+mgmt.Server, "--set-file", "apiServerCA="+ca, "fleet", "fleet/fleet")

		out := sh(mgmt.Kubeconfig, "kubectl", "get", "pods", "-n", "cattle-fleet-system")
		Expect(out).To(MatchRegexp(`(?m)^fleet-controller-\S+\s+1/1\s+Running`))
		cs := clientset(mgmt)
		image := "ghcr.io/fleetgo/fleet:" + tag
		for _, ns := range []string{"cattle-fleet-system", "cattle-fleet-local-system"} {
			Eventually(func(g Gomega) {
				pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pods.Items).NotTo(BeEmpty())
				for _, p := range pods.Items {
					g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "%s/%s", ns, p.Name)
					g.Expect(p.Spec.Containers[0].Image).To(Equal(image))
					g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue(), "%s/%s", ns, p.Name)
				}
			}).Should(Succeed(), ns)
		}
	})

	It("registers dev and prod with a ClusterRegistrationToken's values and helm install fleet-agent", func(ctx context.Context) {
		token := filepath.Join(work, "token.yaml")
		Expect(os.WriteFile(token, []byte("kind: ClusterRegistrationToken\napiVersion: \"fleet.cattle.io/v1alpha1\"\n"+
			"metadata:\n  name: new-token\n  namespace: fleet-default\nspec:\n  ttl: 240h\n"), 0o644)).To(Succeed())
		sh(mgmt.Kubeconfig, "kubectl", "apply", "-f", token)
		// kubectl -n fleet-default get secret new-token -o 'jsonpath={.data.values}' | base64 --decode > values.yaml
		var values []byte
		Eventually(func(g Gomega) {
			out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", mgmt.Kubeconfig, "-n", "fleet-default",
				"get", "secret", "new-token", "-o", "jsonpath={.data.values}").Output()
			g.Expect(err).NotTo(HaveOccurred())
			values, err = base64.StdEncoding.DecodeString(string(out))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(values).NotTo(BeEmpty())
		}).Should(Succeed())
		for _, c := range []struct {
			kubeconfig, env string
		}{{dev.Kubeconfig, "dev"}, {prod.Kubeconfig, "prod"}} {
			// printf 'labels:\n  env: dev\n  type: edge\n' >> values.yaml
			file := filepath.Join(work, "values-"+c.env+".yaml")
			Expect(os.WriteFile(file, append(values, []byte("labels:\n  env: "+c.env+"\n  type: walkthrough\n")...), 0o644)).To(Succeed())
			sh(c.kubeconfig, "helm", "repo", "add", "fleet", chartRepoURL)
			sh(c.kubeconfig, "helm", "-n", "cattle-fleet-system", "install", "--create-namespace", "--values", file,
				"fleet-agent", "fleet/fleet-agent")
		}
		Eventually(func(g Gomega) {
			out := sh(mgmt.Kubeconfig, "kubectl", "get", "clusters.fleet.cattle.io", "-n", "fleet-default", "-l", "type=walkthrough",
				"-o", "jsonpath={range .items[*]}{.metadata.labels.env} {.status.agent.lastSeen}{\"\\n\"}{end}")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			g.Expect(lines).To(HaveLen(2))
			for _, l := range lines {
				g.Expect(strings.Fields(l)).To(HaveLen(2), "a Cluster that has not checked in: %q", l)
			}
		}).Should(Succeed())
		// (After registering, the agent restarts with its own credential: a new ReplicaSet.)
		for _, c := range []struct{ name, kubeconfig string }{{"dev", dev.Kubeconfig}, {"prod", prod.Kubeconfig}} {
			Eventually(func(g Gomega) {
				out := sh(c.kubeconfig, "kubectl", "get", "pods", "-n", "cattle-fleet-system")
				g.Expect(out).To(MatchRegexp(`(?m)^fleet-agent-\S+\s+1/1\s+Running`), c.name)
			}).Should(Succeed())
		}
	})

	It("deploys a GitRepo through a gitjob Job whose pod clones and applies, and through the agents' pods", func(ctx context.Context) {
		src := filepath.Join(work, "repo-src")
		Expect(os.MkdirAll(filepath.Join(src, "app"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(src, "app", "configmap.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\n"+
			"metadata:\n  name: walkthrough\ndata:\n  hello: world\n"), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(src, "app", "fleet.yaml"), []byte("defaultNamespace: walkthrough\n"), 0o644)).To(Succeed())
		_, err := git.Publish(ctx, "walkthrough", "main", src, "a ConfigMap")
		Expect(err).NotTo(HaveOccurred())

		gitrepo := filepath.Join(work, "gitrepo.yaml")
		Expect(os.WriteFile(gitrepo, []byte("kind: GitRepo\napiVersion: fleet.cattle.io/v1alpha1\nmetadata:\n  name: walkthrough\n"+
			"  namespace: fleet-default\nspec:\n  repo: "+git.RepoURL("walkthrough")+"\n  branch: main\n  paths:\n  - app\n"+
			"  targets:\n  - clusterSelector:\n      matchLabels:\n        type: walkthrough\n"), 0o644)).To(Succeed())
		sh(mgmt.Kubeconfig, "kubectl", "apply", "-f", gitrepo)

		// The clone-and-apply ran as a Job's pod on the management cluster's node.
		Eventually(func(g Gomega) {
			pods, err := clientset(mgmt).CoreV1().Pods("fleet-default").List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			succeeded := 0
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodSucceeded && p.Spec.NodeName == mgmt.Name+"-node" {
					succeeded++
				}
			}
			g.Expect(succeeded).To(BeNumerically(">=", 1), "a gitjob pod that ran to completion")
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			out := sh(mgmt.Kubeconfig, "kubectl", "get", "gitrepo", "-n", "fleet-default", "walkthrough",
				"-o", "jsonpath={.status.display.readyBundleDeployments} {.status.conditions[?(@.type==\"Ready\")].status}")
			g.Expect(strings.Fields(out)).To(Equal([]string{"2/2", "True"}))
		}).Should(Succeed())
		for _, c := range []string{dev.Kubeconfig, prod.Kubeconfig} {
			out := sh(c, "kubectl", "get", "configmap", "-n", "walkthrough", "walkthrough", "-o", "jsonpath={.data.hello}")
			Expect(out).To(Equal("world"))
		}
	})
})
