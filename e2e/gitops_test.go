// Package e2e_test runs the whole system as a user would: a management cluster and a downstream
// cluster from pkg/localcluster, the `fleet controller` and `fleet agent` processes of the built
// binary, a git server with basic auth, and kubectl. Clone-and-apply runs as Jobs; a pod runner
// stands in for the kubelet the management cluster does not have, executing each Job's pod with
// the fleet binary.
package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/localcluster"
	"github.com/fleetgo/fleet/pkg/localserver"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	RunSpecs(t, "fleet end to end")
}

var (
	manager, downstream *localcluster.Cluster
	api                 fleetcontrollers.Interface
	managerKube, down   kubernetes.Interface
	fleetBin            string
	git                 *localserver.GitServer
)

const gitUser, gitPassword = "e2e", "e2e-secret"

// fleetCmd runs the built fleet binary and returns its output.
func fleetCmd(args ...string) string {
	out, err := exec.Command(fleetBin, args...).Output()
	Expect(err).NotTo(HaveOccurred(), "fleet %s", strings.Join(args, " "))
	return string(out)
}

func kubectlApply(c *localcluster.Cluster, manifest string) {
	Expect(testenv.KubectlApply(c.Kubeconfig, manifest, nil)).To(Succeed())
}

var _ = BeforeSuite(func(ctx context.Context) {
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	fleetBin = filepath.Join(root, "bin", "fleet")
	if _, err := os.Stat(fleetBin); err != nil {
		fleetBin, err = gexec.Build("github.com/fleetgo/fleet")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
	}

	var clusters []*localcluster.Cluster
	done := make(chan error, 1)
	go func() {
		var err error
		clusters, err = localcluster.StartAll(ctx, localcluster.Options{Name: "e2e-downstream", Tier: localcluster.Workloads})
		done <- err
	}()
	manager, api, err = testenv.StartWithCRDsOptions(ctx, localcluster.Options{Name: "e2e-manager", Tier: localcluster.Controllers})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(manager.Stop)
	Expect(<-done).To(Succeed())
	downstream = clusters[0]
	DeferCleanup(downstream.Stop)
	managerKube, err = manager.Clientset()
	Expect(err).NotTo(HaveOccurred())
	down, err = downstream.Clientset()
	Expect(err).NotTo(HaveOccurred())

	git, err = localserver.StartGitServer(filepath.Join(GinkgoT().TempDir(), "git"), localserver.BasicAuth{Username: gitUser, Password: gitPassword})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(git.Close)

	// The manager's configuration, as the fleet chart writes it.
	mcfg := manager.RESTConfig()
	conf, _ := json.Marshal(map[string]string{"apiServerURL": mcfg.Host, "apiServerCA": string(mcfg.CAData), "agentCheckinInterval": "2s"})
	_, err = managerKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleet.SystemNamespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) { // (the fleet-crd release lives there)
		Expect(err).NotTo(HaveOccurred())
	}
	_, err = managerKube.CoreV1().ConfigMaps(fleet.SystemNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-controller", Namespace: fleet.SystemNamespace},
		Data:       map[string]string{"config": string(conf)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())

	controller, err := gexec.Start(exec.Command(fleetBin, "controller", "--kubeconfig", manager.Kubeconfig, "--leader-elect=false",
		"--health-addr=", "--metrics-addr=", "--webhook-addr=", "--workers=8", "--git-job-image=fleet:e2e"), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { controller.Terminate().Wait(10 * time.Second) })

	runCtx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	runner := &testenv.PodRunner{Config: manager.RESTConfig(), Kube: managerKube, Binary: fleetBin, Log: GinkgoWriter}
	go runner.Run(runCtx, fleet.DefaultNamespace)

	// The downstream cluster registers the documented way.
	kubectlApply(downstream, fleetCmd("install", "agent-config", "-l", "env=dev", "-l", "type=edge"))
	kubectlApply(downstream, fleetCmd("install", "agent-token", "--kubeconfig", manager.Kubeconfig, "--ttl", "1h"))
	agent, err := gexec.Start(exec.Command(fleetBin, "agent", "--kubeconfig", downstream.Kubeconfig, "--leader-elect=false",
		"--health-addr=", "--metrics-addr=", "--checkin-interval=2s"), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { agent.Terminate().Wait(10 * time.Second) })
}, NodeTimeout(8*time.Minute))

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		for _, c := range []*localcluster.Cluster{manager, downstream} {
			if c != nil {
				c.WriteLogTails(GinkgoWriter, 20)
			}
		}
	}
})

var _ = Describe("GitOps as Jobs", func() {
	It("deploys a pushed commit to the registered cluster and the GitRepo reaches Ready", func(ctx context.Context) {
		var cluster *fleet.Cluster
		Eventually(func(g Gomega) {
			list, err := api.Cluster().List(fleet.DefaultNamespace, metav1.ListOptions{LabelSelector: "env=dev"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Items).To(HaveLen(1))
			cluster = &list.Items[0]
			g.Expect(cluster.Status.Agent.LastSeen.IsZero()).To(BeFalse())
		}).Should(Succeed())

		_, err := managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "git-auth", Namespace: fleet.DefaultNamespace}, Type: corev1.SecretTypeBasicAuth,
			StringData: map[string]string{corev1.BasicAuthUsernameKey: gitUser, corev1.BasicAuthPasswordKey: gitPassword}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		src := GinkgoT().TempDir()
		Expect(os.MkdirAll(filepath.Join(src, "app"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(src, "app", "fleet.yaml"), []byte("defaultNamespace: e2e-app\n"), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(src, "app", "app.yaml"), []byte(fmt.Sprintf(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n---\n"+
				"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n"+
				"  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - {name: web, image: %s}\n", "example.com/web:1")), 0o644)).To(Succeed())
		commit, err := git.Publish(ctx, "e2e", "main", src, "first")
		Expect(err).NotTo(HaveOccurred())

		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "e2e", Namespace: fleet.DefaultNamespace},
			Spec: fleet.GitRepoSpec{Repo: git.RepoURL("e2e"), Branch: "main", ClientSecretName: "git-auth",
				PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
				Targets:         []fleet.GitTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}}}})
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(g Gomega) {
			d, err := down.AppsV1().Deployments("e2e-app").Get(ctx, "web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Status.AvailableReplicas).To(Equal(int32(1)))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "e2e", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gr.Status.Commit).To(Equal(commit))
			g.Expect(gr.Status.GitJobStatus).To(Equal("Current"))
			g.Expect(gr.Status.Display.ReadyBundleDeployments).To(Equal("1/1"))
			g.Expect(gr.Status.ReadyClusters).To(Equal(1))
			c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue), c.Message)
			g.Expect(gr.Status.Display.State).To(Equal("Ready"))
		}).Should(Succeed())
		jobs, err := managerKube.BatchV1().Jobs(fleet.DefaultNamespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(jobs.Items).NotTo(BeEmpty(), "the commit was applied by a Job")
	}, NodeTimeout(5*time.Minute))
})
