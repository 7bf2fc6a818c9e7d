// Command apply measures `fleet apply -o` over generated repositories of 25 to 200 bundle
// folders (raw manifests, local Helm charts with values files and target customizations, and
// kustomize folders, in equal parts): wall time and the peak resident memory of the process.
// It writes benchmarks/results/apply.json and apply.png. Run it with `make bench`.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/fleetgo/fleet/benchmarks/proc"
)

// Run is one measurement.
type Run struct {
	Bundles   int     `json:"bundles"`
	Seconds   float64 `json:"seconds"`
	PeakRSSMB float64 `json:"peakRSSMiB"`
}

// Result is the file written.
type Result struct {
	Benchmark string `json:"benchmark"`
	Date      string `json:"date"`
	Machine   string `json:"machine"`
	Runs      []Run  `json:"runs"`
	Median    []Run  `json:"median"`
	Notes     string `json:"notes"`
}

func main() {
	fleetBin := flag.String("fleet", "bin/fleet", "fleet binary to measure")
	out := flag.String("out", "benchmarks/results", "folder for apply.json and apply.png")
	reps := flag.Int("reps", 3, "repetitions per size")
	flag.Parse()
	if err := run(*fleetBin, *out, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "bench apply:", err)
		os.Exit(1)
	}
}

func run(fleetBin, out string, reps int) error {
	res := Result{Benchmark: "fleet apply -o over generated repositories", Date: time.Now().UTC().Format(time.RFC3339),
		Machine: machine(), Notes: "one third each: raw manifests, local Helm chart with values files and targetCustomizations, kustomize"}
	for _, n := range []int{25, 50, 100, 200} {
		repo, err := os.MkdirTemp("", "bench-apply-")
		if err != nil {
			return err
		}
		if err := generate(repo, n); err != nil {
			return err
		}
		var runs []Run
		for range reps {
			r, err := measure(fleetBin, repo, n)
			if err != nil {
				return err
			}
			fmt.Printf("bundles=%d seconds=%.3f peakRSS=%.1fMiB\n", r.Bundles, r.Seconds, r.PeakRSSMB)
			runs = append(runs, r)
		}
		os.RemoveAll(repo)
		res.Runs = append(res.Runs, runs...)
		res.Median = append(res.Median, median(runs))
	}
	if err := proc.WriteJSON(out, "apply.json", res); err != nil {
		return err
	}
	return plotResult(res, filepath.Join(out, "apply.png"))
}

// measure runs fleet apply -o once and reads its wall time and peak RSS.
func measure(fleetBin, repo string, n int) (Run, error) {
	dest := filepath.Join(repo, "..", filepath.Base(repo)+".out.yaml")
	defer os.Remove(dest)
	cmd := exec.Command(fleetBin, "apply", "-o", dest, "--root", repo, "bench")
	start := time.Now()
	outb, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		return Run{}, fmt.Errorf("fleet apply: %w: %s", err, outb)
	}
	got, err := os.ReadFile(dest)
	if err != nil {
		return Run{}, err
	}
	if c := strings.Count(string(got), "\nkind: Bundle\n"); c != n {
		return Run{}, fmt.Errorf("fleet apply wrote %d bundles, want %d", c, n)
	}
	return Run{Bundles: n, Seconds: elapsed.Seconds(), PeakRSSMB: proc.ExitedPeakRSS(cmd)}, nil
}

func median(runs []Run) Run {
	s := append([]Run(nil), runs...)
	sort.Slice(s, func(i, j int) bool { return s[i].Seconds < s[j].Seconds })
	m := s[len(s)/2]
	for _, r := range runs {
		if r.PeakRSSMB > m.PeakRSSMB {
			m.PeakRSSMB = r.PeakRSSMB
		}
	}
	return m
}

// generate writes n bundle folders.
func generate(root string, n int) error {
	write := func(name, content string) error {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(content), 0o644)
	}
	for i := range n {
		dir := fmt.Sprintf("app-%03d", i)
		var files map[string]string
		switch i % 3 {
		case 0:
			files = map[string]string{
				"fleet.yaml":   "defaultNamespace: " + dir + "\n",
				"deploy.yaml":  deployment(dir),
				"service.yaml": fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\nspec:\n  ports:\n  - port: 80\n  selector:\n    app: %s\n", dir, dir),
			}
		case 1:
			files = map[string]string{
				"fleet.yaml": "defaultNamespace: " + dir + "\nhelm:\n  chart: ./chart\n  valuesFiles: [values-common.yaml]\n  values:\n    name: \"${ .ClusterName }\"\n" +
					"targetCustomizations:\n- name: prod\n  clusterSelector:\n    matchLabels: {env: prod}\n  helm:\n    values:\n      replicas: 3\n",
				"values-common.yaml":          "replicas: 1\nimage: nginx\n",
				"chart/Chart.yaml":            "apiVersion: v2\nname: " + dir + "\nversion: 0.1.0\n",
				"chart/templates/deploy.yaml": deployment(dir),
			}
		default:
			files = map[string]string{
				"fleet.yaml":                       "kustomize:\n  dir: overlays/prod\n",
				"base/kustomization.yaml":          "resources:\n- deploy.yaml\n",
				"base/deploy.yaml":                 deployment(dir),
				"overlays/prod/kustomization.yaml": "resources:\n- ../../base\nnamePrefix: prod-\n",
			}
		}
		for name, content := range files {
			if err := write(filepath.Join(dir, name), content); err != nil {
				return err
			}
		}
	}
	return nil
}

func deployment(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
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
        image: nginx:1.27
        ports:
        - containerPort: 80
`, name)
}

func machine() string {
	out, _ := exec.Command("nproc").Output()
	return strings.TrimSpace(string(out)) + " cores"
}

func plotResult(res Result, path string) error {
	p := plot.New()
	p.Title.Text = "fleet apply -o: median wall time and peak RSS"
	p.X.Label.Text = "bundle folders"
	p.Y.Label.Text = "seconds / MiB÷100"
	var secs, rss plotter.XYs
	for _, m := range res.Median {
		secs = append(secs, plotter.XY{X: float64(m.Bundles), Y: m.Seconds})
		rss = append(rss, plotter.XY{X: float64(m.Bundles), Y: m.PeakRSSMB / 100})
	}
	if err := plotutil.AddLinePoints(p, "wall time (s)", secs, "peak RSS (MiB/100)", rss); err != nil {
		return err
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}
