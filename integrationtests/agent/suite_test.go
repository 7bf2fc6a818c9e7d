// Package agent_test runs the manager's controllers against a real manager apiserver and the
// agent against a real downstream cluster (scheduler and kwok, so workloads become Ready). The
// tests write Bundles on the manager and read what the agent deployed downstream and the status
// it reported upstream.
package agent_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/agent"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

func TestAgent(t *testing.T) {
	if os.Getenv("AGENT_DEBUG") != "" {
		logrus.SetLevel(logrus.DebugLevel)
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("v", os.Getenv("AGENT_DEBUG"))
	}
	testenv.RunSuite(t, "fleet agent", 60*time.Second, 200*time.Millisecond)
}

const (
	clusterName = "downstream"
	agentNS     = "cattle-fleet-system"
)

var (
	manager, downstream *localcluster.Cluster
	api                 fleetcontrollers.Interface
	local               kubernetes.Interface
	clusterNS           string
	stopAgent           context.CancelFunc
	// agentMetrics is where the in-process agent serves /metrics.
	agentMetrics string
)

var _ = BeforeSuite(func(ctx context.Context) {
	var err error
	manager, api, err = testenv.StartWithCRDs(ctx, "manager")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(manager.Stop)
	downstream, err = localcluster.Start(ctx, localcluster.Options{Name: "downstream", Tier: localcluster.Workloads})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(downstream.Stop)
	local, err = downstream.Clientset()
	Expect(err).NotTo(HaveOccurred())

	stop := testenv.RunController(manager.RESTConfig(), config.Config{AgentCheckinInterval: metav1.Duration{Duration: 2 * time.Second}},
		controller.Options{Clock: managerClock.Now})
	DeferCleanup(func() { Expect(stop()).To(Succeed()) })

	Eventually(func() error {
		_, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: fleet.DefaultNamespace,
			Labels: map[string]string{"env": "test"}}})
		return err
	}).Should(Succeed())
	Eventually(func() string {
		c, err := api.Cluster().Get(fleet.DefaultNamespace, clusterName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		return c.Status.Namespace
	}).ShouldNot(BeEmpty())
	c, _ := api.Cluster().Get(fleet.DefaultNamespace, clusterName, metav1.GetOptions{})
	clusterNS = c.Status.Namespace
	agentMetrics, err = testenv.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	startAgent()
	DeferCleanup(func() { stopAgent() })
}, NodeTimeout(5*time.Minute))

// startAgent runs the agent in-process with the manager's admin credential (registration and
// the agent's own credential are another suite's concern).
func startAgent() {
	ctx, cancel := context.WithCancel(context.Background())
	stopAgent = cancel
	go func() {
		defer GinkgoRecover()
		err := agent.Run(ctx, manager.RESTConfig(), downstream.RESTConfig(), agent.Options{
			Namespace: agentNS, ClusterNamespace: clusterNS, ClusterName: clusterName, ClusterObjectNamespace: fleet.DefaultNamespace,
			CheckinInterval: 2 * time.Second, MonitorInterval: 3 * time.Second, GCInterval: 5 * time.Second, Workers: 4,
			MetricsAddr: agentMetrics,
		})
		Expect(err).NotTo(HaveOccurred())
	}()
}

// managerClock is the manager's clock for Schedules: real time moved by an offset specs set.
var managerClock = &movableClock{}

type movableClock struct{ offset atomic.Int64 }

func (c *movableClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// setTo moves the clock so that it reads t now.
func (c *movableClock) setTo(t time.Time) { c.offset.Store(int64(time.Until(t))) }

var (
	buildOnce sync.Once
	fleetBin  string
)

// startAgentProcess runs the agent as the real `fleet` binary (built once per suite run), for
// the specs that kill it.
func startAgentProcess() *gexec.Session {
	buildOnce.Do(func() {
		var err error
		fleetBin, err = gexec.Build("github.com/fleetgo/fleet")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
	})
	cmd := exec.Command(fleetBin, "agent", "--kubeconfig", downstream.Kubeconfig, "--upstream-kubeconfig", manager.Kubeconfig,
		"--cluster-namespace", clusterNS, "--namespace", agentNS, "--leader-elect=false", "--health-addr=", "--metrics-addr=",
		"--monitor-interval=3s", "--workers=4")
	if os.Getenv("AGENT_DEBUG") != "" {
		cmd.Args = append(cmd.Args, "--debug")
	}
	s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	return s
}

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		for _, c := range []*localcluster.Cluster{manager, downstream} {
			if c != nil {
				c.WriteLogTails(GinkgoWriter, 20)
			}
		}
	}
})
