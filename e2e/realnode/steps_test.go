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
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/harness/localcluster"
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

	managedAgentSpecs()
	statusSpecs()

	It("pushes the same charts to an OCI registry, from which Helm installs them", func(ctx context.Context) {
		charts, err := filepath.Glob(filepath.Join(root, "bin", "charts", "*.tgz"))
		Expect(err).NotTo(HaveOccurred())
		Expect(charts).To(HaveLen(3))
		var version string
		for _, c := range charts {
			// What `make charts-push REGISTRY=... INSECURE=1` runs for each chart.
			sh(mgmt.Kubeconfig, "helm", "push", c, "oci://"+registry+"/charts", "--plain-http")
			if strings.HasPrefix(filepath.Base(c), "fleet-agent-") {
				version = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(c), "fleet-agent-"), ".tgz")
			}
		}
		out := sh(prod.Kubeconfig, "helm", "-n", "oci-check", "install", "--create-namespace", "--plain-http", "--version", version,
			"--set", "token=unused", "--set", "apiServerURL="+mgmt.Server,
			"fleet-agent-oci", "oci://"+registry+"/charts/fleet-agent")
		Expect(out).To(ContainSubstring("STATUS: deployed"))
		Expect(sh(prod.Kubeconfig, "helm", "-n", "oci-check", "get", "manifest", "fleet-agent-oci")).To(ContainSubstring("image: ghcr.io/fleetgo/fleet:" + tag))
		sh(prod.Kubeconfig, "helm", "-n", "oci-check", "uninstall", "--wait", "fleet-agent-oci")
	})

	Context("bad input", func() {
		var bad *localcluster.Cluster
		var values []byte

		BeforeAll(func(ctx context.Context) {
			var err error
			bad, err = localcluster.Start(ctx, nodeOptions("wt-bad", newNet("bad", 3)))
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(bad.Stop)
			extra = append(extra, bad)
			out, err := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", mgmt.Kubeconfig, "-n", "fleet-default",
				"get", "secret", "new-token", "-o", "jsonpath={.data.values}").Output()
			Expect(err).NotTo(HaveOccurred())
			values, err = base64.StdEncoding.DecodeString(string(out))
			Expect(err).NotTo(HaveOccurred())
		})

		// install writes values with overrides and installs (or upgrades) the agent chart on bad.
		install := func(overrides map[string]any, args ...string) {
			GinkgoHelper()
			var v map[string]any
			Expect(yaml.Unmarshal(values, &v)).To(Succeed())
			for k, val := range overrides {
				v[k] = val
			}
			v["labels"] = map[string]any{"env": "bad"}
			data, err := yaml.Marshal(v)
			Expect(err).NotTo(HaveOccurred())
			file := filepath.Join(work, "values-bad.yaml")
			Expect(os.WriteFile(file, data, 0o644)).To(Succeed())
			sh(bad.Kubeconfig, "helm", append([]string{"-n", "cattle-fleet-system", "upgrade", "--install", "--create-namespace",
				"--values", file, "fleet-agent", "fleet/fleet-agent"}, args...)...)
		}
		// uninstall removes the agent chart from bad and waits until no agent pod is left. A pod
		// of the previous install that outlives it reads the bootstrap Secret the next install
		// writes at its next retry: with that install's good values it would register bad.
		uninstall := func(ctx context.Context) {
			GinkgoHelper()
			sh(bad.Kubeconfig, "helm", "-n", "cattle-fleet-system", "uninstall", "--wait", "--cascade", "foreground", "fleet-agent")
			cs := clientset(bad)
			Eventually(func(g Gomega) {
				pods, err := cs.CoreV1().Pods("cattle-fleet-system").List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(pods.Items).To(BeEmpty())
			}).Should(Succeed())
		}
		// registrationFailed waits for the agent's RegistrationFailed Event naming want, and checks
		// its pod says the same in its log and runs on without restarting.
		registrationFailed := func(ctx context.Context, want string) {
			GinkgoHelper()
			cs := clientset(bad)
			Eventually(func(g Gomega) {
				evs, err := cs.CoreV1().Events("cattle-fleet-system").List(ctx, metav1.ListOptions{FieldSelector: "reason=RegistrationFailed"})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(evs.Items).NotTo(BeEmpty())
				g.Expect(evs.Items[len(evs.Items)-1].Message).To(ContainSubstring(want))
				g.Expect(evs.Items[len(evs.Items)-1].InvolvedObject.Name).To(Equal("fleet-agent-bootstrap"))
			}).Should(Succeed())
			// The agent's pod (a previous install's may still be terminating).
			var p corev1.Pod
			Eventually(func(g Gomega) {
				pods, err := cs.CoreV1().Pods("cattle-fleet-system").List(ctx, metav1.ListOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				var live []corev1.Pod
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil {
						live = append(live, p)
					}
				}
				g.Expect(live).To(HaveLen(1))
				p = live[0]
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				logs, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(string(logs)).To(ContainSubstring(want))
			}).Should(Succeed())
			p2, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(p2.Status.Phase).To(Equal(corev1.PodRunning))
			Expect(p2.Status.ContainerStatuses[0].RestartCount).To(BeZero(), "no crash loop")
		}

		It("an agent given a wrong apiServerURL says why in its log and in an Event, and keeps trying", func(ctx context.Context) {
			wrong := "https://" + mgmtNet.NSIP.String() + ":1"
			install(map[string]any{"apiServerURL": wrong})
			registrationFailed(ctx, "registering with the manager at "+wrong)
		})

		It("an agent given the wrong CA says the certificate is not trusted", func(ctx context.Context) {
			uninstall(ctx)
			install(map[string]any{"apiServerCA": string(dev.RESTConfig().CAData)})
			registrationFailed(ctx, "certificate signed by unknown authority")
		})

		It("an image that cannot be pulled shows in the pod's events, and no Cluster is registered", func(ctx context.Context) {
			uninstall(ctx)
			install(nil, "--set", "image.tag=no-such-tag")
			cs := clientset(bad)
			Eventually(func(g Gomega) {
				evs, err := cs.CoreV1().Events("cattle-fleet-system").List(ctx, metav1.ListOptions{FieldSelector: "reason=Failed"})
				g.Expect(err).NotTo(HaveOccurred())
				var msgs []string
				for _, e := range evs.Items {
					msgs = append(msgs, e.Message)
				}
				g.Expect(strings.Join(msgs, "\n")).To(ContainSubstring(`Failed to pull image "ghcr.io/fleetgo/fleet:no-such-tag"`))
			}).Should(Succeed())
			out := sh(mgmt.Kubeconfig, "kubectl", "get", "clusters.fleet.cattle.io", "-A", "-l", "env=bad", "-o", "name")
			Expect(strings.TrimSpace(out)).To(BeEmpty(), "a cluster whose agent never ran has not checked in")
		})
	})
})
