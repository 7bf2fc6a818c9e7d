// Command plan measures `fleet plan` offline over a generated repository of 50 bundles of the
// example's shapes (raw manifests, a Helm chart with values templated from cluster labels and a
// targetCustomization, kustomize with an overlay per env), a pull request changing every one of
// them, and 1,000 to 10,000 clusters (labels env and region, nine combinations): wall time and
// the peak resident memory of the process. It writes benchmarks/results/plan.json and plan.png.
// Run it with `make bench-plan` (part of `make bench`).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/fleetgo/fleet/benchmarks/proc"
)

const bundles = 50

// Run is one measurement.
type Run struct {
	Clusters  int     `json:"clusters"`
	Bundles   int     `json:"bundles"`
	Seconds   float64 `json:"seconds"`
	PeakRSSMB float64 `json:"peakRSSMiB"`
	// Changes is how many bundle-cluster pairs the plan reported changed, Groups in how many
	// groups (what a reader reads).
	Changes int `json:"changes"`
	Groups  int `json:"groups"`
}

// Result is the file written.
type Result struct {
	Benchmark string `json:"benchmark"`
	Date      string `json:"date"`
	Cores     int    `json:"cores"`
	Runs      []Run  `json:"runs"`
	Goal      string `json:"goal"`
}

func main() {
	fleetBin := flag.String("fleet", "bin/fleet", "fleet binary to measure")
	out := flag.String("out", "benchmarks/results", "folder for plan.json and plan.png")
	flag.Parse()
	if err := run(*fleetBin, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench plan:", err)
		os.Exit(1)
	}
}

func run(fleetBin, out string) error {
	dir, err := os.MkdirTemp("", "bench-plan-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	repo := filepath.Join(dir, "repo")
	base, head, err := pullRequest(repo)
	if err != nil {
		return err
	}
	res := Result{Benchmark: "fleet plan offline: 50 bundles, a change to each, against N clusters", Date: time.Now().UTC().Format(time.RFC3339),
		Cores: runtime.NumCPU(), Goal: "10,000 clusters x 50 bundles within 60 s and 1 GiB"}
	for _, n := range []int{1000, 2500, 5000, 10000} {
		clusters := filepath.Join(dir, fmt.Sprintf("clusters-%d.yaml", n))
		if err := os.WriteFile(clusters, clusterList(n), 0o644); err != nil {
			return err
		}
		r, err := measure(fleetBin, repo, base, head, clusters, n)
		if err != nil {
			return err
		}
		fmt.Printf("clusters=%d seconds=%.1f peakRSS=%.0fMiB changes=%d groups=%d\n", r.Clusters, r.Seconds, r.PeakRSSMB, r.Changes, r.Groups)
		res.Runs = append(res.Runs, r)
	}
	if err := proc.WriteJSON(out, "plan.json", res); err != nil {
		return err
	}
	return plotResult(res, filepath.Join(out, "plan.png"))
}

// measure runs fleet plan once, reading its wall time, peak RSS and what it reported.
func measure(fleetBin, repo, base, head, clusters string, n int) (Run, error) {
	targets := filepath.Join(filepath.Dir(repo), "targets.yaml")
	if err := os.WriteFile(targets, []byte("targets:\n- name: all\n  clusterSelector: {}\n"), 0o644); err != nil {
		return Run{}, err
	}
	cmd := exec.Command(fleetBin, "plan", "--repo", repo, "--base", base, "--head", head, "--name", "bench",
		"--clusters-file", clusters, "--targets-file", targets, "-o", "json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	outb, err := cmd.Output()
	elapsed := time.Since(start)
	if err != nil {
		return Run{}, fmt.Errorf("fleet plan: %w: %s", err, stderr.String())
	}
	var report struct {
		Bundles []struct {
			Error  string `json:"error"`
			Groups []struct {
				Clusters []string `json:"clusters"`
			} `json:"groups"`
		} `json:"bundles"`
	}
	if err := json.Unmarshal(outb, &report); err != nil {
		return Run{}, err
	}
	r := Run{Clusters: n, Bundles: len(report.Bundles), Seconds: elapsed.Seconds()}
	for _, b := range report.Bundles {
		if b.Error != "" {
			return Run{}, fmt.Errorf("bundle error: %s", b.Error)
		}
		r.Groups += len(b.Groups)
		for _, g := range b.Groups {
			r.Changes += len(g.Clusters)
		}
	}
	r.PeakRSSMB = proc.ExitedPeakRSS(cmd)
	return r, nil
}

// clusterList is n Clusters, env and region in nine combinations.
func clusterList(n int) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	envs, regions := []string{"dev", "staging", "prod"}, []string{"eu", "us", "ap"}
	for i := range n {
		fmt.Fprintf(&b, "- apiVersion: fleet.cattle.io/v1alpha1\n  kind: Cluster\n  metadata:\n    name: cluster-%05d\n    namespace: fleet-default\n"+
			"    labels: {env: %s, region: %s}\n", i, envs[i%3], regions[(i/3)%3])
	}
	return []byte(b.String())
}

// pullRequest commits the 50 bundles, then a change to each, and returns both commits.
func pullRequest(dir string) (string, string, error) {
	repo, err := gogit.PlainInit(dir, false)
	if err != nil {
		return "", "", err
	}
	commit := func(version string) (string, error) {
		if err := generate(dir, version); err != nil {
			return "", err
		}
		wt, err := repo.Worktree()
		if err != nil {
			return "", err
		}
		if err := wt.AddWithOptions(&gogit.AddOptions{All: true}); err != nil {
			return "", err
		}
		h, err := wt.Commit(version, &gogit.CommitOptions{All: true, Author: &object.Signature{Name: "bench", Email: "bench@example.com", When: time.Now()}})
		return h.String(), err
	}
	base, err := commit("1.0")
	if err != nil {
		return "", "", err
	}
	head, err := commit("1.1")
	return base, head, err
}

// generate writes the bundles at version (the image tag every bundle deploys).
func generate(root, version string) error {
	for i := range bundles {
		dir := fmt.Sprintf("app-%02d", i)
		var files map[string]string
		switch i % 3 {
		case 0:
			files = map[string]string{"fleet.yaml": "defaultNamespace: " + dir + "\n", "deploy.yaml": deployment(dir, version, "1")}
		case 1:
			files = map[string]string{
				"fleet.yaml": "defaultNamespace: " + dir + "\nhelm:\n  values:\n    env: \"${ .ClusterLabels.env }\"\n    region: \"${ .ClusterLabels.region }\"\n" +
					"    tag: \"" + version + "\"\ntargetCustomizations:\n- name: prod\n  clusterSelector:\n    matchLabels: {env: prod}\n  helm:\n    values:\n      replicas: 3\n",
				"Chart.yaml":            "apiVersion: v2\nname: " + dir + "\nversion: 0.1.0\n",
				"values.yaml":           "replicas: 1\n",
				"templates/deploy.yaml": strings.Replace(deployment(dir, "{{ .Values.tag }}", "{{ .Values.replicas }}"), "      containers:", "      nodeSelector: {region: \"{{ .Values.region }}\", env: \"{{ .Values.env }}\"}\n      containers:", 1),
			}
		default:
			files = map[string]string{
				"fleet.yaml": "defaultNamespace: " + dir + "\nkustomize:\n  dir: overlays/default\ntargetCustomizations:\n- name: prod\n  clusterSelector:\n" +
					"    matchLabels: {env: prod}\n  kustomize:\n    dir: overlays/prod\n",
				"base/kustomization.yaml":             "resources:\n- deploy.yaml\n",
				"base/deploy.yaml":                    deployment(dir, version, "1"),
				"overlays/default/kustomization.yaml": "resources:\n- ../../base\n",
				"overlays/prod/kustomization.yaml":    "resources:\n- ../../base\nnamePrefix: prod-\n",
			}
		}
		for name, content := range files {
			p := filepath.Join(root, dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

func deployment(name, tag, replicas string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: %[3]s
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
      - name: web
        image: nginx:%[2]s
`, name, tag, replicas)
}

func plotResult(res Result, path string) error {
	p := plot.New()
	p.Title.Text = "fleet plan, 50 bundles: wall time and peak RSS"
	p.X.Label.Text = "clusters"
	p.Y.Label.Text = "seconds / GiB x 10"
	var secs, mem plotter.XYs
	for _, r := range res.Runs {
		secs = append(secs, plotter.XY{X: float64(r.Clusters), Y: r.Seconds})
		mem = append(mem, plotter.XY{X: float64(r.Clusters), Y: r.PeakRSSMB / 1024 * 10})
	}
	if err := plotutil.AddLinePoints(p, "wall time (s)", secs, "peak RSS (GiB x 10)", mem); err != nil {
		return err
	}
	p.Legend.Top = true
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
