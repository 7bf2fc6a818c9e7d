package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/benchmarks/sim"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The progressive rollout experiment: a Bundle on every simulated cluster rolls out by a
// RolloutPolicy of three stages (one canary cluster, 10% of the rest, the rest), each soaking
// rolloutSoak, with one HTTP gate the simulated agents report. Three revisions follow the first
// deployment: a healthy one; one whose canary fails its gate; one whose second stage fails on
// three of its clusters, each saying so with its own address and timing (one cause).
const (
	rolloutBundle = "progressive"
	rolloutSoak   = 20 * time.Second
	// rolloutWatch is how long, after a halt, the experiment keeps looking for clusters that
	// got the failed revision anyway.
	rolloutWatch = 15 * time.Second
)

// RolloutRun is the experiment's result.
type RolloutRun struct {
	Date     string  `json:"date"`
	Cores    int     `json:"cores"`
	MemGiB   float64 `json:"memoryGiB"`
	Clusters int     `json:"clusters"`
	// Stages are the stages' sizes, and SoakSeconds each stage's soak.
	Stages      []int   `json:"stages"`
	SoakSeconds float64 `json:"soakSeconds"`
	// Healthy: from the Bundle's update until every cluster runs the revision and the Rollout is
	// Complete; LimitSeconds is the goal (the soaks' sum plus 60 s).
	Healthy RolloutPhase `json:"healthy"`
	// CanaryFailure and StageFailure: the failing revisions.
	CanaryFailure RolloutPhase `json:"canaryFailure"`
	StageFailure  RolloutPhase `json:"stageFailure"`
	// Notifications are an Alert's messages on the Bundle over all four revisions.
	Notifications Notifications `json:"notifications"`
	Phases        []Phase       `json:"phases"`
}

// RolloutPhase is one revision's rollout.
type RolloutPhase struct {
	Seconds      float64 `json:"seconds"`
	LimitSeconds float64 `json:"limitSeconds,omitempty"`
	// Updated is the most clusters that had the revision at once; Further those of them outside
	// the stages that were let in (0 is the goal).
	Updated int `json:"updated,omitempty"`
	Further int `json:"further"`
	// HaltSeconds is from the update until the Rollout shows the halt; RolledBackSeconds from
	// the first failure an agent reported until every updated cluster reported the previous
	// revision applied again (goal: 120).
	HaltSeconds       float64 `json:"haltSeconds,omitempty"`
	RolledBackSeconds float64 `json:"rolledBackSeconds,omitempty"`
}

// rolloutExperiment holds what the phases share.
type rolloutExperiment struct {
	e      *env
	n      int
	canary string // the canary's cluster namespace
	// threeOfTenth are three cluster namespaces of the second stage: those failing revision v4.
	threeOfTenth map[string]int
	gateFailure  atomic.Pointer[func(bd *fleet.BundleDeployment) string]
	bds          *watcher[*fleet.BundleDeployment]
}

func runRollout(fleetBin string, n int, checkin time.Duration) (r RolloutRun, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r = RolloutRun{Date: time.Now().UTC().Format(time.RFC3339), Cores: runtime.NumCPU(), MemGiB: proc.MemTotalGiB(), Clusters: n,
		SoakSeconds: rolloutSoak.Seconds()}
	x := &rolloutExperiment{n: n}
	e, _, ph, err := simulated(ctx, fleetBin, "rollout", n, checkin, sim.Options{
		GateFailure: func(_ string, bd *fleet.BundleDeployment) string {
			if f := x.gateFailure.Load(); f != nil {
				return (*f)(bd)
			}
			return ""
		}})
	if e != nil {
		defer e.stop()
	}
	x.e = e
	r.Phases = append(r.Phases, ph)
	if err != nil {
		return r, err
	}
	x.bds = bdWatcher(ctx, e)
	defer x.bds.cancel()
	probe, err := startNotifyProbe(ctx, e, rolloutBundle)
	if err != nil {
		return r, err
	}
	defer func() {
		r.Notifications = probe.stop()
		fmt.Printf("[rollout %d] notifications: %d messages %v; from transition to delivery p95 %.2f s, max %.2f s (goal %.0f s)\n",
			n, r.Notifications.Messages, r.Notifications.Reasons, r.Notifications.P95Seconds, r.Notifications.MaxSeconds, notifyLimit.Seconds())
		for _, f := range r.Notifications.Failures {
			fmt.Printf("[rollout %d]   %s: %d groups %+v\n", n, f.Reason, len(f.Groups), f.Groups)
		}
	}()
	if r.Stages, err = x.setup(); err != nil {
		return r, err
	}
	return r, x.phases(&r)
}

// setup writes the policy and the Bundle's first revision, and waits for it everywhere.
func (x *rolloutExperiment) setup() ([]int, error) {
	clusters, err := x.e.api.Cluster().List(fleet.DefaultNamespace, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(clusters.Items, func(a, b fleet.Cluster) int { return strings.Compare(a.Name, b.Name) })
	first := clusters.Items[0]
	x.canary = first.Status.Namespace
	x.threeOfTenth = map[string]int{}
	for i, c := range []fleet.Cluster{clusters.Items[1], clusters.Items[4], clusters.Items[9]} {
		x.threeOfTenth[c.Status.Namespace] = i + 1
	}
	soak := &metav1.Duration{Duration: rolloutSoak}
	ten := int32(10)
	_, err = x.e.api.RolloutPolicy().Create(&fleet.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: fleet.DefaultNamespace},
		Spec: fleet.RolloutPolicySpec{
			Stages: []fleet.RolloutStage{{Name: "canary", ClusterName: first.Name, Soak: soak},
				{Name: "tenth", Percent: &ten, Soak: soak}, {Name: "rest", Soak: soak}},
			Gates:            []fleet.HealthGate{{Name: "smoke", HTTPGet: &fleet.HTTPGate{URL: "http://smoke.invalid/"}}},
			ProgressDeadline: &metav1.Duration{Duration: 2 * time.Minute}}})
	if err != nil {
		return nil, err
	}
	b := scaleBundle(0)
	b.Name, b.Annotations = rolloutBundle, map[string]string{fleet.RolloutPolicyAnnotation: "bench"}
	b.Spec.DefaultNamespace = "v1"
	if _, err := x.e.api.Bundle().Create(b); err != nil {
		return nil, err
	}
	fmt.Printf("[rollout %d] first revision\n", x.n)
	if _, err := x.revision("v1", "", 10*time.Minute); err != nil {
		return nil, err
	}
	rest := x.n - 1
	tenth := (rest + 9) / 10
	return []int{1, tenth, rest - tenth}, nil
}

// phases runs the three revisions after the first.
func (x *rolloutExperiment) phases(r *RolloutRun) error {
	limit := 3*rolloutSoak + time.Minute
	fmt.Printf("[rollout %d] a healthy revision\n", x.n)
	ph, err := x.revision("v2", "v1", limit+5*time.Minute)
	r.Phases = append(r.Phases, ph)
	r.Healthy = RolloutPhase{Seconds: ph.Seconds, LimitSeconds: limit.Seconds(), Updated: x.n}
	if err != nil {
		return err
	}
	fmt.Printf("[rollout %d] %.1f s (goal %.0f s); a revision whose canary fails its gate\n", x.n, ph.Seconds, limit.Seconds())
	r.CanaryFailure, ph, err = x.failing("v3", "v2", 0, func(bd *fleet.BundleDeployment) bool { return bd.Namespace == x.canary })
	r.Phases = append(r.Phases, ph)
	if err != nil {
		return err
	}
	fmt.Printf("[rollout %d] canary: %d further clusters, all back %.1f s after the first failure; a revision whose second stage fails\n",
		x.n, r.CanaryFailure.Further, r.CanaryFailure.RolledBackSeconds)
	r.StageFailure, ph, err = x.failing("v4", "v2", 1+r.Stages[1], func(bd *fleet.BundleDeployment) bool { return x.threeOfTenth[bd.Namespace] > 0 })
	r.Phases = append(r.Phases, ph)
	if err == nil {
		fmt.Printf("[rollout %d] second stage: %d updated, %d further, all back %.1f s after the first failure\n",
			x.n, r.StageFailure.Updated, r.StageFailure.Further, r.StageFailure.RolledBackSeconds)
	}
	return err
}

// given: the deployment has the revision's options; applied: and its agent reported them applied.
func given(v string) func(*fleet.BundleDeployment) bool {
	return func(bd *fleet.BundleDeployment) bool {
		return bd.Labels[fleet.BundleLabel] == rolloutBundle && bd.Spec.Options.DefaultNamespace == v
	}
}

func applied(v string) func(*fleet.BundleDeployment) bool {
	g := given(v)
	return func(bd *fleet.BundleDeployment) bool {
		return g(bd) && bd.Spec.DeploymentID != "" && bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID
	}
}

// update gives the Bundle the revision v.
func (x *rolloutExperiment) update(v string) error {
	return waitFor(time.Minute, func() (bool, error) {
		b, err := x.e.api.Bundle().Get(fleet.DefaultNamespace, rolloutBundle, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		b.Spec.DefaultNamespace = v
		_, err = x.e.api.Bundle().Update(b)
		return err == nil, nil
	})
}

func (x *rolloutExperiment) rollout() fleet.RolloutStatus {
	r, err := x.e.api.Rollout().Get(fleet.DefaultNamespace, rolloutBundle, metav1.GetOptions{})
	if err != nil {
		return fleet.RolloutStatus{}
	}
	return r.Status
}

// revision rolls v out and waits until every cluster runs it and the rollout is complete.
func (x *rolloutExperiment) revision(v, prev string, timeout time.Duration) (Phase, error) {
	c := x.bds.counter(context.Background(), []func(*fleet.BundleDeployment) bool{given(v), applied(v), applied(prev)})
	start := time.Now()
	smp := sample(c, start, []string{"clusters given " + v, "clusters running " + v, "clusters running " + prev})
	if err := x.update(v); err != nil {
		return Phase{}, err
	}
	_, err := until(c, timeout, func(counts []int) bool { return counts[1] == x.n && x.rollout().Phase == fleet.RolloutComplete })
	ph := Phase{Name: "rollout of " + v, Seconds: time.Since(start).Seconds(), Objects: x.n, Series: smp.stop()}
	if err != nil {
		return ph, fmt.Errorf("revision %s: %w", v, err)
	}
	return ph, nil
}

// failing rolls out v, whose gate fails on the clusters fail selects, and measures the halt and
// the rollback to prev: from the first failure an agent reported until every cluster runs prev
// again. allowed is how many clusters the stages up to the failing one hold.
func (x *rolloutExperiment) failing(v, prev string, allowed int, fail func(*fleet.BundleDeployment) bool) (RolloutPhase, Phase, error) {
	f := func(bd *fleet.BundleDeployment) string {
		if bd.Spec.Options.DefaultNamespace == v && fail(bd) {
			// One cause, told with what differs between clusters: an address, a duration.
			i := x.threeOfTenth[bd.Namespace]
			return fmt.Sprintf("simulated: GET http://10.0.%d.17:8080/healthz: status 503 after %d ms", i, 100+37*i)
		}
		return ""
	}
	x.gateFailure.Store(&f)
	defer x.gateFailure.Store(nil)
	outsideCanary := func(bd *fleet.BundleDeployment) bool { return given(v)(bd) && bd.Namespace != x.canary }
	gateFailed := func(bd *fleet.BundleDeployment) bool {
		c := fleet.FindCondition(bd.Status.Conditions, fleet.GateCondition("smoke"))
		return given(v)(bd) && c != nil && c.Status == corev1.ConditionFalse
	}
	c := x.bds.counter(context.Background(), []func(*fleet.BundleDeployment) bool{given(v), outsideCanary, applied(prev), gateFailed})
	before := x.rollout().Revision
	start := time.Now()
	smp := sample(c, start, []string{"clusters given " + v, "of them not the canary", "clusters running " + prev, "clusters failing the gate"})
	var out RolloutPhase
	if err := x.update(v); err != nil {
		return out, Phase{}, err
	}
	var firstFailure time.Time
	err := waitFor(5*time.Minute, func() (bool, error) {
		if firstFailure.IsZero() && c.counts()[3] > 0 {
			firstFailure = time.Now()
		}
		st := x.rollout()
		return st.Revision != before && st.Phase == fleet.RolloutRolledBack, nil
	})
	out.HaltSeconds = time.Since(start).Seconds()
	if err == nil {
		_, err = until(c, 5*time.Minute, func(counts []int) bool { return counts[0] == 0 && counts[2] == x.n })
		if firstFailure.IsZero() {
			firstFailure = start
		}
		out.RolledBackSeconds = time.Since(firstFailure).Seconds()
	}
	if err == nil {
		time.Sleep(rolloutWatch) // anything let in late would show now
	}
	ph := Phase{Name: "failing rollout of " + v, Seconds: time.Since(start).Seconds(), Objects: x.n, Series: smp.stop()}
	out.Seconds = ph.Seconds
	for _, n := range ph.Series[0].Count {
		out.Updated = max(out.Updated, n)
	}
	if allowed == 0 {
		for _, n := range ph.Series[1].Count {
			out.Further = max(out.Further, n)
		}
	} else {
		out.Further = max(0, out.Updated-allowed)
	}
	if err != nil {
		return out, ph, fmt.Errorf("failing revision %s: %w", v, err)
	}
	return out, ph, nil
}
