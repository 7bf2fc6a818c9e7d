// Command scale measures the manager at thousands of clusters, end to end: a cluster simulator
// (benchmarks/sim) plays N agents that register through a ClusterRegistrationToken, watch their
// BundleDeployments with their own credentials, report status and check in. For each N it
// measures, against a plain parallel client doing the same writes on the same apiserver (the
// machine's limit):
//
//   - the registration storm: N agents at once, until every Cluster is registered and checked in;
//   - commit to Ready: a GitRepo on a real git server, a commit announced by a push webhook, until
//     every BundleDeployment is applied and Ready and the GitRepo is Ready;
//   - creation and deletion of B bundles x N clusters;
//   - idle: nothing changes while the agents keep checking in;
//   - bad input: an agent writing garbage status during a rollout, and a deleted Cluster's agent.
//
// A separate experiment runs two controller shards beside the unsharded controller. Results go to
// benchmarks/results/scale-*.json and plots to scale-*.png.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/benchmarks/sim"
	"github.com/fleetgo/fleet/internal/harness/localserver"
)

// profileDir, when set, receives the manager's profiles.
var profileDir string

// stormOnly runs, at each size, only the registration storm and its plain-client run.
var stormOnly bool

// memLimit, when set, is the GOMEMLIMIT the controller runs with (Go's soft memory limit, as an
// operator would set it from the container's memory limit).
var memLimit string

// Phase is one experiment at one N.
type Phase struct {
	Name string `json:"name"`
	// Seconds the experiment took (for creation: until every BundleDeployment existed), and
	// ReadySeconds until every one was Ready.
	Seconds      float64 `json:"seconds"`
	ReadySeconds float64 `json:"readySeconds,omitempty"`
	// Objects is how many objects it was about (Clusters, BundleDeployments, or requests).
	Objects int `json:"objects"`
	// RawSeconds is how long the plain client took for the same writes, and Ratio RawSeconds
	// over Seconds (1 is the machine's limit).
	RawSeconds float64 `json:"rawSeconds,omitempty"`
	Ratio      float64 `json:"ratioToRaw,omitempty"`
	// RawOtherCPU is, for the registration storm, the CPU seconds the apiserver and etcd used
	// for the plain client's writes: beside OtherCPU, how much more work fleet's registration
	// gives them than the writes it stands for.
	RawOtherCPU map[string]float64 `json:"rawOtherCPUSeconds,omitempty"`
	// CPU the manager used during the experiment, and its peak RSS so far.
	CPU     float64 `json:"managerCPUSeconds"`
	PeakMiB float64 `json:"managerPeakRSSMiB"`
	// OtherCPU is the CPU seconds the processes sharing the machine with the manager used
	// during the experiment: kube-apiserver, etcd, and the simulator (this process: the
	// simulated agents and the benchmark's own caches). Together with the manager's they tell
	// which of them the experiment waited on.
	OtherCPU map[string]float64 `json:"otherCPUSeconds,omitempty"`
	// Writes the apiserver served during it (mutating requests by verb and resource), Reads
	// the other requests (gets, lists, watches, discovery); Requests all of them (the idle
	// phase of runs before 2026-11-27 evening, which had no Writes and Reads).
	Writes   map[string]int `json:"writes,omitempty"`
	Reads    map[string]int `json:"reads,omitempty"`
	Requests map[string]int `json:"requests,omitempty"`
	// Events counts the Kubernetes Events first recorded during it, by source and reason
	// (idle only): what happened while nothing was supposed to.
	Events map[string]int `json:"events,omitempty"`
	// EtcdWrites is how many writes the apiserver made to etcd during it (creates, updates and
	// deletes: its etcd_requests_total), and EtcdDBMiB the size of etcd's database file at its
	// end.
	EtcdWrites int     `json:"etcdWrites,omitempty"`
	EtcdDBMiB  float64 `json:"etcdDBMiB,omitempty"`
	// ReadyP50 and ReadyP99 are, over the objects it was about, the seconds from its start until
	// each was Ready: commit to Ready per cluster, creation to Ready per BundleDeployment.
	ReadyP50 float64 `json:"readyP50Seconds,omitempty"`
	ReadyP99 float64 `json:"readyP99Seconds,omitempty"`
	// RestartWrites (restarts and fail-overs) is the writes of the window after the stop beyond
	// what standing still writes in as long.
	RestartWrites int `json:"restartWrites,omitempty"`
	// ManagerWrites (restarts and fail-overs) is the writes of the window that were not the
	// agents' (check-ins and status): the manager's, its Lease's and the refused ones.
	ManagerWrites int      `json:"managerWrites,omitempty"`
	Check         string   `json:"check,omitempty"`
	Series        []Series `json:"series,omitempty"`
}

func (p *Phase) finish(e *env, before usage) {
	u := e.usage("")
	p.CPU, p.PeakMiB = u.CPU-before.CPU, u.PeakMiB
	p.OtherCPU = proc.CPUSince(before.others, u.others)
}

func (p *Phase) raw(seconds float64, series ...Series) {
	if seconds == 0 {
		return // no plain-client run (-restart, -storm-only)
	}
	p.RawSeconds = seconds
	if p.Seconds > 0 {
		p.Ratio = seconds / p.Seconds
	}
	p.Series = append(p.Series, series...)
}

// Run is every experiment at one N.
type Run struct {
	Date     string  `json:"date"`
	Cores    int     `json:"cores"`
	MemGiB   float64 `json:"memoryGiB"`
	Clusters int     `json:"clusters"`
	Checkin  string  `json:"checkinInterval"`
	// MemLimit is the GOMEMLIMIT the controller ran with; empty for none (Go's default).
	MemLimit string   `json:"gomemlimit,omitempty"`
	Phases   []Phase  `json:"phases"`
	Notes    []string `json:"notes,omitempty"`
	// Servers are the apiserver's and etcd's figures after the rollouts.
	Servers Servers `json:"servers"`
	// SimWrites, SimConflicts and SimErrors are the simulated agents' status writes.
	SimWrites, SimConflicts, SimErrors int64
}

// plan is what runs at one N.
type plan struct {
	clusters int
	creates  []int // bundle counts of the creation experiments
	idle     time.Duration
	badInput bool
	// restart restarts the manager and fails it over after the last creation, and keeps its
	// Bundles (no deletion); noRaw leaves out the plain client's runs.
	restart, noRaw bool
	// registerOnly deploys nothing: the registration storm, then the idle window.
	registerOnly bool
	// wave, when set, registers the clusters that many at a time, each wave once the one before
	// has checked in, rather than all at once.
	wave int
}

// plans are the sizes a run of size measures: standard (make bench: 100, 1,000 and 5,000
// clusters), 10k (make bench-10k: 10,000 clusters and the idle window), full (both), or small
// (100 and 1,000, about ten minutes, for iteration).
func plans(size string) []plan {
	standard := []plan{
		{clusters: 100},
		{clusters: 1000, creates: []int{5, 50}, badInput: true},
		{clusters: 5000},
	}
	tenK := []plan{{clusters: 10000, creates: []int{5}, idle: 10 * time.Minute}}
	switch size {
	case "25k":
		// In waves of 5,000: all 25,000 at once would take over an hour on two cores (the storm
		// grew 3.4x from 5,000 to 10,000), and what is checked is what they cost once there.
		return []plan{{clusters: 25000, idle: 10 * time.Minute, registerOnly: true, noRaw: true, wave: 5000}}
	case "small":
		return []plan{{clusters: 100}, {clusters: 1000, creates: []int{5}, idle: 2 * time.Minute, badInput: true}}
	case "standard":
		return standard
	case "10k":
		return tenK
	}
	return append(standard, tenK...)
}

func main() {
	fleetBin := flag.String("fleet", "bin/fleet", "fleet binary")
	out := flag.String("out", "benchmarks/results", "results folder")
	size := flag.String("size", "standard", "standard (100, 1,000 and 5,000 clusters), 10k (10,000), full (both), small (100 and 1,000, about ten minutes) or 25k (25,000 clusters registering and checking in, no bundles)")
	only := flag.Int("clusters", 0, "run only the plan of this many clusters (-1: none, only the shards)")
	checkin := flag.Duration("checkin", 15*time.Minute, "the simulated agents' check-in interval (the manager's agentCheckinInterval; Fleet's default is 15m)")
	shards := flag.Bool("shards", true, "run the two-shard experiment")
	flag.StringVar(&profileDir, "profile", "", "save profiles here: the manager's CPU in the idle phase (its first minute and the rest apart); the manager's, the apiserver's and the simulator's heaps after the registration storm and after each size's rollouts; and the CPU of all three (and the manager's heap after it) for a minute of the storm and 40 s of the commit's rollout (5,000 clusters and more) and of the creation and deletion of 50,000 BundleDeployments")
	flag.StringVar(&memLimit, "gomemlimit", "", "run the controller with this GOMEMLIMIT (for example 550MiB); none by default")
	flag.BoolVar(&stormOnly, "storm-only", false, "run only the registration storm (and its plain-client run) at each size")
	plotOnly := flag.Bool("plot-only", false, "run nothing: draw the growth plots from the results in -out")
	rolloutN := flag.Int("rollout", 0, "run only the progressive rollout experiment, at this many clusters")
	secretsN := flag.Int("secrets", 0, "run only the sealed-secrets experiment, at this many clusters")
	rollbackN := flag.Int("rollback", 0, "run only the rollback experiment (fleet rollback of every cluster), at this many clusters")
	restartN := flag.Int("restart", 0, "run only the restart experiment at this many clusters: registration, a commit, 5 Bundles, then the manager restarted and failed over")
	restartIdle := flag.Duration("idle", 0, "with -restart: stand still this long once the 5 Bundles are Ready, before the restart (the idle figure of that size)")
	flag.Parse()
	// The simulated agents log as the agent does; thousands of them would drown the figures.
	logrus.SetLevel(logrus.WarnLevel)
	// Stopped (Ctrl-C, timeout): take the clusters and controllers down too, or they would go on
	// using the machine.
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		stopAll()
		os.Exit(2)
	}()
	if *plotOnly {
		*only, *shards = -1, false
	}
	if *restartIdle > 0 && *restartN == 0 {
		fmt.Fprintln(os.Stderr, "-idle is for the restart experiment: give -restart N too")
		os.Exit(2)
	}
	if *restartN > 0 {
		r, err := runPlan(*fleetBin, plan{clusters: *restartN, creates: []int{5}, restart: true, noRaw: true, idle: *restartIdle}, *checkin)
		finishExperiment(*out, "restart", *restartN, r, r.Clusters, r.Phases, err)
		return
	}
	if *rollbackN > 0 {
		r, err := runRollback(*fleetBin, *rollbackN, *checkin)
		finishExperiment(*out, "rollback", *rollbackN, r, r.Clusters, r.Phases, err)
		return
	}
	if *secretsN > 0 {
		r, err := runSecrets(*fleetBin, *secretsN, *checkin)
		finishExperiment(*out, "secrets", *secretsN, r, r.Clusters, r.Phases, err)
		return
	}
	if *rolloutN > 0 {
		r, err := runRollout(*fleetBin, *rolloutN, *checkin)
		finishExperiment(*out, "rollout", *rolloutN, r, r.Clusters, r.Phases, err)
		return
	}
	if err := run(*fleetBin, *out, *size, *only, *checkin, *shards); err != nil {
		fmt.Fprintln(os.Stderr, "bench scale:", err)
		os.Exit(1)
	}
}

func run(fleetBin, out, size string, only int, checkin time.Duration, shards bool) error {
	for _, p := range plans(size) {
		if only != 0 && p.clusters != only {
			continue
		}
		if only == 0 {
			// Each size in a process of its own: the agents of one size leave gigabytes behind
			// (the 5,000 size's simulator still held 9.7 GiB when 10,000 agents started) that
			// the next size would have to share the machine with.
			if err := runChild(p.clusters); err != nil {
				return fmt.Errorf("%d clusters: %w", p.clusters, err)
			}
			continue
		}
		r, err := runPlan(fleetBin, p, checkin)
		if werr := write(out, fmt.Sprintf("%s-%d", resultsBase(size), p.clusters), r); werr != nil && err == nil {
			err = werr
		}
		if err != nil {
			return fmt.Errorf("%d clusters: %w", p.clusters, err)
		}
	}
	// Growth is plotted over every size in out, this run's and earlier ones'.
	all, err := readRuns(out, size)
	if err != nil {
		return err
	}
	if err := plotGrowth(out, size, all); err != nil {
		return err
	}
	if shards && only <= 0 {
		n := 1000
		r, err := runShards(fleetBin, n, 10)
		if werr := write(out, resultsBase(size)+"-shards", r); werr != nil && err == nil {
			err = werr
		}
		if err != nil {
			return fmt.Errorf("shards: %w", err)
		}
	}
	return nil
}

// resultsBase begins the names of a run's results files: scale-<N>.json, scale-shards.json and
// their plots for the standard, 10k and full runs, the files RESULTS.md cites; scale-small-<N>.json and so on for a
// small one, so that iterating with BENCH_SIZE=small does not write over the full run's results.
func resultsBase(size string) string {
	if size == "small" {
		return "scale-small"
	}
	return "scale"
}

// runChild runs this command again for one size, and no shards; it ends with this process.
func runChild(clusters int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := append(slices.Clone(os.Args[1:]), "-clusters", strconv.Itoa(clusters), "-shards=false")
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	return cmd.Run()
}

// readRuns reads the results in out of every size of a run of size (full or small).
func readRuns(out, size string) ([]Run, error) {
	base := resultsBase(size)
	files, err := filepath.Glob(filepath.Join(out, base+"-*.json"))
	if err != nil {
		return nil, err
	}
	sizeFile := regexp.MustCompile(`^` + regexp.QuoteMeta(base) + `-[0-9]+\.json$`)
	var runs []Run
	for _, f := range files {
		if !sizeFile.MatchString(filepath.Base(f)) {
			continue // the shards' results, a run of the other size, or of other settings (scale-small-1000-checkin-1m)
		}
		var r Run
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &r); err != nil || r.Clusters == 0 || len(r.Phases) == 0 {
			continue // the shards' results, or not a size's
		}
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b Run) int { return a.Clusters - b.Clusters })
	return runs, nil
}

func runPlan(fleetBin string, p plan, checkin time.Duration) (r Run, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := p.clusters
	r = Run{Date: time.Now().UTC().Format(time.RFC3339), Cores: runtime.NumCPU(), MemGiB: proc.MemTotalGiB(), Clusters: n, Checkin: checkin.String(), MemLimit: memLimit}
	say := func(f string, args ...any) {
		fmt.Printf("[%d clusters] "+f+"\n", append([]any{n}, args...)...)
	}
	e, err := newEnv(ctx, fmt.Sprintf("scale%d", n), checkin)
	if err != nil {
		return r, err
	}
	defer e.stop()

	// The machine's limits first, before the controller runs (nothing acts on the objects).
	var rawReg time.Duration
	var rawRegCPU map[string]float64
	if !p.noRaw {
		say("raw: the writes of %d registrations", n)
		var rawRegWrites int
		before := e.cpus()
		if rawReg, rawRegWrites, err = rawRegistration(ctx, e, n); err != nil {
			return r, err
		}
		rawRegCPU = proc.CPUSince(before, e.cpus(), "kube-apiserver", "etcd")
		say("raw: %d writes in %.1f s, apiserver CPU %.1f s", rawRegWrites, rawReg.Seconds(), rawRegCPU["kube-apiserver"])
	}
	if stormOnly {
		p.creates, p.idle, p.badInput = nil, 0, false
	}
	var specs, statuses []time.Duration
	var rawCommitTook time.Duration
	if !stormOnly && !p.noRaw && !p.registerOnly {
		say("raw: a commit's writes for %d clusters", n)
		if specs, statuses, rawCommitTook, err = rawCommit(ctx, e, scaleBundle(0), n); err != nil {
			return r, err
		}
	}
	type rawCD struct {
		created, deleted       []time.Duration
		createTook, deleteTook time.Duration
	}
	raws := map[int]rawCD{}
	for _, b := range p.creates {
		if p.noRaw {
			break
		}
		say("raw: create (with Ready status) and delete %d x %d BundleDeployments", b, n)
		var c rawCD
		c.created, c.deleted, c.createTook, c.deleteTook, err = rawCreateDelete(scaleBundle(0), b, n, rawBDs{e: e, withStatus: true})
		if err != nil {
			return r, err
		}
		raws[b] = c
	}

	if err := e.startController(fleetBin, ""); err != nil {
		return r, err
	}
	v, err := e.token(ctx, "sim")
	if err != nil {
		return r, err
	}
	s := sim.New(sim.Options{Values: v, Prefix: "sim", Labels: simLabels, CheckinInterval: checkin})
	s.Start(ctx)
	defer func() {
		r.SimWrites, r.SimConflicts, r.SimErrors = s.Writes.Load(), s.Conflicts.Load(), s.Errors.Load()
	}()
	timeout := 10*time.Minute + time.Duration(n)*100*time.Millisecond

	say("registration storm")
	ph, err := storm(ctx, e, s, n, p.wave, timeout)
	ph.raw(rawReg.Seconds())
	ph.RawOtherCPU = rawRegCPU
	r.Phases = append(r.Phases, ph)
	if err != nil {
		return r, err
	}
	say("%s", summary(ph))
	if profileDir != "" && e.profiles != "" {
		if err := proc.SaveProfile(e.profiles, profileDir, "heap?gc=1", fmt.Sprintf("heap-storm-%d.pprof", n)); err != nil {
			say("heap profile: %v", err)
		}
		if err := proc.SaveOwnHeap(profileDir, fmt.Sprintf("sim-heap-storm-%d.pprof", n)); err != nil {
			say("simulator heap profile: %v", err)
		}
		if err := proc.SaveAPIServerProfile(ctx, e.kube, profileDir, "heap", fmt.Sprintf("apiserver-heap-storm-%d.pprof", n)); err != nil {
			say("apiserver heap profile: %v", err)
		}
	}
	standStill := func() error {
		say("idle for %s", p.idle)
		ph, err := idle(ctx, e, p.idle)
		r.Phases = append(r.Phases, ph)
		if err == nil {
			say("%s", summary(ph))
		}
		return err
	}
	if stormOnly || p.registerOnly {
		if p.idle > 0 {
			if err := standStill(); err != nil {
				return r, err
			}
		}
		r.Servers = e.servers()
		return r, nil
	}

	git, err := localserver.StartGitServer(filepath.Join(e.mgr.Dir, "git"), localserver.BasicAuth{})
	if err != nil {
		return r, err
	}
	defer git.Close()
	g := &gitRepoRollout{e: e, git: git, dir: filepath.Join(e.mgr.Dir, "repo"), n: n}
	for _, name := range []string{"first deploy of a GitRepo", "commit to Ready (webhook)"} {
		say("%s", name)
		ph, err := g.run(ctx, name, timeout)
		if name != "first deploy of a GitRepo" {
			ph.raw(rawCommitTook.Seconds(), rawSeries("raw: new deployment IDs written", specs), rawSeries("raw: status applied and Ready written", statuses))
		}
		r.Phases = append(r.Phases, ph)
		if err != nil {
			return r, err
		}
		say("%s", summary(ph))
	}

	for i, b := range p.creates {
		say("create %d bundles", b)
		raw := raws[b]
		ph, err := createBundles(ctx, e, b, n, timeout+time.Duration(b*n)*10*time.Millisecond)
		// The plain client writes what the manager and the agents write: each BundleDeployment
		// and its Ready status; its ratio is to the time until every one was Ready.
		ph.raw(raw.createTook.Seconds(), rawSeries("raw: created with status Ready", raw.created))
		if ph.ReadySeconds > 0 {
			ph.Ratio = ph.RawSeconds / ph.ReadySeconds
		}
		r.Phases = append(r.Phases, ph)
		if err != nil {
			return r, err
		}
		say("%s", summary(ph))
		if p.idle > 0 && i == len(p.creates)-1 {
			if err := standStill(); err != nil {
				return r, err
			}
		}
		if p.restart && i == len(p.creates)-1 {
			say("restart and fail over")
			phases, err := runRestarts(ctx, e, s, fleetBin, n)
			r.Phases = append(r.Phases, phases...)
			if err != nil {
				return r, err
			}
			continue
		}
		say("delete %d bundles", b)
		ph, err = deleteBundles(ctx, e, b, n, timeout+time.Duration(b*n)*10*time.Millisecond)
		ph.raw(raw.deleteTook.Seconds(), rawSeries("raw: BundleDeployments deleted", raw.deleted))
		r.Phases = append(r.Phases, ph)
		if err != nil {
			return r, err
		}
		say("%s", summary(ph))
	}
	if p.idle > 0 && len(p.creates) == 0 {
		if err := standStill(); err != nil {
			return r, err
		}
	}

	r.Servers = e.servers()
	say("apiserver peak RSS %.0f MiB, etcd %.0f MiB, etcd database %.0f MiB, simulator %.0f MiB",
		r.Servers.APIServerPeakMiB, r.Servers.EtcdPeakMiB, r.Servers.EtcdDBMiB, r.Servers.SimulatorPeakMiB)
	if profileDir != "" && e.profiles != "" {
		if err := proc.SaveProfile(e.profiles, profileDir, "heap?gc=1", fmt.Sprintf("heap-%d.pprof", n)); err != nil {
			say("heap profile: %v", err)
		}
		if err := proc.SaveOwnHeap(profileDir, fmt.Sprintf("sim-heap-%d.pprof", n)); err != nil {
			say("simulator heap profile: %v", err)
		}
		if err := proc.SaveAPIServerProfile(ctx, e.kube, profileDir, "heap", fmt.Sprintf("apiserver-heap-%d.pprof", n)); err != nil {
			say("apiserver heap profile: %v", err)
		}
	}
	if p.badInput {
		say("bad input")
		ph, notes, err := badInput(ctx, e, s, g, timeout)
		ph.raw(rawCommitTook.Seconds())
		r.Phases = append(r.Phases, ph)
		r.Notes = append(r.Notes, notes...)
		if err != nil {
			return r, err
		}
		say("%s; %v", summary(ph), notes)
	}
	return r, nil
}

func summary(p Phase) string {
	s := fmt.Sprintf("%s: %.1f s", p.Name, p.Seconds)
	if p.ReadySeconds > 0 {
		s += fmt.Sprintf(" (all Ready at %.1f s)", p.ReadySeconds)
	}
	if p.RawSeconds > 0 {
		s += fmt.Sprintf(", raw %.1f s, ratio %.2f", p.RawSeconds, p.Ratio)
	}
	if p.ReadyP50 > 0 {
		s += fmt.Sprintf(", Ready p50 %.1f s p99 %.1f s", p.ReadyP50, p.ReadyP99)
	}
	s += fmt.Sprintf(", manager CPU %.1f s, peak RSS %.0f MiB", p.CPU, p.PeakMiB)
	if cpu, ok := p.OtherCPU["kube-apiserver"]; ok {
		s += fmt.Sprintf(", apiserver CPU %.1f s", cpu)
	}
	if p.EtcdWrites > 0 {
		s += fmt.Sprintf(", etcd %d writes (%.0f/s), database %.0f MiB", p.EtcdWrites, float64(p.EtcdWrites)/p.Seconds, p.EtcdDBMiB)
	}
	if p.Check != "" {
		s += "; " + p.Check
	}
	return s
}

func write(out, base string, v any) error {
	if err := proc.WriteJSON(out, base+".json", v); err != nil {
		return err
	}
	if r, ok := v.(Run); ok {
		return plotProgress(out, base, r)
	}
	return nil
}

// finishExperiment writes a single experiment's result and progress plots, and exits non-zero
// (taking its clusters down) when it or the writing failed.
func finishExperiment(out, name string, n int, r any, clusters int, phases []Phase, err error) {
	base := fmt.Sprintf("%s-%d", name, n)
	if werr := write(out, base, r); werr != nil && err == nil {
		err = werr
	}
	if perr := plotProgress(out, base, Run{Clusters: clusters, Phases: phases}); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench "+name+":", err)
		stopAll()
		os.Exit(1)
	}
}
