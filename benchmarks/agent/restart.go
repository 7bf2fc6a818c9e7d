package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// RestartResult is the agent restarted with many BundleDeployments Ready: how long until it is
// steady again, and what it wrote while it looked at every one of them again.
type RestartResult struct {
	Date              string  `json:"date"`
	BundleDeployments int     `json:"bundleDeployments"`
	DeploySeconds     float64 `json:"allReadySeconds"`
	// SteadySeconds runs from the stop until the new agent is ready and its work queues are empty.
	SteadySeconds float64 `json:"steadySeconds"`
	WindowSeconds float64 `json:"windowSeconds"`
	// ManagerWrites are the writes to the manager's apiserver in the window after the stop;
	// StatusWrites the BundleDeployment status writes among them.
	ManagerWrites map[string]int `json:"managerWrites"`
	StatusWrites  int            `json:"statusWrites"`
	// HelmReleases is how many Helm release revisions the window wrote downstream (an upgrade or
	// an install writes one each), DownstreamWrites the downstream apiserver's writes in it.
	HelmReleases     int            `json:"helmReleasesWritten"`
	DownstreamWrites map[string]int `json:"downstreamWrites"`
	AgentCPUSeconds  float64        `json:"agentCPUSecondsAfterRestart"`
	AgentPeakRSSMiB  float64        `json:"agentPeakRSSMiBAfterRestart"`
}

// restartWindow is how long the writes after the stop are counted.
const restartWindow = 90 * time.Second

// agentProc is a running agent with where it serves its health and metrics.
type agentProc struct {
	cmd             *exec.Cmd
	health, metrics string
}

func startAgent(fleetBin string, mgr, down *localcluster.Cluster, log *os.File) (*agentProc, error) {
	health, metrics := freeAddr(), freeAddr()
	cmd := exec.Command(fleetBin, "agent", "--kubeconfig", down.Kubeconfig, "--upstream-kubeconfig", mgr.Kubeconfig,
		"--cluster-namespace", clusterNS, "--leader-elect=false", "--health-addr="+health, "--metrics-addr="+metrics)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &agentProc{cmd: cmd, health: "http://" + health, metrics: "http://" + metrics}, nil
}

// steady waits until the agent is ready and has nothing queued, four samples in a row.
func (a *agentProc) steady(timeout time.Duration) error {
	calm := 0
	deadline := time.Now().Add(timeout)
	for calm < 4 {
		if time.Now().After(deadline) {
			return fmt.Errorf("agent not steady after %s", timeout)
		}
		time.Sleep(250 * time.Millisecond)
		busy, err := proc.QueuedWork(a.metrics + "/metrics")
		if proc.HTTPStatus(a.health+"/readyz") != http.StatusOK || err != nil || busy > 0 {
			calm = 0
			continue
		}
		calm++
	}
	return nil
}

func (a *agentProc) stop() {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	_, _ = a.cmd.Process.Wait()
}

// runRestart deploys n BundleDeployments of one ConfigMap each through the agent, then stops it
// and starts it again.
func runRestart(fleetBin, out string, n int) error {
	ctx := context.Background()
	c, err := startClusters(ctx)
	if err != nil {
		return err
	}
	defer c.stop()
	mgr, down, api, kube := c.mgr, c.down, c.api, c.kube
	downKube, err := down.Clientset()
	if err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(os.TempDir(), "fleet-agent-restart-bench.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	agent, err := startAgent(fleetBin, mgr, down, log)
	if err != nil {
		return err
	}
	defer func() { agent.stop() }()
	res := RestartResult{Date: time.Now().UTC().Format(time.RFC3339), BundleDeployments: n, WindowSeconds: restartWindow.Seconds()}
	start := time.Now()
	one := []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  key: value\n"}}
	for i := range n {
		if err := createDeploymentOf(api, fmt.Sprintf("r-%04d", i), one); err != nil {
			return err
		}
	}
	if err := waitReady(ctx, api, n, 30*time.Minute); err != nil {
		return err
	}
	res.DeploySeconds = time.Since(start).Seconds()
	fmt.Printf("%d BundleDeployments of one ConfigMap Ready in %.1f s\n", n, res.DeploySeconds)
	if agent, err = restartAgent(ctx, &res, restartParties{fleetBin: fleetBin, mgr: mgr, down: down, kube: kube, downKube: downKube, api: api, log: log}, agent); err != nil {
		return err
	}
	fmt.Printf("restarted: steady after %.1f s; in %s: %d status writes, %d Helm releases written, manager writes %v, agent CPU %.1f s\n",
		res.SteadySeconds, restartWindow, res.StatusWrites, res.HelmReleases, res.ManagerWrites, res.AgentCPUSeconds)
	return proc.WriteJSON(out, fmt.Sprintf("agent-restart-%d.json", n), res)
}

// restartParties are the clusters and clients a restart is measured with.
type restartParties struct {
	fleetBin       string
	mgr, down      *localcluster.Cluster
	kube, downKube kubernetes.Interface
	api            fleetcontrollers.Interface
	log            *os.File
}

// restartAgent stops the agent, starts it again and fills res; it returns the new agent.
func restartAgent(ctx context.Context, res *RestartResult, p restartParties, agent *agentProc) (*agentProc, error) {
	releases, err := helmReleases(ctx, p.downKube)
	if err != nil {
		return agent, err
	}
	mgrBefore, err := proc.WriteCounts(ctx, p.kube)
	if err != nil {
		return agent, err
	}
	downBefore, err := proc.WriteCounts(ctx, p.downKube)
	if err != nil {
		return agent, err
	}
	start := time.Now()
	agent.stop()
	if agent, err = startAgent(p.fleetBin, p.mgr, p.down, p.log); err != nil {
		return agent, err
	}
	if err := agent.steady(5 * time.Minute); err != nil {
		return agent, err
	}
	res.SteadySeconds = time.Since(start).Seconds()
	time.Sleep(time.Until(start.Add(restartWindow)))
	mgrAfter, err := proc.WriteCounts(ctx, p.kube)
	if err != nil {
		return agent, err
	}
	downAfter, err := proc.WriteCounts(ctx, p.downKube)
	if err != nil {
		return agent, err
	}
	res.ManagerWrites, res.DownstreamWrites = proc.Delta(mgrBefore, mgrAfter), proc.Delta(downBefore, downAfter)
	for k, v := range res.ManagerWrites {
		if strings.Contains(k, "bundledeployments/status") {
			res.StatusWrites += v
		}
	}
	now, err := helmReleases(ctx, p.downKube)
	if err != nil {
		return agent, err
	}
	for name := range now {
		if !releases[name] {
			res.HelmReleases++
		}
	}
	res.AgentCPUSeconds, res.AgentPeakRSSMiB = proc.CPUSeconds(agent.cmd.Process.Pid), proc.PeakRSS(agent.cmd.Process.Pid)
	return agent, nil
}

// helmReleases names every Helm release revision stored downstream (one Secret each).
func helmReleases(ctx context.Context, kube kubernetes.Interface) (map[string]bool, error) {
	out := map[string]bool{}
	opts := metav1.ListOptions{LabelSelector: "owner=helm", Limit: 500}
	for {
		list, err := kube.CoreV1().Secrets("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, s := range list.Items {
			out[s.Namespace+"/"+s.Name] = true
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}
