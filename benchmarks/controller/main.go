// Command controller measures how fast `fleet controller` turns Bundles into BundleDeployments
// for many clusters, against the physical limit of the same machine: the rate at which a plain
// parallel client creates objects of the same shape on the same apiserver. It starts a local
// apiserver, registers CLUSTERS clusters, measures the raw create rate, then runs the controller
// as its own process, creates BUNDLES Bundles targeting every cluster, and waits until all
// BundleDeployments exist, reading the controller's peak RSS and CPU time from /proc.
// Results go to benchmarks/results/controller-<bundles>x<clusters>.json and .png.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/internal/harness/chartinstall"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
)

// Result is what the benchmark writes.
type Result struct {
	Date              string  `json:"date"`
	Bundles           int     `json:"bundles"`
	Clusters          int     `json:"clusters"`
	Deployments       int     `json:"bundleDeployments"`
	RawSeconds        float64 `json:"rawSeconds"`
	RawPerSecond      float64 `json:"rawCreatesPerSecond"`
	FleetSeconds      float64 `json:"controllerSeconds"`
	FleetPerSecond    float64 `json:"controllerCreatesPerSecond"`
	Ratio             float64 `json:"ratioToRaw"`
	ControllerPeakMiB float64 `json:"controllerPeakRSSMiB"`
	ControllerCPU     float64 `json:"controllerCPUSeconds"`
	// ControllerRunCPU is the part of ControllerCPU spent while the deployments were created
	// (without taking on the clusters before).
	ControllerRunCPU float64 `json:"controllerRunCPUSeconds,omitempty"`
	// ControllerWrites counts the apiserver's mutating requests while the controller ran, by
	// verb and resource (from apiserver_request_total), to show what else it wrote.
	ControllerWrites map[string]int `json:"controllerWrites"`
	// WritesPerDeployment is every write of ControllerWrites over the BundleDeployments created
	// (1 would be the creations alone; the plain client writes exactly that).
	WritesPerDeployment float64 `json:"writesPerBundleDeployment"`
	// RawOtherCPU and OtherCPU are the CPU seconds the apiserver, etcd and this process (the
	// plain client, or the benchmark's informer) used while the plain client and while the
	// controller created the deployments: fleet's whole cost beside the controller's own.
	RawOtherCPU map[string]float64 `json:"rawOtherCPUSeconds,omitempty"`
	OtherCPU    map[string]float64 `json:"otherCPUSeconds,omitempty"`
	// GOMEMLIMIT the controller ran with; empty for Go's default.
	GoMemLimit string `json:"goMemLimit,omitempty"`
	// With -scrape: how often /metrics was read during the run (and once at its end), how many
	// times, and the size and duration of the last read (all BundleDeployments in it).
	ScrapeInterval    string  `json:"scrapeInterval,omitempty"`
	Scrapes           int     `json:"scrapes,omitempty"`
	LastScrapeBytes   int64   `json:"lastScrapeBytes,omitempty"`
	LastScrapeSeconds float64 `json:"lastScrapeSeconds,omitempty"`
}

const ns = "fleet-default"

var (
	scrapeEvery          time.Duration
	profileDir, memLimit string
	profileSeconds       = 30
	profileAddr          = "127.0.0.1:6061"
)

func main() {
	bundles := flag.Int("bundles", 5, "bundles")
	clusters := flag.Int("clusters", 1000, "clusters")
	fleetBin := flag.String("fleet", "bin/fleet", "fleet binary")
	out := flag.String("out", "benchmarks/results", "results folder")
	workers := flag.Int("workers", 50, "controller workers")
	flag.StringVar(&profileDir, "profile", "", "save the controller's profiles, memory statistics and log here")
	flag.IntVar(&profileSeconds, "cpu-seconds", 30, "with -profile: seconds of CPU profile from the start of the run")
	flag.StringVar(&memLimit, "gomemlimit", "", "run the controller with this GOMEMLIMIT (for example 80MiB)")
	flag.DurationVar(&scrapeEvery, "scrape", 0, "read the controller's /metrics this often during the run, as Prometheus would (0: never)")
	flag.Parse()
	if err := run(*bundles, *clusters, *fleetBin, *out, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "bench controller:", err)
		os.Exit(1)
	}
}

func run(nBundles, nClusters int, fleetBin, out string, workers int) error {
	ctx := context.Background()
	mgr, err := localcluster.Start(ctx, localcluster.Options{Name: "bench"})
	if err != nil {
		return err
	}
	defer mgr.Stop()
	if _, err := chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{Kubeconfig: mgr.Kubeconfig, Namespace: "cattle-fleet-system",
		ReleaseName: "fleet-crd", ChartDir: "charts/fleet-crd", Wait: true}); err != nil {
		return err
	}
	cfg := mgr.RESTConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	ff, err := fleetfactory.NewFactoryFromConfig(cfg)
	if err != nil {
		return err
	}
	api := ff.Fleet().V1alpha1()
	// Unthrottled as api: the plain client writes options Secrets with it.
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := api.Cluster().List(ns, metav1.ListOptions{Limit: 1}); err == nil {
			break
		} else if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}

	fmt.Printf("creating %d clusters and their namespaces\n", nClusters)
	var clusterNamespaces []string
	err = proc.Parallel(nClusters, 32, func(i int) error {
		name := fmt.Sprintf("c-%05d", i)
		nsName := names.ClusterNamespace(ns, name)
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		// Clusters as registration leaves them: their agents' identity granted (the annotation
		// says so, or the manager would take them over as Fleet's) and checked in.
		c, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"env": "bench"},
			Annotations: map[string]string{registration.IdentityAnnotation: registration.AgentIdentity(nsName)}}})
		if err != nil {
			return err
		}
		c.Status.Namespace = nsName
		c.Status.Agent.LastSeen = metav1.Now()
		_, err = api.Cluster().UpdateStatus(c)
		return err
	})
	if err != nil {
		return err
	}
	for i := range nClusters {
		clusterNamespaces = append(clusterNamespaces, names.ClusterNamespace(ns, fmt.Sprintf("c-%05d", i)))
	}

	// The physical limit: the same objects (each BundleDeployment and its options Secret),
	// created by a plain client with many workers.
	bundleSpecs := make([]*fleet.Bundle, nBundles)
	for i := range bundleSpecs {
		bundleSpecs[i] = benchBundle(i)
	}
	total := nBundles * nClusters
	fmt.Printf("raw: creating %d BundleDeployments with a plain parallel client\n", total)
	servers := proc.ServerPIDs(mgr.Dir)
	rawCPU := others(servers)
	start := time.Now()
	err = proc.Parallel(total, 64, func(i int) error {
		b, c := bundleSpecs[i/nClusters], i%nClusters
		bd := rawDeployment(b, fmt.Sprintf("c-%05d", c), clusterNamespaces[c])
		_, err := proc.CreateDeployment(ctx, api.BundleDeployment(), kube, bd)
		return err
	})
	if err != nil {
		return err
	}
	raw := time.Since(start)
	rawOther := proc.CPUSince(rawCPU, others(servers))
	fmt.Printf("raw: %d in %s (%.0f/s)\n", total, raw.Round(time.Millisecond), float64(total)/raw.Seconds())
	if err := proc.Parallel(nClusters, 32, func(c int) error {
		if err := api.BundleDeployment().DeleteCollection(clusterNamespaces[c], metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return err
		}
		return proc.DeleteOptionsSecrets(ctx, kube, clusterNamespaces[c])
	}); err != nil {
		return err
	}
	if err := waitCount(ctx, mgr, 0, 5*time.Minute); err != nil {
		return err
	}

	logPath := filepath.Join(mgr.LogDir, "fleet-controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	metricsAddr := ""
	if scrapeEvery > 0 {
		metricsAddr = "127.0.0.1:6062"
	}
	cmd := exec.Command(fleetBin, "controller", "--kubeconfig", mgr.Kubeconfig, "--leader-elect=false",
		"--health-addr=", "--metrics-addr="+metricsAddr, "--workers", strconv.Itoa(workers))
	if profileDir != "" {
		cmd.Args = append(cmd.Args, "--profile-addr="+profileAddr)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if memLimit != "" {
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+memLimit)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()
	// Start the clock once the controller has taken on every cluster (finalizer and first
	// status written), so the run measures Bundles being rolled out, not start-up.
	for deadline := time.Now().Add(3 * time.Minute); ; {
		list, err := api.Cluster().List(ns, metav1.ListOptions{})
		if err != nil {
			return err
		}
		settled := 0
		for _, c := range list.Items {
			if slices.Contains(c.Finalizers, fleet.ClusterFinalizer) && c.Status.Display.ReadyBundles != "" {
				settled++
			}
		}
		if settled == nClusters {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("controller took on %d of %d clusters in 3 minutes (log %s)", settled, nClusters, logPath)
		}
		time.Sleep(time.Second)
	}
	time.Sleep(2 * time.Second) // and the roll-ups it queued meanwhile

	fmt.Printf("fleet: creating %d bundles targeting %d clusters\n", nBundles, nClusters)
	counter, stop, err := countDeployments(ctx, mgr)
	if err != nil {
		return err
	}
	defer stop()
	before, err := proc.WriteCounts(ctx, kube)
	if err != nil {
		return err
	}
	cpuDone := make(chan struct{})
	if profileDir != "" {
		go func() { _ = saveCPUProfile(profileDir); close(cpuDone) }()
	} else {
		close(cpuDone)
	}
	fleetCPU, startCPU := others(servers), proc.CPUSeconds(cmd.Process.Pid)
	start = time.Now()
	scr := &scraper{addr: metricsAddr}
	stopScraping := scr.every(scrapeEvery)
	for _, b := range bundleSpecs {
		if _, err := api.Bundle().Create(b); err != nil {
			return err
		}
	}
	var peak float64
	for counter.Load() < int64(total) {
		if rss := proc.PeakRSS(cmd.Process.Pid); rss > peak {
			peak = rss
		}
		if time.Since(start) > 30*time.Minute {
			return fmt.Errorf("only %d of %d BundleDeployments after 30 minutes (log %s)", counter.Load(), total, logPath)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(start)
	stopScraping()
	if scrapeEvery > 0 {
		// Once more with every BundleDeployment there, before the peak is read.
		scr.once()
	}
	cpu := proc.CPUSeconds(cmd.Process.Pid)
	fleetOther := proc.CPUSince(fleetCPU, others(servers))
	if rss := proc.PeakRSS(cmd.Process.Pid); rss > peak {
		peak = rss
	}
	after, err := proc.WriteCounts(ctx, kube)
	if err != nil {
		return err
	}
	writes := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			writes[k] = d
		}
	}
	if profileDir != "" {
		<-cpuDone
		if err := proc.SaveProfile(profileAddr, profileDir, "heap?gc=1", "heap.pprof"); err != nil {
			return err
		}
		if err := proc.SaveProfile(profileAddr, profileDir, "heap?debug=1", "memstats.txt"); err != nil {
			return err
		}
		if log, err := os.ReadFile(logPath); err == nil {
			_ = os.WriteFile(filepath.Join(profileDir, "fleet-controller.log"), log, 0o644)
		}
		if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); err == nil {
			_ = os.WriteFile(filepath.Join(profileDir, "proc-status.txt"), status, 0o644)
		}
	}
	res := Result{
		Date: time.Now().UTC().Format(time.RFC3339), Bundles: nBundles, Clusters: nClusters, Deployments: total,
		RawSeconds: raw.Seconds(), RawPerSecond: float64(total) / raw.Seconds(),
		FleetSeconds: took.Seconds(), FleetPerSecond: float64(total) / took.Seconds(),
		ControllerPeakMiB: peak, ControllerCPU: cpu, ControllerWrites: writes,
		ControllerRunCPU: round2(cpu - startCPU), RawOtherCPU: rawOther, OtherCPU: fleetOther, GoMemLimit: memLimit,
	}
	if scrapeEvery > 0 {
		res.ScrapeInterval, res.Scrapes, res.LastScrapeBytes, res.LastScrapeSeconds = scrapeEvery.String(), scr.n, scr.bytes, scr.took.Seconds()
		fmt.Printf("metrics: %d scrapes every %s, the last %d bytes in %s\n", scr.n, scrapeEvery, scr.bytes, scr.took.Round(time.Millisecond))
	}
	res.Ratio = res.FleetPerSecond / res.RawPerSecond
	for _, n := range writes {
		res.WritesPerDeployment += float64(n)
	}
	res.WritesPerDeployment /= float64(total)
	fmt.Printf("fleet: %d in %s (%.0f/s), ratio to raw %.2f, controller peak RSS %.0f MiB, CPU %.1f s\n",
		total, took.Round(time.Millisecond), res.FleetPerSecond, res.Ratio, res.ControllerPeakMiB, res.ControllerCPU)
	fmt.Printf("apiserver writes while the controller ran (%.2f per BundleDeployment): %v\n", res.WritesPerDeployment, writes)
	fmt.Printf("CPU seconds, plain client's run: %v; controller's run: controller %.1f, %v\n", rawOther, res.ControllerRunCPU, fleetOther)
	return write(out, res)
}

// others reads the CPU seconds so far of the servers (by name) and of this process ("benchmark").
func others(servers map[string]int) map[string]float64 {
	out := map[string]float64{"benchmark": proc.CPUSeconds(os.Getpid())}
	for name, pid := range servers {
		out[name] = proc.CPUSeconds(pid)
	}
	return out
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// saveCPUProfile records the controller's CPU profile from the start of the run.
func saveCPUProfile(dir string) error {
	return proc.SaveProfile(profileAddr, dir, fmt.Sprintf("profile?seconds=%d", profileSeconds), "cpu.pprof")
}

func benchBundle(i int) *fleet.Bundle {
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%03d", i), Namespace: ns, Labels: map[string]string{fleet.RepoLabel: "bench"}},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "bench", Helm: &fleet.HelmOptions{
				Values: &fleet.GenericMap{Data: map[string]any{"cluster": "${ .ClusterName }", "replicas": float64(2)}},
			}},
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bench-%d\n", i)}},
			Targets:   []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "bench"}}}},
		},
	}
}

// rawDeployment is the BundleDeployment the controller would write, under another name.
func rawDeployment(b *fleet.Bundle, cluster, clusterNS string) *fleet.BundleDeployment {
	bd := proc.Deployment(b, cluster, clusterNS)
	bd.Name = "raw-" + bd.Name
	return bd
}

// countDeployments counts BundleDeployments as they appear, with a metadata-only informer.
func countDeployments(ctx context.Context, mgr *localcluster.Cluster) (*atomic.Int64, func(), error) {
	mc, err := metadata.NewForConfig(mgr.RESTConfig())
	if err != nil {
		return nil, nil, err
	}
	f := metadatainformer.NewSharedInformerFactory(mc, 0)
	inf := f.ForResource(schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundledeployments"}).Informer()
	var n atomic.Int64
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { n.Add(1) },
		DeleteFunc: func(any) { n.Add(-1) },
	})
	ctx, cancel := context.WithCancel(ctx)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return &n, cancel, nil
}

func waitCount(ctx context.Context, mgr *localcluster.Cluster, want int64, timeout time.Duration) error {
	n, stop, err := countDeployments(ctx, mgr)
	if err != nil {
		return err
	}
	defer stop()
	for deadline := time.Now().Add(timeout); n.Load() != want; {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d BundleDeployments left, want %d", n.Load(), want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

func write(out string, res Result) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	base := filepath.Join(out, fmt.Sprintf("controller-%dx%d", res.Bundles, res.Clusters))
	if res.GoMemLimit != "" {
		base += "-gomemlimit-" + res.GoMemLimit
	}
	if res.ScrapeInterval != "" {
		base += "-scrape-" + res.ScrapeInterval
	}
	if err := proc.WriteJSON(filepath.Dir(base), filepath.Base(base)+".json", res); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%d BundleDeployments (%d bundles x %d clusters)", res.Deployments, res.Bundles, res.Clusters)
	p.Y.Label.Text = "objects created per second"
	bars, err := plotter.NewBarChart(plotter.Values{res.RawPerSecond, res.FleetPerSecond}, vg.Points(60))
	if err != nil {
		return err
	}
	p.Add(bars)
	p.NominalX("raw parallel client", "fleet controller")
	return p.Save(5*vg.Inch, 4*vg.Inch, base+".png")
}

// scraper reads the controller's /metrics as Prometheus would, counting what it read.
type scraper struct {
	addr  string
	mu    sync.Mutex
	n     int
	bytes int64
	took  time.Duration
}

func (s *scraper) once() {
	start := time.Now()
	resp, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		fmt.Fprintln(os.Stderr, "scrape:", err)
		return
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	s.mu.Lock()
	s.n, s.bytes, s.took = s.n+1, n, time.Since(start)
	s.mu.Unlock()
}

// every scrapes at interval until the returned function is called (never with 0).
func (s *scraper) every(interval time.Duration) func() {
	if interval <= 0 {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.once()
			}
		}
	}()
	return func() { close(done); <-stopped }
}
