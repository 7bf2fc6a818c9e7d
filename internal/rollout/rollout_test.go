package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func clusters(names ...string) []target.ClusterInfo {
	var out []target.ClusterInfo
	for _, n := range names {
		out = append(out, target.ClusterInfo{Cluster: &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "fleet-default",
			Labels: map[string]string{"name": n}}}})
	}
	return out
}

// threeStages: one canary, then one, then the rest (approval before the last).
func threeStages() *fleet.RolloutPolicySpec {
	soak := &metav1.Duration{Duration: time.Minute}
	return &fleet.RolloutPolicySpec{
		Stages: []fleet.RolloutStage{
			{Name: "canary", ClusterName: "a", Soak: soak},
			{Name: "second", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "b"}}, Soak: soak},
			{Name: "rest", RequireApproval: true},
		},
		Gates: []fleet.HealthGate{{Name: "web", HTTPGet: &fleet.HTTPGate{URL: "http://web.demo.svc/"}}},
	}
}

// deployed is a BundleDeployment on revision rev, promoted at promoted; ready and gate say how
// it stands.
func deployed(rev string, promoted time.Time, ready bool, gate corev1.ConditionStatus) *fleet.BundleDeployment {
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		fleet.RolloutRevisionAnnotation: rev, fleet.RolloutPromotedAnnotation: promoted.Format(time.RFC3339)}}}
	bd.Spec.DeploymentID = "c:" + rev
	bd.Status.AppliedDeploymentID = bd.Spec.DeploymentID
	readyStatus := corev1.ConditionFalse
	if ready {
		readyStatus = corev1.ConditionTrue
	}
	fleet.SetCondition(&bd.Status.Conditions, fleet.ConditionReady, readyStatus, "", "", promoted)
	if gate != "" {
		fleet.SetCondition(&bd.Status.Conditions, fleet.GateCondition("web"), gate, "", "status 500", promoted)
	}
	return bd
}

func decisions(r Result) string {
	var b strings.Builder
	for _, d := range r.Decisions {
		b.WriteString([]string{"H", "P", "R"}[d])
	}
	return b.String()
}

func TestStagesInOrderWithSoakAndApproval(t *testing.T) {
	in := Input{PolicyName: "p", Policy: threeStages(), Revision: "r2", Targets: clusters("a", "b", "c", "d"),
		BDs: make([]*fleet.BundleDeployment, 4), Now: t0, Status: fleet.RolloutStatus{Revision: "r1", Phase: fleet.RolloutComplete}}
	r := Evaluate(in)
	if got := decisions(r); got != "PHHH" || r.Status.Stage != "canary" || r.Status.PassedRevision != "r1" {
		t.Fatalf("start: %s stage %q passed %q", got, r.Status.Stage, r.Status.PassedRevision)
	}
	if !r.Gated[0] || r.Gated[1] {
		t.Fatalf("gates go to the stage in progress only: %v", r.Gated)
	}
	// The canary passes: the soak starts, nothing else moves until it is over.
	in.Status, in.BDs[0], in.Now = r.Status, deployed("r2", t0, true, corev1.ConditionTrue), t0.Add(10*time.Second)
	r = Evaluate(in)
	if got := decisions(r); got != "PHHH" || r.Status.Phase != fleet.RolloutSoaking || r.Requeue != time.Minute {
		t.Fatalf("soak: %s %s requeue %s", got, r.Status.Phase, r.Requeue)
	}
	in.Status, in.Now = r.Status, t0.Add(71*time.Second)
	r = Evaluate(in)
	if got := decisions(r); got != "PPHH" || r.Status.Stage != "second" {
		t.Fatalf("after the soak: %s stage %s", got, r.Status.Stage)
	}
	in.Status, in.BDs[1], in.Now = r.Status, deployed("r2", in.Now, true, corev1.ConditionTrue), in.Now.Add(time.Second)
	r = Evaluate(in)
	in.Status, in.Now = r.Status, in.Now.Add(2*time.Minute)
	r = Evaluate(in)
	if got := decisions(r); got != "PPHH" || r.Status.Phase != fleet.RolloutWaitingForApproval {
		t.Fatalf("approval: %s %s", got, r.Status.Phase)
	}
	in.Status, in.Spec.Approved = r.Status, []string{"r2/rest"}
	r = Evaluate(in)
	if got := decisions(r); got != "PPPP" {
		t.Fatalf("approved: %s", got)
	}
	in.Status, in.BDs[2], in.BDs[3] = r.Status, deployed("r2", in.Now, true, corev1.ConditionTrue), deployed("r2", in.Now, true, corev1.ConditionTrue)
	r = Evaluate(in)
	if r.Status.Phase != fleet.RolloutComplete || decisions(r) != "PPPP" || r.Gated[3] {
		t.Fatalf("complete: %s %s gated %v", r.Status.Phase, decisions(r), r.Gated)
	}
	// The next revision counts this one as passed.
	in.Status, in.Revision = r.Status, "r3"
	if r = Evaluate(in); r.Status.PassedRevision != "r2" || decisions(r) != "PHHH" {
		t.Fatalf("next revision: passed %q, %s", r.Status.PassedRevision, decisions(r))
	}
}

func TestAFailingGateHaltsAndRollsBack(t *testing.T) {
	in := Input{PolicyName: "p", Policy: threeStages(), Revision: "r2", Targets: clusters("a", "b", "c"), Now: t0,
		BDs: []*fleet.BundleDeployment{deployed("r2", t0, true, corev1.ConditionFalse), nil, nil}}
	r := Evaluate(in)
	if !r.Halted || r.Status.Phase != fleet.RolloutRolledBack || decisions(r) != "RHH" {
		t.Fatalf("halt: %v %s %s", r.Halted, r.Status.Phase, decisions(r))
	}
	if f := r.Status.Failures; len(f) != 1 || f[0].Cluster != "a" || f[0].Gate != "web" || f[0].Reason != "status 500" {
		t.Fatalf("failures: %+v", f)
	}
	if !strings.Contains(r.Status.Message, "cluster a failed gate web: status 500") {
		t.Fatalf("message: %s", r.Status.Message)
	}
	// Sticky: once back, nothing is promoted again for this revision.
	in.Status, in.BDs[0] = r.Status, deployed("r1", t0, true, corev1.ConditionTrue)
	if r = Evaluate(in); decisions(r) != "HHH" || r.Halted {
		t.Fatalf("after the rollback: %s", decisions(r))
	}
	// A retry starts again from the first stage.
	in.Status, in.Spec.Retry = r.Status, 1
	if r = Evaluate(in); decisions(r) != "PHH" || r.Status.Phase != fleet.RolloutProgressing {
		t.Fatalf("retry: %s %s", decisions(r), r.Status.Phase)
	}
	// With onFailure Pause all stays where it is.
	in.Status, in.Spec, in.BDs[0] = fleet.RolloutStatus{}, fleet.RolloutSpec{}, deployed("r2", t0, true, corev1.ConditionFalse)
	in.Policy.OnFailure = fleet.OnFailurePause
	if r = Evaluate(in); decisions(r) != "HHH" || r.Status.Phase != fleet.RolloutHalted {
		t.Fatalf("pause: %s %s", decisions(r), r.Status.Phase)
	}
}

func TestNeverReadyFailsAtTheDeadline(t *testing.T) {
	in := Input{PolicyName: "p", Policy: threeStages(), Revision: "r2", Targets: clusters("a", "b"), Now: t0.Add(9 * time.Minute),
		BDs: []*fleet.BundleDeployment{deployed("r2", t0, false, ""), nil}}
	r := Evaluate(in)
	if r.Halted || decisions(r) != "PH" || r.Requeue != time.Minute+time.Second {
		t.Fatalf("before the deadline: %v %s %s", r.Halted, decisions(r), r.Requeue)
	}
	in.Now = t0.Add(10 * time.Minute)
	if r = Evaluate(in); !r.Halted || r.Status.Failures[0].Gate != GateReady {
		t.Fatalf("at the deadline: %v %+v", r.Halted, r.Status.Failures)
	}
}

func TestStoppingDuringTheSoakFails(t *testing.T) {
	in := Input{PolicyName: "p", Policy: threeStages(), Revision: "r2", Targets: clusters("a", "b"), Now: t0,
		BDs: []*fleet.BundleDeployment{deployed("r2", t0, true, corev1.ConditionTrue), nil}}
	r := Evaluate(in)
	in.Status, in.BDs[0], in.Now = r.Status, deployed("r2", t0, false, corev1.ConditionTrue), t0.Add(30*time.Second)
	if r = Evaluate(in); !r.Halted || !strings.Contains(r.Status.Failures[0].Reason, "during the soak") {
		t.Fatalf("%v %+v", r.Halted, r.Status.Failures)
	}
}

func TestMaxConcurrencyAndPercent(t *testing.T) {
	pct := int32(50)
	two := fleet.RolloutStage{Name: "half", Percent: &pct}
	two.MaxConcurrency = ptrIntStr(2)
	p := &fleet.RolloutPolicySpec{Stages: []fleet.RolloutStage{two, {Name: "rest"}}}
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("c%02d", i)
	}
	r := Evaluate(Input{PolicyName: "p", Policy: p, Revision: "r", Targets: clusters(names...), BDs: make([]*fleet.BundleDeployment, 10), Now: t0})
	if got := decisions(r); got != "PPHHHHHHHH" {
		t.Fatalf("%s", got)
	}
	if s := r.Status.Stages; len(s) != 2 || s[0].Clusters != 5 || s[1].Clusters != 5 {
		t.Fatalf("%+v", s)
	}
}

func TestRefusedPolicies(t *testing.T) {
	zero := &metav1.Duration{}
	cases := map[string]*fleet.RolloutPolicySpec{
		"stages[1] (b) selects cluster a, which stages[0] (a) selects too": {Stages: []fleet.RolloutStage{
			{Name: "a", ClusterName: "a"}, {Name: "b", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": "a"}}}}},
		"stages[1].requireApproval":  {Stages: []fleet.RolloutStage{{Name: "a", ClusterName: "a", Soak: zero}, {Name: "b", RequireApproval: true}}},
		"stages: none selects any":   {Stages: []fleet.RolloutStage{{Name: "a", ClusterName: "nope"}}},
		"gates[0]: web: exactly one": {Stages: []fleet.RolloutStage{{Name: "a"}}, Gates: []fleet.HealthGate{{Name: "web"}}},
		"gates[0]: interval: 1ms is not within 1s-10m0s": {Stages: []fleet.RolloutStage{{Name: "a"}},
			Gates: []fleet.HealthGate{{Name: "web", HTTPGet: &fleet.HTTPGate{URL: "http://web/"}, Interval: &metav1.Duration{Duration: time.Millisecond}}}},
		"gates[0]: httpGet.timeout: 1h0m0s is not within 0-30s": {Stages: []fleet.RolloutStage{{Name: "a"}},
			Gates: []fleet.HealthGate{{Name: "web", HTTPGet: &fleet.HTTPGate{URL: "http://web/", Timeout: &metav1.Duration{Duration: time.Hour}}}}},
		"gates[0]: failureThreshold: 1000 is not within 0-100": {Stages: []fleet.RolloutStage{{Name: "a"}},
			Gates: []fleet.HealthGate{{Name: "web", HTTPGet: &fleet.HTTPGate{URL: "http://web/"}, FailureThreshold: 1000}}},
		"gates: 17 gates, at most 16": {Stages: []fleet.RolloutStage{{Name: "a"}}, Gates: manyGates(17)},
		"prometheus.op":               {Stages: []fleet.RolloutStage{{Name: "a"}}, Gates: []fleet.HealthGate{{Name: "p", Prometheus: &fleet.PrometheusGate{URL: "http://p:9090", Query: "up", Op: "~", Threshold: "1"}}}},
	}
	for want, p := range cases {
		prev := deployed("r1", t0, true, corev1.ConditionTrue)
		r := Evaluate(Input{PolicyName: "p", Policy: p, Revision: "r2", Targets: clusters("a", "b"), BDs: []*fleet.BundleDeployment{prev, nil}, Now: t0})
		if r.Status.Phase != fleet.RolloutInvalid || !strings.Contains(r.Status.Message, want) || decisions(r) != "HH" {
			t.Errorf("%s: %s %q %s", want, r.Status.Phase, r.Status.Message, decisions(r))
		}
	}
	if r := Evaluate(Input{PolicyName: "gone", Revision: "r", Targets: clusters("a"), BDs: make([]*fleet.BundleDeployment, 1)}); r.Status.Phase != fleet.RolloutInvalid || decisions(r) != "H" {
		t.Errorf("missing policy: %+v", r.Status)
	}
}

func manyGates(n int) []fleet.HealthGate {
	var gs []fleet.HealthGate
	for i := range n {
		gs = append(gs, fleet.HealthGate{Name: fmt.Sprintf("g%d", i), HTTPGet: &fleet.HTTPGate{URL: "http://web/"}})
	}
	return gs
}

func ptrIntStr(n int) *intstr.IntOrString {
	v := intstr.FromInt(n)
	return &v
}

func TestAHeldClusterDoesNotFail(t *testing.T) {
	bd := deployed("r2", t0, false, "")
	bd.Spec.Paused = true
	r := Evaluate(Input{PolicyName: "p", Policy: threeStages(), Revision: "r2", Targets: clusters("a", "b"), Now: t0.Add(time.Hour),
		BDs: []*fleet.BundleDeployment{bd, nil}})
	if r.Halted || decisions(r) != "PH" || r.Status.Phase != fleet.RolloutProgressing {
		t.Fatalf("%v %s %s", r.Halted, decisions(r), r.Status.Phase)
	}
}

// The status keeps what the revision rolling out deploys; once it completes and another
// follows, that becomes what a rollback returns to. A revision that did not complete is never
// the one returned to.
func TestTheRevisionThatPassedIsKept(t *testing.T) {
	rev := func(r string) *fleet.RolloutRevision {
		return &fleet.RolloutRevision{Revision: r, Content: "s-" + r, Options: fleet.BundleDeploymentOptions{DefaultNamespace: r}}
	}
	p := &fleet.RolloutPolicySpec{Stages: []fleet.RolloutStage{{Name: "all"}}}
	in := Input{PolicyName: "p", Policy: p, Revision: "r1", Current: rev("r1"), Targets: clusters("a"), BDs: make([]*fleet.BundleDeployment, 1), Now: t0}
	r := Evaluate(in)
	if r.Status.Current.Revision != "r1" || r.Status.Passed != nil {
		t.Fatalf("first: current %+v passed %+v", r.Status.Current, r.Status.Passed)
	}
	in.Status, in.BDs[0] = r.Status, deployed("r1", t0, true, "")
	if r = Evaluate(in); r.Status.Phase != fleet.RolloutComplete {
		t.Fatalf("r1: %s", r.Status.Phase)
	}
	in.Status, in.Revision, in.Current = r.Status, "r2", rev("r2")
	r = Evaluate(in)
	if r.Status.Current.Revision != "r2" || r.Status.Passed == nil || r.Status.Passed.Options.DefaultNamespace != "r1" || r.Status.PassedRevision != "r1" {
		t.Fatalf("r2: current %+v passed %+v", r.Status.Current, r.Status.Passed)
	}
	// r2 never completes; r3 still returns to r1.
	in.Status, in.Revision, in.Current = r.Status, "r3", rev("r3")
	if r = Evaluate(in); r.Status.Passed.Revision != "r1" || r.Status.Current.Revision != "r3" {
		t.Fatalf("r3: current %+v passed %+v", r.Status.Current, r.Status.Passed)
	}
}

// A user's staged rollback of some clusters (Hold) rolls out as any revision, but once complete
// it does not become the revision that passed: the next revision's rollback returns to what the
// whole Bundle passed before it.
func TestAStagedHoldDoesNotBecomeTheRevisionThatPassed(t *testing.T) {
	pol := &fleet.RolloutPolicySpec{Stages: []fleet.RolloutStage{{Name: "all"}}}
	x := &fleet.RolloutRevision{Revision: "x", Content: "cx"}
	st := fleet.RolloutStatus{Policy: "p", Revision: "x", Phase: fleet.RolloutComplete, Current: x}
	in := Input{PolicyName: "p", Policy: pol, Status: st, Revision: "r", Current: &fleet.RolloutRevision{Revision: "r", Content: "cr"},
		Targets: clusters("a"), BDs: []*fleet.BundleDeployment{deployed("r", t0, true, "")}, Now: t0.Add(time.Minute), Hold: true}
	res := Evaluate(in)
	if res.Status.Phase != fleet.RolloutComplete || res.Status.PassedRevision != "x" || !res.Status.Hold {
		t.Fatalf("the staged hold: %s, passed %q, hold %v; want Complete, x, true", res.Status.Phase, res.Status.PassedRevision, res.Status.Hold)
	}
	next := Evaluate(Input{PolicyName: "p", Policy: pol, Status: res.Status, Revision: "y", Current: &fleet.RolloutRevision{Revision: "y"},
		Targets: clusters("a"), BDs: []*fleet.BundleDeployment{deployed("r", t0, true, "")}, Now: t0.Add(2 * time.Minute)})
	if next.Status.PassedRevision != "x" || next.Status.Passed == nil || next.Status.Passed.Content != "cx" || next.Status.Hold {
		t.Errorf("the next revision: passed %q (%+v), hold %v; want x's, false", next.Status.PassedRevision, next.Status.Passed, next.Status.Hold)
	}
}
