// Package e2e_test runs the whole system as a user would, following the documented journey: a
// management cluster and two downstream clusters from internal/harness/localcluster, the `fleet controller`
// and `fleet agent` processes of the built binary, a git server with basic auth holding the
// example repository of dev/example, a chart repository, and kubectl.
//
//   - The controller runs GitRepo clone-and-apply as Jobs; a pod runner stands in for the kubelet
//     the management cluster does not have, executing each Job's pod with the fleet binary.
//   - The management cluster's own agent is installed by the controller through the bootstrap
//     Cluster fleet-local/local; the agent process stands in for its pod.
//   - Downstream "dev" (env=dev, type=edge) registers through the fleet-agent chart, installed
//     with the Helm SDK with the values of a ClusterRegistrationToken's Secret.
//   - Downstream "prod" (env=prod, type=alpha) sits in a network namespace that only reaches
//     out; it registers with `fleet install agent-config` and `fleet install agent-token`.
package e2e_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/dev/example"
	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller/bootstrap"
	"github.com/fleetgo/fleet/internal/harness/chartinstall"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

func TestE2E(t *testing.T) {
	testenv.RunSuite(t, "fleet end to end", 2*time.Minute, 250*time.Millisecond)
}

// downstreamCluster is a registered downstream cluster and its agent.
type downstreamCluster struct {
	*localcluster.Cluster
	kube kubernetes.Interface
	// name is the Cluster's name on the manager (from its kube-system UID).
	name  string
	agent *fleetProcess
}

// fleetProcess is a restartable process of the fleet binary; its output goes to a log file whose
// tail a failed spec prints.
type fleetProcess struct {
	name string
	bin  string
	args []string
	p    *localcluster.Process
}

func (f *fleetProcess) start() {
	var err error
	f.p, err = localcluster.StartProcess(f.name, f.bin, f.args, logDir)
	Expect(err).NotTo(HaveOccurred(), f.name)
}

func (f *fleetProcess) stop() {
	if f.p != nil {
		f.p.Stop()
	}
}

var (
	manager     *localcluster.Cluster
	api         fleetcontrollers.Interface
	managerKube kubernetes.Interface
	dev, prod   *downstreamCluster
	netns       *localcluster.NetNS
	fleetBin    string
	git         *localserver.GitServer
	charts      *localserver.ChartRepo
	root        string
	controller  *fleetProcess
	localAgent  *fleetProcess
	processes   []*fleetProcess
	logDir      string
)

const gitUser, gitPassword = "e2e", "e2e-secret"

// fleetCmd runs the built fleet binary and returns its output.
func fleetCmd(args ...string) string {
	out, err := exec.Command(fleetBin, args...).Output()
	Expect(err).NotTo(HaveOccurred(), "fleet %s", strings.Join(args, " "))
	return string(out)
}

// startFleet starts the fleet binary with args; wrap, when set, makes the command (to run it in a
// network namespace).
func startFleet(name string, wrap func(string, ...string) *exec.Cmd, args ...string) *fleetProcess {
	f := &fleetProcess{name: name, bin: fleetBin, args: args}
	if wrap != nil {
		c := wrap(fleetBin, args...)
		f.bin, f.args = c.Path, c.Args[1:]
	}
	f.start()
	processes = append(processes, f)
	DeferCleanup(f.stop)
	return f
}

var _ = BeforeSuite(func(ctx context.Context) {
	defer func() {
		if CurrentSpecReport().Failed() {
			dumpLogs()
		}
	}()
	var err error
	root, err = testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	fleetBin = testenv.FleetBinary()

	logDir = GinkgoT().TempDir()
	netns, err = localcluster.NewNetNS(fmt.Sprintf("fleet-e2e-%d", os.Getpid()), os.Getpid()%200+20)
	Expect(err).NotTo(HaveOccurred(), "creating a network namespace (needs root)")
	DeferCleanup(netns.Delete)

	var downstreams []*localcluster.Cluster
	done := make(chan error, 1)
	go func() {
		var err error
		downstreams, err = localcluster.StartAll(ctx,
			localcluster.Options{Name: "e2e-dev", Tier: localcluster.Workloads},
			localcluster.Options{Name: "e2e-prod", Tier: localcluster.Workloads, NetNS: netns.Name})
		done <- err
	}()
	// The manager listens on every address, so the cluster in the network namespace reaches it
	// at the host's end of its link.
	manager, api, err = testenv.StartWithCRDsOptions(ctx, localcluster.Options{Name: "e2e-manager", Tier: localcluster.Controllers,
		BindAddress: "0.0.0.0", ExtraIPs: []net.IP{netns.HostIP}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(manager.Stop)
	Expect(<-done).To(Succeed())
	for _, c := range downstreams {
		DeferCleanup(c.Stop)
	}
	managerKube, err = manager.Clientset()
	Expect(err).NotTo(HaveOccurred())
	dev, prod = &downstreamCluster{Cluster: downstreams[0]}, &downstreamCluster{Cluster: downstreams[1]}
	for _, d := range []*downstreamCluster{dev, prod} {
		d.kube, err = kubernetes.NewForConfig(d.RESTConfig()) // (prod's dials from inside its namespace)
		Expect(err).NotTo(HaveOccurred())
		ks, err := d.kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		d.name = registration.ClusterName(string(ks.UID))
	}

	git, err = localserver.StartGitServer(filepath.Join(GinkgoT().TempDir(), "git"), localserver.BasicAuth{Username: gitUser, Password: gitPassword})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(git.Close)
	charts, err = localserver.StartChartRepo(filepath.Join(GinkgoT().TempDir(), "charts"), localserver.BasicAuth{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(charts.Close)
	Expect(example.AddCharts(root, charts)).To(Succeed())

	// The manager's configuration, as the fleet chart writes it: agents reach the manager at the
	// host's end of the namespace's link.
	managerURL := testenv.HostURL(manager, netns)
	cm, err := config.Config{APIServerURL: managerURL, APIServerCA: string(manager.RESTConfig().CAData),
		AgentCheckinInterval: metav1.Duration{Duration: 2 * time.Second}}.ConfigMap(fleet.SystemNamespace)
	Expect(err).NotTo(HaveOccurred())
	_, err = managerKube.CoreV1().ConfigMaps(fleet.SystemNamespace).Create(ctx, cm, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())

	// Every process logs at debug level: logs_test.go checks no line holds a secret.
	controller = startFleet("controller", nil, "controller", "--debug", "--kubeconfig", manager.Kubeconfig, "--leader-elect=false",
		"--health-addr=", "--metrics-addr=", "--webhook-addr=", "--workers=8", "--git-job-image=fleet:e2e")
	runCtx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	runner := &testenv.PodRunner{Config: manager.RESTConfig(), Kube: managerKube, Binary: fleetBin, Log: GinkgoWriter}
	for _, ns := range []string{fleet.DefaultNamespace, fleet.LocalNamespace} {
		go runner.Run(runCtx, ns)
	}

	// The management cluster's own agent: the controller installs it through the bootstrap
	// Cluster's kubeconfig Secret; the process runs what its pod would.
	Eventually(func(g Gomega) {
		c, err := api.Cluster().Get(fleet.LocalNamespace, bootstrap.LocalClusterName, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		cond := fleet.FindCondition(c.Status.Conditions, "Imported")
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(corev1.ConditionTrue), cond.Message)
	}).Should(Succeed())
	localAgent = startFleet("agent-local", nil, "agent", "--debug", "--kubeconfig", manager.Kubeconfig, "--namespace", bootstrap.LocalAgentNamespace,
		"--leader-elect=false", "--health-addr=", "--metrics-addr=", "--checkin-interval=2s")

	// dev registers through the fleet-agent chart with a token's values, as `helm install` does.
	Expect(testenv.KubectlApply(manager.Kubeconfig, "apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterRegistrationToken\n"+
		"metadata:\n  name: dev-token\n  namespace: fleet-default\nspec:\n  ttl: 1h\n", nil)).To(Succeed())
	var values map[string]any
	Eventually(func(g Gomega) {
		s, err := managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Get(ctx, "dev-token", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(yaml.Unmarshal(s.Data[registration.ValuesKey], &values)).To(Succeed())
	}).Should(Succeed())
	values["labels"] = map[string]any{"env": example.DevLabels["env"], "type": example.DevLabels["type"]}
	_, err = chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{Kubeconfig: dev.Kubeconfig, Namespace: fleet.SystemNamespace,
		ReleaseName: "fleet-agent", ChartDir: filepath.Join(root, "charts", "fleet-agent"), Values: values})
	Expect(err).NotTo(HaveOccurred())
	dev.agent = startFleet("agent-dev", nil, "agent", "--debug", "--kubeconfig", dev.Kubeconfig, "--leader-elect=false",
		"--health-addr=", "--metrics-addr=", "--checkin-interval=2s")

	// prod only reaches out: kubectl and the agent run inside its network namespace.
	Expect(testenv.KubectlApply(prod.Kubeconfig, fleetCmd("install", "agent-config", "-l", "env=prod", "-l", "type=alpha"), netns.Command)).To(Succeed())
	Expect(testenv.KubectlApply(prod.Kubeconfig, fleetCmd("install", "agent-token", "--kubeconfig", manager.Kubeconfig, "--ttl", "1h"), netns.Command)).To(Succeed())
	prod.agent = startFleet("agent-prod", netns.Command, "agent", "--debug", "--kubeconfig", prod.Kubeconfig, "--leader-elect=false",
		"--health-addr=", "--metrics-addr=", "--checkin-interval=2s")

	_, err = managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, gitAuth(fleet.DefaultNamespace), metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = managerKube.CoreV1().Secrets(fleet.LocalNamespace).Create(ctx, gitAuth(fleet.LocalNamespace), metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(8*time.Minute))

func gitAuth(ns string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-auth", Namespace: ns}, Type: corev1.SecretTypeBasicAuth,
		StringData: map[string]string{corev1.BasicAuthUsernameKey: gitUser, corev1.BasicAuthPasswordKey: gitPassword}}
}

// A failed spec prints the last lines of every fleet process and control-plane component.
var _ = AfterEach(func() {
	if CurrentSpecReport().Failed() {
		dumpLogs()
	}
})

func dumpLogs() {
	for _, f := range processes {
		if f.p != nil {
			fmt.Fprintf(GinkgoWriter, "----- %s (%s), last 40 lines -----\n%s\n", f.name, f.p.LogPath(), f.p.Tail(40))
		}
	}
	for _, c := range []*localcluster.Cluster{manager, clusterOf(dev), clusterOf(prod)} {
		if c != nil {
			c.WriteLogTails(GinkgoWriter, 20)
		}
	}
}

func clusterOf(d *downstreamCluster) *localcluster.Cluster {
	if d == nil {
		return nil
	}
	return d.Cluster
}

// newGitRepo creates a GitRepo of the example repository.
func newGitRepo(ns, name string, mutate func(*fleet.GitRepoSpec)) {
	gr := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleet.GitRepoSpec{Repo: git.RepoURL(example.RepoName), Branch: example.Branch, ClientSecretName: "git-auth",
			PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}}
	if mutate != nil {
		mutate(&gr.Spec)
	}
	_, err := api.GitRepo().Create(gr)
	Expect(err).NotTo(HaveOccurred())
}

// expectGitRepoReady waits until the GitRepo has applied commit and every deployment is ready.
func expectGitRepoReady(ns, name, commit string, deployments string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		gr, err := api.GitRepo().Get(ns, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gr.Status.Commit).To(Equal(commit))
		g.Expect(gr.Status.Display.ReadyBundleDeployments).To(Equal(deployments))
		c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(corev1.ConditionTrue), c.Message)
	}, 3*time.Minute).Should(Succeed())
}

func configMapData(kube kubernetes.Interface, ns, name string) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return cm.Data, nil
	}
}

func notFound(get func() error) func() bool {
	return func() bool { return apierrors.IsNotFound(get()) }
}

// removeGitRepo deletes a GitRepo and waits until its BundleDeployments are gone from every
// cluster, so that specs which count a cluster's bundles do not see it, in whatever order the
// containers run.
func removeGitRepo(ns, name string) {
	GinkgoHelper()
	err := api.GitRepo().Delete(ns, name, &metav1.DeleteOptions{})
	if !apierrors.IsNotFound(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(func() int {
		list, err := api.BundleDeployment().List("", metav1.ListOptions{LabelSelector: fleet.RepoLabel + "=" + name})
		Expect(err).NotTo(HaveOccurred())
		return len(list.Items)
	}, 2*time.Minute).Should(BeZero(), "the BundleDeployments of GitRepo %s/%s", ns, name)
}
