// Command agent measures `fleet agent`: the time for one BundleDeployment of ten resources to be
// reported Ready, the time for fifty such BundleDeployments to all be Ready, and the agent's
// peak RSS and CPU seconds. A real manager apiserver holds the BundleDeployments and Contents
// (written directly, no manager controllers), a real downstream cluster with a scheduler and kwok
// runs the workloads, and the agent is the real binary.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Result is one run.
type Result struct {
	Date               string  `json:"date"`
	ResourcesPerBundle int     `json:"resourcesPerBundle"`
	OneReadySeconds    float64 `json:"oneBundleDeploymentReadySeconds"`
	Many               int     `json:"bundleDeployments"`
	ManyReadySeconds   float64 `json:"allReadySeconds"`
	AgentPeakRSSMiB    float64 `json:"agentPeakRSSMiB"`
	// AgentPeakRSSOneMiB is the peak after the first BundleDeployment, before the fifty.
	AgentPeakRSSOneMiB float64 `json:"agentPeakRSSAfterOneMiB"`
	AgentCPUSeconds    float64 `json:"agentCPUSeconds"`
	// ManagerWrites counts the agent's writes to the manager's apiserver by verb and resource
	// while the fifty were rolled out.
	ManagerWrites map[string]int `json:"managerWrites"`
	// RawManyReadySeconds is the floor the cluster sets: the same objects created directly
	// (a namespace and ten objects per set, all sets at once) until every Deployment is
	// available.
	RawManyReadySeconds float64 `json:"rawAllReadySeconds"`
	GoalOneSeconds      float64 `json:"goalOneSeconds"`
	GoalManySeconds     float64 `json:"goalManySeconds"`
	GoalPeakRSSMiB      float64 `json:"goalPeakRSSMiB"`
}

const (
	clusterNS   = "cluster-bench"
	profileAddr = "127.0.0.1:6062"
)

var (
	profileDir string
	agentDebug bool
)

func main() {
	fleetBin := flag.String("fleet", "bin/fleet", "fleet binary")
	out := flag.String("out", "benchmarks/results", "results folder")
	many := flag.Int("bundles", 50, "BundleDeployments in the second phase")
	flag.StringVar(&profileDir, "profile", "", "folder for the agent's CPU profile of the second phase and its heap profile")
	flag.BoolVar(&agentDebug, "debug", false, "run the agent with --debug (its log: fleet-agent-bench.log in the temp folder)")
	restart := flag.Int("restart", 0, "run only the restart experiment: this many BundleDeployments of one ConfigMap Ready, then the agent restarted")
	flag.Parse()
	if *restart > 0 {
		if err := runRestart(*fleetBin, *out, *restart); err != nil {
			fmt.Fprintln(os.Stderr, "agent restart benchmark:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*fleetBin, *out, *many); err != nil {
		fmt.Fprintln(os.Stderr, "agent benchmark:", err)
		os.Exit(1)
	}
}

// benchClusters are a manager apiserver with Fleet's CRDs and the agent's cluster namespace, and
// a downstream cluster with a scheduler and kwok.
type benchClusters struct {
	mgr, down *localcluster.Cluster
	api       fleetcontrollers.Interface
	kube      kubernetes.Interface
}

// startClusters starts both clusters; stop takes them down.
func startClusters(ctx context.Context) (*benchClusters, error) {
	c := &benchClusters{}
	var err error
	if c.mgr, c.api, err = testenv.StartWithCRDs(ctx, "bench-manager"); err != nil {
		return nil, err
	}
	if c.down, err = localcluster.Start(ctx, localcluster.Options{Name: "bench-downstream", Tier: localcluster.Workloads}); err != nil {
		c.stop()
		return nil, err
	}
	if c.kube, err = c.mgr.Clientset(); err == nil {
		_, err = c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}}, metav1.CreateOptions{})
	}
	if err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *benchClusters) stop() {
	if c.down != nil {
		c.down.Stop()
	}
	c.mgr.Stop()
}

func run(fleetBin, out string, many int) error {
	ctx := context.Background()
	c, err := startClusters(ctx)
	if err != nil {
		return err
	}
	defer c.stop()
	mgr, down, api, kube := c.mgr, c.down, c.api, c.kube

	res := Result{Date: time.Now().UTC().Format(time.RFC3339), ResourcesPerBundle: 10, Many: many,
		GoalOneSeconds: 0.5, GoalManySeconds: 15, GoalPeakRSSMiB: 130}
	if res.RawManyReadySeconds, err = rawBaseline(ctx, down, many); err != nil {
		return err
	}
	fmt.Printf("raw: %d sets of the same 10 objects created directly, all Deployments available in %.2fs\n", many, res.RawManyReadySeconds)

	logFile, err := os.Create(filepath.Join(os.TempDir(), "fleet-agent-bench.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	agent := exec.Command(fleetBin, "agent", "--kubeconfig", down.Kubeconfig, "--upstream-kubeconfig", mgr.Kubeconfig,
		"--cluster-namespace", clusterNS, "--leader-elect=false", "--health-addr=", "--metrics-addr=")
	if profileDir != "" {
		agent.Args = append(agent.Args, "--profile-addr="+profileAddr)
	}
	if agentDebug {
		agent.Args = append(agent.Args, "--debug")
	}
	agent.Stdout, agent.Stderr = logFile, logFile
	if err := agent.Start(); err != nil {
		return err
	}
	defer func() { _ = agent.Process.Kill(); _, _ = agent.Process.Wait() }()
	time.Sleep(2 * time.Second) // the agent's informer is up before the clock starts

	start := time.Now()
	if err := createDeployment(api, "one"); err != nil {
		return err
	}
	if err := waitReady(ctx, api, 1, 2*time.Minute); err != nil {
		return err
	}
	res.OneReadySeconds = time.Since(start).Seconds()
	res.AgentPeakRSSOneMiB = proc.PeakRSS(agent.Process.Pid)
	fmt.Printf("one BundleDeployment of 10 resources Ready in %.2fs; agent peak RSS so far %.0f MiB\n", res.OneReadySeconds, res.AgentPeakRSSOneMiB)

	cpuDone := make(chan error, 1)
	if profileDir != "" {
		go func() { cpuDone <- proc.SaveProfile(profileAddr, profileDir, "profile?seconds=20", "cpu.pprof") }()
	}
	before, err := proc.WriteCounts(ctx, kube)
	if err != nil {
		return err
	}
	start = time.Now()
	for i := 0; i < many; i++ {
		if err := createDeployment(api, fmt.Sprintf("many-%02d", i)); err != nil {
			return err
		}
	}
	if err := waitReady(ctx, api, many+1, 5*time.Minute); err != nil {
		return err
	}
	res.ManyReadySeconds = time.Since(start).Seconds()
	after, err := proc.WriteCounts(ctx, kube)
	if err != nil {
		return err
	}
	res.ManagerWrites = map[string]int{}
	for k, v := range after {
		// The benchmark's own creates are not the agent's.
		if d := v - before[k]; d > 0 && !strings.HasPrefix(k, "POST ") {
			res.ManagerWrites[k] = d
		}
	}
	res.AgentPeakRSSMiB = proc.PeakRSS(agent.Process.Pid)
	res.AgentCPUSeconds = proc.CPUSeconds(agent.Process.Pid)
	fmt.Printf("%d BundleDeployments of 10 resources all Ready in %.2fs; agent peak RSS %.0f MiB, CPU %.1f s\n",
		many, res.ManyReadySeconds, res.AgentPeakRSSMiB, res.AgentCPUSeconds)
	fmt.Printf("agent writes to the manager: %v\n", res.ManagerWrites)
	if profileDir != "" {
		if err := <-cpuDone; err != nil {
			return err
		}
		if err := proc.SaveProfile(profileAddr, profileDir, "heap", "heap.pprof"); err != nil {
			return err
		}
		if err := proc.SaveProfile(profileAddr, profileDir, "heap?debug=1", "memstats.txt"); err != nil {
			return err
		}
		if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", agent.Process.Pid)); err == nil {
			_ = os.WriteFile(filepath.Join(profileDir, "proc-status.txt"), status, 0o644)
		}
	}
	return proc.WriteJSON(out, "agent.json", res)
}

// createDeployment writes a Content and a BundleDeployment of two Deployments and eight
// ConfigMaps in their own namespace, as the manager would.
func createDeployment(api fleetcontrollers.Interface, name string) error {
	return createDeploymentOf(api, name, benchResources())
}

// createDeploymentOf writes a Content of resources and a BundleDeployment of it in a namespace of
// its own, as the manager would.
func createDeploymentOf(api fleetcontrollers.Interface, name string, resources []fleet.BundleResource) error {
	manifest, err := target.Manifest(resources)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(manifest)
	_ = zw.Close()
	contentName := target.ContentName(manifest)
	if _, err := api.Content().Create(&fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: contentName}, Content: buf.Bytes()}); err != nil && !isExists(err) {
		return err
	}
	opts := fleet.BundleDeploymentOptions{DefaultNamespace: "bench-" + name}
	id, err := target.DeploymentID(contentName, opts)
	if err != nil {
		return err
	}
	_, err = api.BundleDeployment().Create(&fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: clusterNS},
		Spec: fleet.BundleDeploymentSpec{Options: opts, StagedOptions: opts, DeploymentID: id, StagedDeploymentID: id}})
	return err
}

// benchResources are one bundle's files: two Deployments and eight ConfigMaps.
func benchResources() []fleet.BundleResource {
	var resources []fleet.BundleResource
	for i := 0; i < 2; i++ {
		resources = append(resources, fleet.BundleResource{Name: fmt.Sprintf("deploy-%d.yaml", i), Content: fmt.Sprintf(
			"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-%d\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: a%d}\n"+
				"  template:\n    metadata:\n      labels: {app: a%d}\n    spec:\n      containers:\n      - {name: c, image: example.com/app:1}\n", i, i, i)})
	}
	for i := 0; i < 8; i++ {
		resources = append(resources, fleet.BundleResource{Name: fmt.Sprintf("cm-%d.yaml", i),
			Content: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\ndata:\n  key: value-%d\n", i, i)})
	}
	return resources
}

// rawBaseline creates n sets of the bundle's objects straight in the downstream cluster, each
// in a new namespace, and returns the seconds until all their Deployments are available.
func rawBaseline(ctx context.Context, down *localcluster.Cluster, n int) (float64, error) {
	kube, err := down.Clientset()
	if err != nil {
		return 0, err
	}
	dyn, err := dynamic.NewForConfig(down.RESTConfig())
	if err != nil {
		return 0, err
	}
	gvr := map[string]schema.GroupVersionResource{
		"Deployment": {Group: "apps", Version: "v1", Resource: "deployments"},
		"ConfigMap":  {Version: "v1", Resource: "configmaps"},
	}
	var objs []*unstructured.Unstructured
	for _, r := range benchResources() {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(r.Content), &obj.Object); err != nil {
			return 0, err
		}
		objs = append(objs, obj)
	}
	start := time.Now()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("raw-%02d", i)
		go func() {
			if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				errs <- err
				return
			}
			for _, obj := range objs {
				if _, err := dyn.Resource(gvr[obj.GetKind()]).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	for {
		list, err := kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		available := 0
		for _, d := range list.Items {
			if strings.HasPrefix(d.Namespace, "raw-") && d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 1 {
				available++
			}
		}
		if available == 2*n {
			return time.Since(start).Seconds(), nil
		}
		if time.Since(start) > 5*time.Minute {
			return 0, fmt.Errorf("raw baseline: %d of %d Deployments available after 5 minutes", available, 2*n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitReady polls until n BundleDeployments report their deploymentID applied and Ready.
func waitReady(ctx context.Context, api fleetcontrollers.Interface, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		list, err := api.BundleDeployment().List(clusterNS, metav1.ListOptions{})
		if err == nil {
			ready := 0
			for _, bd := range list.Items {
				if bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID && bd.Status.Display.State == string(fleet.Ready) {
					ready++
				}
			}
			if ready >= n {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d BundleDeployments Ready after %s", ready, n, timeout)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freeAddr is a loopback address with a port free at the time of asking.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func isExists(err error) bool { return apierrors.IsAlreadyExists(err) }
