// Command ui measures the web UI's pages (fleet ui) at 1,000 and 10,000 clusters with 50 bundles
// on each (5 GitRepos of 10 bundles; one cluster in 50 not ready): the server-side time to
// answer the overview, a GitRepo's page (10 bundles of N clusters), the clusters page and a
// live update, their sizes, and the heap the process holds for the objects. The objects are
// served from memory (ui.NewStatic), as the UI's caches hold them; the apiserver is not measured.
// It writes benchmarks/results/ui.json. Run it with `make bench-ui` (part of `make bench`).
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/internal/ui"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

const (
	repos          = 5
	bundlesPerRepo = 10
)

// Page is one page's figures at one size.
type Page struct {
	Path string `json:"path"`
	// Milliseconds is the median of seven requests; Bytes the page's size.
	Milliseconds float64 `json:"milliseconds"`
	Bytes        int     `json:"bytes"`
}

// Size is one size's figures.
type Size struct {
	Clusters          int     `json:"clusters"`
	BundleDeployments int     `json:"bundleDeployments"`
	HeapMiB           float64 `json:"heapMiB"`
	Pages             []Page  `json:"pages"`
}

func main() {
	out := flag.String("out", "benchmarks/results", "folder for ui.json")
	flag.Parse()
	res := struct {
		Benchmark string `json:"benchmark"`
		Date      string `json:"date"`
		Cores     int    `json:"cores"`
		Sizes     []Size `json:"sizes"`
	}{Benchmark: "fleet ui pages, server side", Date: time.Now().UTC().Format(time.RFC3339), Cores: runtime.NumCPU()}
	for _, n := range []int{1000, 10000} {
		s, err := measure(n)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench ui:", err)
			os.Exit(1)
		}
		res.Sizes = append(res.Sizes, s)
	}
	if err := proc.WriteJSON(*out, "ui.json", res); err != nil {
		fmt.Fprintln(os.Stderr, "bench ui:", err)
		os.Exit(1)
	}
}

func measure(n int) (Size, error) {
	objs := objects(n)
	s, err := ui.NewStatic(objs)
	if err != nil {
		return Size{}, err
	}
	objs = nil
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	size := Size{Clusters: n, BundleDeployments: n * repos * bundlesPerRepo, HeapMiB: float64(after.HeapInuse) / (1 << 20)}
	for _, path := range []string{"/", "/gitrepos/fleet-default/repo-0", "/clusters", "/clustergroups"} {
		var times []float64
		var bytes int
		for range 7 {
			start := time.Now()
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				return size, err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return size, fmt.Errorf("%s: %s", path, resp.Status)
			}
			times = append(times, float64(time.Since(start).Microseconds())/1000)
			bytes = len(body)
		}
		slices.Sort(times)
		size.Pages = append(size.Pages, Page{Path: path, Milliseconds: times[len(times)/2], Bytes: bytes})
		fmt.Printf("clusters=%d %s: %.1f ms, %d bytes\n", n, path, times[len(times)/2], bytes)
	}
	fmt.Printf("clusters=%d heap %.0f MiB for %d BundleDeployments\n", n, size.HeapMiB, size.BundleDeployments)
	return size, nil
}

// objects are n Clusters, 5 GitRepos of 10 Bundles each, and a BundleDeployment of each Bundle
// on each Cluster (one in 50 not ready, with a non-ready resource).
func objects(n int) []k8sruntime.Object {
	var out []k8sruntime.Object
	now := metav1.Now()
	envs := []string{"dev", "staging", "prod"}
	for i := range n {
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cluster-%05d", i), Namespace: fleet.DefaultNamespace,
			Labels: map[string]string{"env": envs[i%3]}}}
		c.Status.Namespace = fmt.Sprintf("cluster-fleet-default-cluster-%05d", i)
		c.Status.Agent.LastSeen = now
		c.Status.Display.ReadyBundles = "50/50"
		out = append(out, c)
	}
	for _, env := range envs {
		out = append(out, &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: env, Namespace: fleet.DefaultNamespace},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": env}}}})
	}
	for r := range repos {
		repo := fmt.Sprintf("repo-%d", r)
		gr := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: repo, Namespace: fleet.DefaultNamespace}}
		gr.Status.Commit = "0123456789abcdef0123456789abcdef01234567"
		gr.Status.ReadyClusters, gr.Status.DesiredReadyClusters = n-n/50, n
		out = append(out, gr)
		for b := range bundlesPerRepo {
			name := fmt.Sprintf("%s-app-%d", repo, b)
			bu := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace, Labels: map[string]string{fleet.RepoLabel: repo}}}
			bu.Status.Summary.DesiredReady, bu.Status.Summary.Ready = n, n-n/50
			out = append(out, bu)
			for i := range n {
				bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fmt.Sprintf("cluster-fleet-default-cluster-%05d", i),
					Labels: map[string]string{fleet.RepoLabel: repo, fleet.BundleLabel: name, fleet.BundleNamespaceLabel: fleet.DefaultNamespace,
						fleet.ClusterLabel: fmt.Sprintf("cluster-%05d", i), fleet.ClusterNamespaceLabel: fleet.DefaultNamespace}}}
				bd.Spec.DeploymentID = "s-abc:1"
				bd.Status.AppliedDeploymentID = "s-abc:1"
				ready := i%50 != 0
				bd.Status.Ready, bd.Status.NonModified = ready, true
				st := corev1.ConditionTrue
				if !ready {
					st = corev1.ConditionFalse
					bd.Status.NonReadyStatus = []fleet.NonReadyStatus{{Kind: "Deployment", Namespace: "web", Name: "web", Summary: fleet.Summary{State: "in-progress"}}}
				}
				fleet.SetCondition(&bd.Status.Conditions, fleet.ConditionReady, st, "", "", now.Time)
				out = append(out, bd)
			}
		}
	}
	return out
}
