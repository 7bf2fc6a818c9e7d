package notify

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/notify"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A source that flaps: its first change of each reason goes out at once, the repeats within
// the window are held and go out as one digest of the state they came to when it ends.
func TestRepeatsWithinTheWindowGoOutAsOneDigest(t *testing.T) {
	a := &fleet.Alert{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"},
		Spec: fleet.AlertSpec{DigestWindow: &metav1.Duration{Duration: 10 * time.Minute}}}
	f := newFolds()
	j := job{alert: "ns/a", source: "GitRepo/shop#drift"}
	drifted := notify.Event{Source: j.source, Key: "drift/Drifted/1", Reason: notify.Drifted, Folds: true}
	corrected := notify.Event{Source: j.source, Key: "drift/DriftCorrected", Reason: notify.DriftCorrected, Folds: true}
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	step := func(at time.Duration, cur notify.Event, unsent bool) ([]notify.Event, time.Duration) {
		var evs []notify.Event
		if unsent {
			evs = []notify.Event{cur}
		}
		return f.hold(a, j.source, cur, evs, t0.Add(at))
	}
	if out, _ := step(0, drifted, true); len(out) != 1 {
		t.Fatalf("the first drift is held: %v", out)
	}
	f.delivered(j, drifted, t0)
	if out, _ := step(time.Second, drifted, true); len(out) != 1 {
		t.Fatalf("the state just delivered, as a stale Alert shows it, is held as a change: %v", out)
	}
	if out, _ := step(time.Minute, corrected, true); len(out) != 1 || out[0].Key != corrected.Key {
		t.Fatalf("its correction, another reason, is held: %v", out)
	}
	f.delivered(j, corrected, t0.Add(time.Minute))
	out, wake := step(2*time.Minute, drifted, true)
	if len(out) != 0 || wake != 8*time.Minute {
		t.Fatalf("a second drift within the window: %v, look again in %s", out, wake)
	}
	if out, _ := step(3*time.Minute, corrected, false); len(out) != 0 {
		t.Fatalf("its correction within the window: %v", out)
	}
	out, _ = step(10*time.Minute, corrected, false)
	if len(out) != 1 || notify.BaseKey(out[0].Key) != corrected.Key || out[0].Key == corrected.Key ||
		out[0].Summary != "2 changes held back (DriftCorrected 1, Drifted 1); now: " {
		t.Fatalf("the window's end: %+v", out)
	}
	f.delivered(j, out[0], t0.Add(10*time.Minute))
	if out, wake := step(11*time.Minute, drifted, true); len(out) != 0 || wake != 9*time.Minute {
		t.Fatalf("a drift right after the digest: %v, %s", out, wake)
	}
	a.Spec.DigestWindow.Duration = 0
	if out, _ := step(12*time.Minute, drifted, true); len(out) != 1 {
		t.Fatalf("a window of 0 holds: %v", out)
	}
}

// A rollout's transitions are never held, though the status shows one of the same reason sent
// a minute ago.
func TestRolloutEventsAreNeverHeld(t *testing.T) {
	ago := metav1.NewTime(time.Now().Add(-time.Minute))
	a := &fleet.Alert{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"},
		Status: fleet.AlertStatus{Sent: []fleet.AlertSent{{Source: "Bundle/app", Key: "rollout/r1/Started/canary", Reason: notify.Started, At: &ago}}}}
	e := notify.Event{Source: "Bundle/app", Key: "rollout/r1/Started/tenth", Reason: notify.Started}
	if out, _ := newFolds().hold(a, e.Source, e, []notify.Event{e}, time.Now()); len(out) != 1 {
		t.Fatalf("held: %v", out)
	}
	e.Folds = true // as a health event would be: held, from what the status says
	if out, _ := newFolds().hold(a, e.Source, e, []notify.Event{e}, time.Now()); len(out) != 0 {
		t.Fatalf("a repeat after a restart is not held: %v", out)
	}
}
