// Command quickstart runs the whole system on this machine, the way the README's first command
// shows it: a management cluster and two downstream clusters, the fleet CRDs installed from
// charts/fleet-crd with the Helm SDK, `fleet controller` and one `fleet agent` per cluster as
// local processes, the downstream clusters registered with `fleet install agent-config` and
// `fleet install agent-token`, a git server holding the example repository and a chart
// repository, and the example's GitRepos and HelmOp. It waits until every GitRepo and HelmOp is
// Ready, prints the status tables, and keeps running until interrupted or `quickstart --down`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/dev/example"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller/bootstrap"
	"github.com/fleetgo/fleet/internal/harness/chartinstall"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

func main() {
	o := options{}
	flag.StringVar(&o.dir, "dir", filepath.Join(os.TempDir(), "fleet-quickstart"), "folder for clusters, logs, kubeconfigs and the git and chart repositories")
	flag.StringVar(&o.fleet, "fleet", "bin/fleet", "the fleet binary")
	flag.StringVar(&o.root, "root", ".", "the checkout (charts/ and dev/example/)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to wait for every GitRepo and HelmOp to be Ready")
	flag.DurationVar(&o.checkin, "checkin-interval", 15*time.Second, "agents' check-in interval (the LAST-SEEN column)")
	down := flag.Bool("down", false, "stop a running quickstart and exit")
	exitWhenReady := flag.Bool("exit-when-ready", false, "stop everything once every GitRepo and HelmOp is Ready (exit status 0) or the timeout passes (1)")
	flag.Parse()
	if *down {
		if err := stopRunning(o.dir); err != nil {
			fmt.Fprintln(os.Stderr, "quickstart:", err)
			os.Exit(1)
		}
		return
	}
	o.exitWhenReady = *exitWhenReady
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

type options struct {
	dir, fleet, root string
	timeout, checkin time.Duration
	exitWhenReady    bool
}

// qs is one running quickstart: what it started, stopped in reverse order.
type qs struct {
	options
	start    time.Time
	clusters map[string]*localcluster.Cluster
	procs    []*localcluster.Process
	stops    []func()
	api      fleetcontrollers.Interface
	kubectl  string
}

func pidFile(dir string) string { return filepath.Join(dir, "quickstart.pid") }

// stopRunning signals the quickstart recorded in dir's pid file and waits until it has exited.
func stopRunning(dir string) error {
	data, err := os.ReadFile(pidFile(dir))
	if os.IsNotExist(err) {
		fmt.Println("no quickstart running (" + pidFile(dir) + " not found)")
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("%s: %w", pidFile(dir), err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		_ = os.Remove(pidFile(dir))
		fmt.Printf("quickstart (pid %d) was not running\n", pid)
		return nil
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			fmt.Println("quickstart stopped")
			return nil
		}
	}
	return fmt.Errorf("quickstart (pid %d) did not stop within 2 minutes", pid)
}

func run(o options) error {
	var err error
	if o.root, err = filepath.Abs(o.root); err != nil {
		return err
	}
	if o.fleet, err = filepath.Abs(o.fleet); err != nil {
		return err
	}
	if _, err := os.Stat(o.fleet); err != nil {
		return fmt.Errorf("the fleet binary: %w (run `make build`)", err)
	}
	if data, err := os.ReadFile(pidFile(o.dir)); err == nil {
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(data))); pid > 0 && syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("a quickstart is already running (pid %d); stop it with `make down`", pid)
		}
	}
	// A fresh start every time: state of an earlier run would bring stale certificates and data.
	if err := os.RemoveAll(o.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(o.dir, "logs"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(pidFile(o.dir), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidFile(o.dir))

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	q := &qs{options: o, start: time.Now(), clusters: map[string]*localcluster.Cluster{}}
	defer q.stopAll()
	err = q.up(ctx)
	if err != nil && ctx.Err() == nil {
		q.logTails()
		return err
	}
	if ctx.Err() != nil {
		fmt.Println("\ninterrupted; stopping everything")
		return nil
	}
	ready := q.waitReady(ctx)
	q.table()
	if ctx.Err() != nil {
		fmt.Println("\ninterrupted; stopping everything")
		return nil
	}
	if !ready {
		q.logTails()
		err = fmt.Errorf("not every GitRepo and HelmOp was Ready within %s (see above)", o.timeout)
	} else {
		fmt.Printf("\nall GitRepos and HelmOps Ready after %s\n", time.Since(q.start).Round(time.Second))
	}
	if o.exitWhenReady {
		return err
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
	}
	q.hints()
	select {
	case <-ctx.Done():
	case p := <-q.exited():
		fmt.Fprintln(os.Stderr, p.DiedError())
	}
	fmt.Println("\nstopping everything")
	return nil
}

func (q *qs) step(format string, args ...any) {
	fmt.Printf("[%5.1fs] %s\n", time.Since(q.start).Seconds(), fmt.Sprintf(format, args...))
}

func (q *qs) stopAll() {
	for i := len(q.procs) - 1; i >= 0; i-- {
		q.procs[i].Stop()
	}
	for i := len(q.stops) - 1; i >= 0; i-- {
		q.stops[i]()
	}
}

// exited delivers the first fleet process that ends on its own.
func (q *qs) exited() <-chan *localcluster.Process {
	ch := make(chan *localcluster.Process, len(q.procs))
	for _, p := range q.procs {
		go func(p *localcluster.Process) {
			<-p.Done()
			ch <- p
		}(p)
	}
	return ch
}

func (q *qs) logTails() {
	for _, p := range q.procs {
		fmt.Fprintf(os.Stderr, "----- %s, last 20 lines -----\n%s\n", p.LogPath(), p.Tail(20))
	}
	for _, c := range q.clusters {
		c.WriteLogTails(os.Stderr, 10)
	}
}

// fleetCLI runs the fleet binary and returns what it printed.
func (q *qs) fleetCLI(args ...string) (string, error) {
	out, err := exec.Command(q.fleet, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("fleet %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("fleet %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

func (q *qs) kubectlApply(kubeconfig, manifest string) error {
	c := exec.Command(q.kubectl, "--kubeconfig", kubeconfig, "apply", "-f", "-")
	c.Stdin = strings.NewReader(manifest)
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply: %w: %s", err, out)
	}
	return nil
}

func (q *qs) startFleet(component string, args ...string) error {
	p, err := localcluster.StartProcess(component, q.fleet, args, filepath.Join(q.dir, "logs"))
	if err != nil {
		return err
	}
	q.procs = append(q.procs, p)
	return nil
}

func (q *qs) up(ctx context.Context) error {
	bin, err := localcluster.BinDir()
	if err != nil {
		return err
	}
	q.kubectl = filepath.Join(bin, "kubectl")

	q.step("starting a management cluster and two downstream clusters (logs in %s)", filepath.Join(q.dir, "clusters"))
	var opts []localcluster.Options
	for _, name := range []string{"management", "downstream-dev", "downstream-prod"} {
		opts = append(opts, localcluster.Options{Name: name, Tier: localcluster.Workloads, Dir: filepath.Join(q.dir, "clusters", name)})
	}
	started, err := localcluster.StartAll(ctx, opts...)
	if err != nil {
		return err
	}
	for _, c := range started {
		c := c
		q.clusters[c.Name] = c
		q.stops = append(q.stops, c.Stop)
		link := filepath.Join(q.dir, c.Name+".kubeconfig")
		if err := os.Symlink(c.Kubeconfig, link); err != nil {
			return err
		}
		c.Kubeconfig = link
	}
	mgmt := q.clusters["management"]

	q.step("installing the CRDs from charts/fleet-crd with the Helm SDK")
	if _, err := chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{Kubeconfig: mgmt.Kubeconfig, Namespace: fleet.SystemNamespace,
		ReleaseName: "fleet-crd", ChartDir: filepath.Join(q.root, "charts", "fleet-crd"), Wait: true}); err != nil {
		return err
	}
	f, err := fleetfactory.NewFactoryFromConfig(mgmt.RESTConfig())
	if err != nil {
		return err
	}
	q.api = f.Fleet().V1alpha1()
	if err := q.configure(ctx, mgmt); err != nil {
		return err
	}

	q.step("starting fleet controller (git runs in-process; log %s)", filepath.Join(q.dir, "logs", "controller.log"))
	if err := q.startFleet("controller", "controller", "--kubeconfig", mgmt.Kubeconfig, "--leader-elect=false",
		"--health-addr=", "--metrics-addr=", "--webhook-addr=", "--workers=8"); err != nil {
		return err
	}

	q.step("waiting for the controller to install the agent of its own cluster (Cluster fleet-local/local)")
	if err := q.waitImported(ctx); err != nil {
		return err
	}
	if err := q.startFleet("agent-management", "agent", "--kubeconfig", mgmt.Kubeconfig, "--namespace", bootstrap.LocalAgentNamespace,
		"--leader-elect=false", "--health-addr=", "--metrics-addr=", "--checkin-interval", q.checkin.String()); err != nil {
		return err
	}

	for _, d := range []struct {
		name   string
		labels map[string]string
	}{{"downstream-dev", example.DevLabels}, {"downstream-prod", example.ProdLabels}} {
		c := q.clusters[d.name]
		args := []string{"install", "agent-config"}
		for _, k := range slices.Sorted(maps.Keys(d.labels)) {
			args = append(args, "-l", k+"="+d.labels[k])
		}
		q.step("registering %s: fleet %s | kubectl apply; fleet install agent-token | kubectl apply", d.name, strings.Join(args, " "))
		cfg, err := q.fleetCLI(args...)
		if err != nil {
			return err
		}
		if err := q.kubectlApply(c.Kubeconfig, cfg); err != nil {
			return err
		}
		token, err := q.fleetCLI("install", "agent-token", "--kubeconfig", mgmt.Kubeconfig, "--ttl", "12h")
		if err != nil {
			return err
		}
		if err := q.kubectlApply(c.Kubeconfig, token); err != nil {
			return err
		}
		if err := q.startFleet("agent-"+d.name, "agent", "--kubeconfig", c.Kubeconfig, "--leader-elect=false",
			"--health-addr=", "--metrics-addr=", "--checkin-interval", q.checkin.String()); err != nil {
			return err
		}
	}

	q.step("starting a git server and a chart repository with the example (dev/example)")
	git, err := localserver.StartGitServer(filepath.Join(q.dir, "git"), localserver.BasicAuth{})
	if err != nil {
		return err
	}
	q.stops = append(q.stops, git.Close)
	charts, err := localserver.StartChartRepo(filepath.Join(q.dir, "charts"), localserver.BasicAuth{})
	if err != nil {
		return err
	}
	q.stops = append(q.stops, charts.Close)
	if err := example.AddCharts(q.root, charts); err != nil {
		return err
	}
	if _, err := example.Publish(ctx, q.root, git, charts.URL, "the example repository", nil); err != nil {
		return err
	}
	gitrepos := example.GitRepos(git.RepoURL(example.RepoName)) + "---\n" + example.HelmOp(charts.URL)
	if err := os.WriteFile(filepath.Join(q.dir, "gitrepos.yaml"), []byte(gitrepos), 0o644); err != nil {
		return err
	}
	q.step("applying the GitRepos and the HelmOp (%s):\n%s", filepath.Join(q.dir, "gitrepos.yaml"), indent(gitrepos))
	return q.kubectlApply(mgmt.Kubeconfig, gitrepos)
}

// configure writes the manager's configuration as the fleet chart does.
func (q *qs) configure(ctx context.Context, mgmt *localcluster.Cluster) error {
	kube, err := mgmt.Clientset()
	if err != nil {
		return err
	}
	cfg := mgmt.RESTConfig()
	cm, err := config.Config{APIServerURL: cfg.Host, APIServerCA: string(cfg.CAData),
		AgentCheckinInterval: metav1.Duration{Duration: q.checkin}}.ConfigMap(fleet.SystemNamespace)
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().ConfigMaps(fleet.SystemNamespace).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

func (q *qs) waitImported(ctx context.Context) error {
	var last string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		c, err := q.api.Cluster().Get(fleet.LocalNamespace, bootstrap.LocalClusterName, metav1.GetOptions{})
		if err == nil {
			if cond := fleet.FindCondition(c.Status.Conditions, "Imported"); cond != nil {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				last = cond.Message
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("the controller did not install the local agent within 2 minutes: %s", last)
}

// waitReady shows progress until every GitRepo and HelmOp is Ready, and reports whether they all
// are.
func (q *qs) waitReady(ctx context.Context) bool {
	q.step("waiting for every GitRepo and HelmOp to be Ready")
	deadline := time.Now().Add(q.timeout)
	seen := map[string]string{}
	for {
		lines, allReady := q.readiness()
		for key, line := range lines {
			if seen[key] != line {
				seen[key] = line
				q.step("  %s", line)
			}
		}
		if allReady {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(2 * time.Second):
		}
	}
}

// readiness is a progress line per GitRepo and HelmOp, and whether all of them are Ready.
func (q *qs) readiness() (map[string]string, bool) {
	lines := map[string]string{}
	repos, err := q.api.GitRepo().List("", metav1.ListOptions{})
	if err != nil {
		lines["gitrepos"] = "listing GitRepos: " + err.Error()
		return lines, false
	}
	ops, err := q.api.HelmOp().List("", metav1.ListOptions{})
	if err != nil {
		lines["helmops"] = "listing HelmOps: " + err.Error()
		return lines, false
	}
	allReady := len(repos.Items) > 0
	line := func(key, what string, st fleet.StatusBase) {
		state, msg := "NotReady", ""
		if c := fleet.FindCondition(st.Conditions, fleet.ConditionReady); c != nil {
			msg = c.Message
			if c.Status == corev1.ConditionTrue {
				state = "Ready"
			}
		}
		allReady = allReady && state == "Ready"
		lines[key] = fmt.Sprintf("%-28s %-16s bundle deployments ready %-5s clusters ready %d/%d  %s %s",
			key, what, st.Display.ReadyBundleDeployments, st.ReadyClusters, st.DesiredReadyClusters, state, firstLine(msg))
	}
	for _, gr := range repos.Items {
		line(gr.Namespace+"/"+gr.Name, "commit "+shortCommit(gr.Status.Commit), gr.Status.StatusBase)
	}
	for _, op := range ops.Items {
		line(op.Namespace+"/"+op.Name, "chart "+op.Status.Version, op.Status.StatusBase)
	}
	return lines, allReady
}

func shortCommit(c string) string {
	if len(c) > 8 {
		return c[:8]
	}
	return c
}

// table prints what kubectl shows for GitRepos, HelmOps, Clusters and Bundles: the CRDs' printer columns.
func (q *qs) table() {
	mgmt := q.clusters["management"]
	for _, kind := range []string{"gitrepos.fleet.cattle.io", "helmops.fleet.cattle.io", "clusters.fleet.cattle.io", "bundles.fleet.cattle.io"} {
		fmt.Printf("\n$ kubectl get %s -A\n", kind)
		c := exec.Command(q.kubectl, "--kubeconfig", mgmt.Kubeconfig, "get", kind, "-A")
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		_ = c.Run()
	}
}

func (q *qs) hints() {
	fmt.Println("\nkubeconfigs:")
	for _, name := range []string{"management", "downstream-dev", "downstream-prod"} {
		fmt.Printf("  %-16s %s\n", name, q.clusters[name].Kubeconfig)
	}
	m := q.clusters["management"].Kubeconfig
	fmt.Printf(`
logs: %s (fleet processes) and %s/<cluster>/logs (control planes)

try:
  %[3]s --kubeconfig %[4]s get gitrepos,clusters,bundles -A
  %[3]s --kubeconfig %[4]s get bundledeployments -A
  %[3]s --kubeconfig %[5]s get configmaps -n example-helm stage-settings -o yaml
  %[3]s --kubeconfig %[6]s get configmaps -n example-helm stage-settings -o yaml
  git clone %[7]s   # edit, commit, push: the change rolls out within seconds

Ctrl-C here, or %[8]s --down, stops everything.
`, filepath.Join(q.dir, "logs"), filepath.Join(q.dir, "clusters"), q.kubectl, m,
		q.clusters["downstream-dev"].Kubeconfig, q.clusters["downstream-prod"].Kubeconfig,
		q.gitURL(), filepath.Join(q.root, "dev", "bin", "quickstart"))
}

func (q *qs) gitURL() string {
	list, err := q.api.GitRepo().List(fleet.DefaultNamespace, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		return "(the example repository)"
	}
	return list.Items[0].Spec.Repo
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
