package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/benchmarks/sim"
)

// The restart experiment: with every BundleDeployment Ready, the manager is stopped and started
// again, then run as two replicas under leader election, and the leader is stopped (a rolling
// update: it gives the Lease back) and later killed (a lost node: the Lease runs out first). Each
// time it measures how long until the new leader is steady (ready, every work queue empty) and
// what the resync wrote beyond what standing still writes in the same time.

// restartWindow is how long, at least, the writes after a stop are counted: past the longest
// delay the manager puts on a write it decided on (a Cluster's roll-up waits at most 30 s).
const restartWindow = 90 * time.Second

// leaseFlags make the replicas' Lease timing explicit: the fleet chart's (Fleet's
// leaderElection values: 30 s Lease, 25 s renew deadline, 10 s retry period), as installed.
var leaseFlags = []string{"--leader-elect=true", "--leader-election-lease-duration=30s", "--leader-election-renew-deadline=25s",
	"--leader-election-retry-period=10s"}

// replica is one manager process of the experiment: where it serves its health and metrics.
type replica struct {
	health, metrics string
	// profiles is its /debug/pprof/ address (with -profile).
	profiles string
}

// deployed is what a BundleDeployment was when the experiment started: a restart that writes
// nothing leaves both alone.
type deployed struct {
	uid        types.UID
	generation int64
	applied    string
}

// restartExperiment is the state the phases share.
type restartExperiment struct {
	e        *env
	s        *sim.Sim
	fleetBin string
	// objects is how many objects the manager manages (Bundles, BundleDeployments, Clusters,
	// ClusterGroups, GitRepos and the registrations); rate the writes per second while idle.
	objects int
	rate    float64
	before  map[string]deployed
	// clusters is the run's size; phases counts the phases profiled, profiled waits for the
	// phase's profile (with -profile).
	clusters, phases int
	profiled         sync.WaitGroup
}

func runRestarts(ctx context.Context, e *env, s *sim.Sim, fleetBin string, clusters int) ([]Phase, error) {
	x := &restartExperiment{e: e, s: s, fleetBin: fleetBin, clusters: clusters}
	var err error
	if x.before, err = x.deployments(); err != nil {
		return nil, err
	}
	if x.objects, err = managedObjects(ctx, e); err != nil {
		return nil, err
	}
	if x.rate, err = idleWriteRate(ctx, e, 30*time.Second); err != nil {
		return nil, err
	}
	var a, b replica
	var phases []Phase
	for _, step := range []struct {
		name    string
		sig     syscall.Signal
		next    *replica
		standby bool
	}{
		// The run's unelected manager stops; replica a, elected, starts in its place.
		{"restart the manager", syscall.SIGTERM, &a, false},
		{"fail over to a second replica (the leader stops and gives the Lease back)", syscall.SIGTERM, &b, true},
		{"fail over to a second replica (the leader is killed; its Lease runs out)", syscall.SIGKILL, &a, true},
	} {
		ph, err := x.phase(ctx, step.name, step.sig, step.next, step.standby)
		phases = append(phases, ph)
		if err != nil {
			return phases, err
		}
		fmt.Printf("%s\n", summary(ph))
	}
	// The run's heap profile at its end is the last leader's (replica a leads again).
	e.profiles = a.profiles
	return phases, nil
}

// phase stops the measured manager with sig and measures until next leads and is steady. With
// standby, next is started beside the leader first and waits for the Lease; without, it is
// started once the leader is gone.
func (x *restartExperiment) phase(ctx context.Context, name string, sig syscall.Signal, next *replica, standby bool) (Phase, error) {
	e := x.e
	if standby {
		if err := x.start(next, "standby", "fleet-controller-standby"); err != nil {
			return Phase{}, err
		}
		if err := waitFor(2*time.Minute, func() (bool, error) { return proc.HTTPStatus(next.health+"/healthz") == http.StatusOK, nil }); err != nil {
			return Phase{}, fmt.Errorf("%s: the standby replica does not run: %w", name, err)
		}
		// A standby has stood by for a while when its leader is lost: its caches are filled
		// (unless it runs with --warm-standby=false, which the benchmark does not).
		if err := waitFor(10*time.Minute, func() (bool, error) { return standbyFilled(next), nil }); err != nil {
			return Phase{}, fmt.Errorf("%s: the standby replica's caches are not filled: %w", name, err)
		}
	}
	requests, err := proc.RequestCounts(ctx, e.kube)
	if err != nil {
		return Phase{}, err
	}
	etcd, err := proc.EtcdWrites(ctx, e.kube)
	if err != nil {
		return Phase{}, err
	}
	m := mark{requests: requests, etcd: etcd, sim: x.s.Writes.Load(), others: e.cpus()}
	start := time.Now()
	if err := x.stop(sig); err != nil {
		return Phase{}, err
	}
	if standby {
		e.procs[""] = e.procs["standby"]
		delete(e.procs, "standby")
	} else if err := x.start(next, "", "fleet-controller-restarted"); err != nil {
		return Phase{}, err
	}
	m.cpu = proc.CPUSeconds(e.procs[""].Process.Pid)
	x.profile(ctx, next)
	if err := steady(next, 5*time.Minute); err != nil {
		return Phase{}, fmt.Errorf("%s: not steady: %w", name, err)
	}
	took := time.Since(start)
	p := Phase{Name: name, Seconds: took.Seconds(), Objects: x.objects}
	// The writes are counted for the window, or until 30 s past steady when that is later.
	window := max(restartWindow, took+30*time.Second)
	time.Sleep(time.Until(start.Add(window)))
	err = x.tally(ctx, &p, m, window)
	x.profiled.Wait()
	return p, err
}

// mark is what the counters read when a phase began.
type mark struct {
	requests map[string]int
	etcd     int
	sim      int64
	others   map[string]float64
	// cpu is the new leader's CPU seconds when it took over.
	cpu float64
}

// tally fills p with the window's writes, the manager's CPU and the check that nothing was
// deployed again.
func (x *restartExperiment) tally(ctx context.Context, p *Phase, m mark, window time.Duration) error {
	e := x.e
	after, err := proc.RequestCounts(ctx, e.kube)
	if err != nil {
		return err
	}
	p.Writes = map[string]int{}
	total := 0
	for k, v := range proc.Delta(m.requests, after) {
		if proc.IsWrite(k) {
			p.Writes[k] = v
			total += v
		}
	}
	pid := e.procs[""].Process.Pid
	p.CPU, p.PeakMiB = proc.CPUSeconds(pid)-m.cpu, proc.PeakRSS(pid)
	p.OtherCPU = map[string]float64{}
	for name, cpu := range e.cpus() {
		p.OtherCPU[name] = math.Round((cpu-m.others[name])*100) / 100
	}
	etcdAfter, err := proc.EtcdWrites(ctx, e.kube)
	if err != nil {
		return err
	}
	p.EtcdWrites = etcdAfter - m.etcd
	p.EtcdDBMiB = e.servers().EtcdDBMiB
	p.RestartWrites = total - int(x.rate*window.Seconds()+0.5)
	// The agents' own writes: check-ins (the only PATCHes of clusters/status) and status.
	agents := p.Writes["PATCH clusters/status"] + int(x.s.Writes.Load()-m.sim)
	p.ManagerWrites = total - agents
	changed, err := x.changed()
	if err != nil {
		return err
	}
	p.Check = fmt.Sprintf("%d writes in %s, %d beyond standing still's %.2f/s (%.2f%% of %d objects); %d not the agents' (check-ins, status), of them %d Lease writes; agents' status writes %d; BundleDeployments deployed again or replaced %d",
		total, window.Round(time.Second), p.RestartWrites, x.rate, 100*float64(p.RestartWrites)/float64(x.objects), x.objects,
		p.ManagerWrites, p.Writes["PUT leases"]+p.Writes["POST leases"], x.s.Writes.Load()-m.sim, changed)
	if changed > 0 {
		return fmt.Errorf("%s: %d BundleDeployments changed", p.Name, changed)
	}
	return nil
}

// start runs a replica under leader election as procs[key], with addresses of its own.
func (x *restartExperiment) start(r *replica, key, name string) error {
	health, err := freeAddr()
	if err != nil {
		return err
	}
	metrics, err := freeAddr()
	if err != nil {
		return err
	}
	r.health, r.metrics = "http://"+health, "http://"+metrics
	args := append([]string{"--health-addr=" + health, "--metrics-addr=" + metrics, "--webhook-addr="}, leaseFlags...)
	if profileDir != "" {
		if r.profiles, err = freeAddr(); err != nil {
			return err
		}
		args = append(args, "--profile-addr="+r.profiles)
	}
	return x.e.launch(x.fleetBin, key, name, args)
}

// profile, with -profile, records the CPU of the phase's new leader for 2 minutes from the stop
// (restart-<clusters>-<phase, from 1>-manager-cpu.pprof): what its resync spends the time on, the
// wait for the Lease included. The phase waits for it after its tally.
func (x *restartExperiment) profile(ctx context.Context, r *replica) {
	if r.profiles == "" {
		return
	}
	x.phases++
	file := fmt.Sprintf("restart-%d-%d-manager-cpu.pprof", x.clusters, x.phases)
	secs := fmt.Sprintf("profile?seconds=%d", int((restartWindow + 30*time.Second).Seconds()))
	x.profiled.Go(func() {
		// A process just started serves its profiles a moment later.
		err := waitFor(10*time.Second, func() (bool, error) { return proc.HTTPStatus("http://"+r.profiles+"/debug/pprof/") != 0, nil })
		if err == nil {
			err = proc.SaveProfile(r.profiles, profileDir, secs, file)
		}
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", file, err)
		}
	})
}

// stop ends the measured manager with sig and waits until it is gone.
func (x *restartExperiment) stop(sig syscall.Signal) error {
	p := x.e.procs[""]
	if err := p.Process.Signal(sig); err != nil {
		return err
	}
	_, err := p.Process.Wait()
	delete(x.e.procs, "")
	return err
}

// standbyFilledLine is the metric's line once a standby's caches are filled.
var standbyFilledLine = regexp.MustCompile(`(?m)^fleet_controller_standby_caches_filled 1$`)

// standbyFilled reports whether r's caches were filled while it stands by.
func standbyFilled(r *replica) bool {
	resp, err := http.Get(r.metrics + "/metrics?name[]=fleet_controller_standby_caches_filled")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return err == nil && standbyFilledLine.Match(body)
}

// steady waits until r is ready and every work queue of it is empty, four samples a quarter
// second apart in a row.
func steady(r *replica, timeout time.Duration) error {
	calm := 0
	return waitFor(timeout, func() (bool, error) {
		if proc.HTTPStatus(r.health+"/readyz") != http.StatusOK {
			calm = 0
			return false, nil
		}
		busy, err := proc.QueuedWork(r.metrics + "/metrics")
		if err != nil || busy > 0 {
			calm = 0
			return false, nil
		}
		calm++
		return calm >= 4, nil
	})
}

// deployments reads every BundleDeployment's identity, generation and applied deployment.
func (x *restartExperiment) deployments() (map[string]deployed, error) {
	list, err := x.e.api.BundleDeployment().List("", metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]deployed{}
	for _, bd := range list.Items {
		out[bd.Namespace+"/"+bd.Name] = deployed{uid: bd.UID, generation: bd.Generation, applied: bd.Status.AppliedDeploymentID}
	}
	return out, nil
}

// changed counts the BundleDeployments replaced, given a new spec or deployed again since the
// experiment started, and those gone or new.
func (x *restartExperiment) changed() (int, error) {
	now, err := x.deployments()
	if err != nil {
		return 0, err
	}
	n := 0
	for k, was := range x.before {
		if now[k] != was {
			n++
		}
	}
	for k := range now {
		if _, ok := x.before[k]; !ok {
			n++
		}
	}
	return n, nil
}

// managedObjects counts the objects of the kinds the manager reconciles.
func managedObjects(ctx context.Context, e *env) (int, error) {
	total := 0
	for _, list := range []func() (int, error){
		func() (int, error) {
			l, err := e.api.BundleDeployment().List("", metav1.ListOptions{})
			return size(l, err)
		},
		func() (int, error) { l, err := e.api.Bundle().List("", metav1.ListOptions{}); return size(l, err) },
		func() (int, error) { l, err := e.api.Cluster().List("", metav1.ListOptions{}); return size(l, err) },
		func() (int, error) {
			l, err := e.api.ClusterGroup().List("", metav1.ListOptions{})
			return size(l, err)
		},
		func() (int, error) { l, err := e.api.GitRepo().List("", metav1.ListOptions{}); return size(l, err) },
		func() (int, error) {
			l, err := e.api.ClusterRegistration().List("", metav1.ListOptions{})
			return size(l, err)
		},
	} {
		n, err := list()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// size is how many items a list holds.
func size(l runtime.Object, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return meta.LenList(l), nil
}

// idleWriteRate is the apiserver's writes per second over d while nothing changes (the agents'
// check-ins and whatever the manager writes at rest).
func idleWriteRate(ctx context.Context, e *env, d time.Duration) (float64, error) {
	if err := eventsDrained(ctx, e, 10*time.Second, 15*time.Minute); err != nil {
		return 0, err
	}
	before, err := proc.WriteCounts(ctx, e.kube)
	if err != nil {
		return 0, err
	}
	time.Sleep(d)
	after, err := proc.WriteCounts(ctx, e.kube)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, v := range proc.Delta(before, after) {
		total += v
	}
	fmt.Printf("standing still: %d writes in %s\n", total, d)
	return float64(total) / d.Seconds(), nil
}

// eventsDrained waits until the apiserver has written no Event for quiet: the manager posts the
// Events of a rollout one at a time, for minutes after it at 5,000 BundleDeployments and more,
// and a sample of standing still taken meanwhile counts them as its own.
func eventsDrained(ctx context.Context, e *env, quiet, most time.Duration) error {
	start := time.Now()
	last, lastChange := -1, start
	// Every few seconds: the apiserver's metrics are megabytes at this scale.
	for time.Since(lastChange) < quiet {
		if time.Since(start) > most {
			return fmt.Errorf("the manager still posts Events %s after the rollout", most)
		}
		counts, err := proc.WriteCounts(ctx, e.kube)
		if err != nil {
			return err
		}
		if n := eventWrites(counts); n != last {
			last, lastChange = n, time.Now()
		}
		time.Sleep(quiet / 4)
	}
	fmt.Printf("the rollout's Events were posted %s after the rollout\n", (lastChange.Sub(start)).Round(time.Second))
	return nil
}

// eventWrites counts the writes of Events in a WriteCounts map.
func eventWrites(counts map[string]int) int {
	n := 0
	for k, v := range counts {
		if _, resource, _ := strings.Cut(k, " "); resource == "events" || strings.HasPrefix(resource, "events ") {
			n += v
		}
	}
	return n
}
