// Command history measures the deployment history (issue 66) at 1,000 and 10,000 clusters: a
// bundle rolled out 100 times, each revision reaching the clusters in ten batches scattered
// over the cluster table (as label selectors pick them), applied and ready a pass later. It
// folds those passes into a record (internal/history, as the manager's recorder does), writes
// the record to a real apiserver as the recorder stores it (a BundleHistory and a
// BundleRevision per revision), and times the real `fleet history` binary answering "what ran
// on cluster X at T" and "which clusters ran revision R". It writes
// benchmarks/results/history.json and history.png. Run it with `make bench-history`.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/internal/harness/chartinstall"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/history"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

const (
	revisions = 100
	batches   = 10
	// tries is how many times each query runs; the slowest counts.
	tries = 5
)

// Run is one cluster count's figures.
type Run struct {
	Clusters  int `json:"clusters"`
	Revisions int `json:"revisions"`
	// RecordBytes is the JSON of every object the record takes; TableBytes the cluster table's
	// and LargestRevisionBytes the largest BundleRevision's.
	RecordBytes          int `json:"recordBytes"`
	TableBytes           int `json:"tableBytes"`
	LargestRevisionBytes int `json:"largestRevisionBytes"`
	// FoldSeconds is the CPU time of folding one pass over every cluster (the recorder's work
	// per pass), the mean over all passes.
	FoldSeconds float64 `json:"foldSecondsPerPass"`
	// AtSeconds is the slowest wall time of `fleet history B --cluster X --at T -o json`;
	// RevisionSeconds of `fleet history B --revision R -o json` (every cluster that ran R).
	AtSeconds       float64 `json:"atSeconds"`
	RevisionSeconds float64 `json:"revisionSeconds"`
	RevisionRows    int     `json:"revisionRows"`
}

// Result is the file written.
type Result struct {
	Benchmark string `json:"benchmark"`
	Date      string `json:"date"`
	Cores     int    `json:"cores"`
	Goal      string `json:"goal"`
	Runs      []Run  `json:"runs"`
}

func main() {
	fleetBin := flag.String("fleet", "bin/fleet", "fleet binary to measure")
	out := flag.String("out", "benchmarks/results", "folder for history.json and history.png")
	flag.Parse()
	if err := run(*fleetBin, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench history:", err)
		os.Exit(1)
	}
}

func run(fleetBin, out string) error {
	ctx := context.Background()
	mgr, err := localcluster.Start(ctx, localcluster.Options{Name: "bench-history"})
	if err != nil {
		return err
	}
	defer mgr.Stop()
	if _, err := chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{Kubeconfig: mgr.Kubeconfig, Namespace: fleet.SystemNamespace,
		ReleaseName: "fleet-crd", ChartDir: "charts/fleet-crd", Wait: true}); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(mgr.RESTConfig())
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	ff, err := fleetfactory.NewFactoryFromConfig(mgr.RESTConfig())
	if err != nil {
		return err
	}
	res := Result{Benchmark: "history", Date: time.Now().UTC().Format("2006-01-02"), Cores: runtime.NumCPU(),
		Goal: "what ran on cluster X at T, and which clusters ran revision R: within 1 s at 1,000 and 10,000 clusters (issue 66)"}
	for _, n := range []int{1000, 10000} {
		r, err := measure(ff.Fleet().V1alpha1(), fleetBin, mgr.Kubeconfig, n)
		if err != nil {
			return fmt.Errorf("%d clusters: %w", n, err)
		}
		fmt.Printf("%d clusters: record %d bytes (table %d, largest revision %d), fold %.1f ms/pass, at %.2f s, revision %.2f s (%d rows)\n",
			n, r.RecordBytes, r.TableBytes, r.LargestRevisionBytes, r.FoldSeconds*1000, r.AtSeconds, r.RevisionSeconds, r.RevisionRows)
		res.Runs = append(res.Runs, r)
	}
	if err := proc.WriteJSON(out, "history.json", res); err != nil {
		return err
	}
	return plotResult(res, filepath.Join(out, "history.png"))
}

// measure folds, stores and queries the record of a bundle over n clusters.
func measure(api fleetcontrollers.Interface, fleetBin, kubeconfig string, n int) (Run, error) {
	start := time.Now()
	rec, passes, mid, err := fold(n)
	if err != nil {
		return Run{}, err
	}
	r := Run{Clusters: n, Revisions: len(rec.Revisions), FoldSeconds: time.Since(start).Seconds() / float64(passes)}
	bundle := fmt.Sprintf("app-%d", n)
	if err := store(api, bundle, rec, &r); err != nil {
		return Run{}, err
	}
	args := []string{"history", bundle, "-n", fleet.DefaultNamespace, "--kubeconfig", kubeconfig, "-o", "json"}
	var rows []json.RawMessage
	if r.AtSeconds, err = slowest(fleetBin, append(args, "--cluster", rec.Clusters[n/2], "--at", mid.Format(time.RFC3339)), &rows); err != nil {
		return Run{}, err
	}
	if len(rows) != 1 {
		return Run{}, fmt.Errorf("--cluster --at answered %d rows", len(rows))
	}
	if r.RevisionSeconds, err = slowest(fleetBin, append(args, "--revision", rec.Revisions[revisions/2].Revision), &rows); err != nil {
		return Run{}, err
	}
	r.RevisionRows = len(rows)
	if r.RevisionRows != n {
		return Run{}, fmt.Errorf("--revision answered %d rows for %d clusters", r.RevisionRows, n)
	}
	return r, nil
}

// slowest runs the command tries times and returns its slowest wall time; rows is its output.
func slowest(bin string, args []string, rows any) (float64, error) {
	worst := 0.0
	for range tries {
		cmd := exec.Command(bin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		out, err := cmd.Output()
		worst = max(worst, time.Since(start).Seconds())
		if err != nil {
			return 0, fmt.Errorf("fleet %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		if err := json.Unmarshal(out, rows); err != nil {
			return 0, err
		}
	}
	return worst, nil
}

// fold makes the record of revisions rollouts over n clusters: each in batches of clusters
// scattered over the table, a pass every 10 s. It returns the record, the number of passes and
// a moment halfway through.
func fold(n int) (*history.Record, int, time.Time, error) {
	names := make([]string, n)
	for i := range names {
		sum := sha256.Sum256(fmt.Appendf(nil, "client-%d", i))
		names[i] = "cluster-" + hex.EncodeToString(sum[:])[:12]
	}
	seen := make([]history.Seen, n)
	for i := range seen {
		seen[i] = history.Seen{Cluster: names[i], Revision: "r0", Applied: true, Ready: true}
	}
	rec, now, passes := &history.Record{}, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 0
	var mid time.Time
	batch := n / batches
	for rev := 1; rev < revisions; rev++ {
		id := fmt.Sprintf("%012x", rev)
		for lo := 0; lo < n+2*batch; lo += batch {
			for i := lo; i < min(lo+batch, n); i++ {
				seen[i] = history.Seen{Cluster: names[i], Revision: id, Commit: id + id}
			}
			for i := max(lo-batch, 0); i < min(lo, n); i++ {
				seen[i].Applied = true
			}
			for i := max(lo-2*batch, 0); i < min(lo-batch, n); i++ {
				seen[i].Ready = true
			}
			now = now.Add(10 * time.Second)
			if err := rec.Observe(seen, now); err != nil {
				return nil, 0, time.Time{}, err
			}
			passes++
		}
		if rev == revisions/2 {
			mid = now
		}
	}
	return rec, passes, mid, nil
}

// store writes rec as the recorder does and counts its bytes.
func store(api fleetcontrollers.Interface, bundle string, rec *history.Record, r *Run) error {
	t, err := api.BundleHistory().Create(&fleet.BundleHistory{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultNamespace, Name: bundle}})
	if err != nil {
		return err
	}
	t.Status.Clusters = rec.Clusters
	if t, err = api.BundleHistory().UpdateStatus(t); err != nil {
		return err
	}
	r.TableBytes = size(t)
	r.RecordBytes = r.TableBytes
	for i, rev := range rec.Revisions {
		o, err := api.BundleRevision().Create(&fleet.BundleRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultNamespace, Name: bundle + "-" + rev.Revision, Labels: map[string]string{fleet.HistoryBundleLabel: bundle}},
			Spec:       fleet.BundleRevisionSpec{Bundle: bundle, Revision: rev.Revision, Commit: rev.Commit, Order: int64(i + 1)}})
		if err != nil {
			return err
		}
		o.Status.Spans = slices.Clone(rev.Spans)
		if o, err = api.BundleRevision().UpdateStatus(o); err != nil {
			return err
		}
		r.RecordBytes += size(o)
		r.LargestRevisionBytes = max(r.LargestRevisionBytes, size(o))
	}
	return nil
}

func size(o any) int {
	data, _ := json.Marshal(o)
	return len(data)
}

func plotResult(res Result, path string) error {
	p := plot.New()
	p.Title.Text = "fleet history, 100 revisions: slowest answer of 5"
	p.X.Label.Text = "clusters"
	p.Y.Label.Text = "seconds"
	var at, rev plotter.XYs
	for _, r := range res.Runs {
		at = append(at, plotter.XY{X: float64(r.Clusters), Y: r.AtSeconds})
		rev = append(rev, plotter.XY{X: float64(r.Clusters), Y: r.RevisionSeconds})
	}
	if err := plotutil.AddLinePoints(p, "what ran on X at T", at, "which clusters ran R", rev); err != nil {
		return err
	}
	p.Legend.Top = true
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
