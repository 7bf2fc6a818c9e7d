package bundle

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetgo/fleet/internal/rollout"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// The pass's decider counts as targets only clusters with a namespace, asks Fleet's partitions
// when the Bundle names no policy, holds what the strategy holds (the new options staged), and
// leaves no mark of a policy the Bundle no longer names.
func TestDeciderWithoutAPolicy(t *testing.T) {
	var plan []planned
	existing := map[string]*fleet.BundleDeployment{}
	for i := range 4 {
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i), Namespace: "fleet-default"}}
		p := planned{cluster: c, info: target.ClusterInfo{Cluster: c}}
		if i < 3 {
			p.namespace = "ns-" + c.Name
			bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: p.namespace,
				Labels:      map[string]string{fleet.ContentNameLabel: "s-old", fleet.RolloutPreviousContentLabel: "s-older"},
				Annotations: map[string]string{fleet.RolloutRevisionAnnotation: "r1", fleet.RolloutGatesAnnotation: "[]"}}}
			bd.Spec.DeploymentID, bd.Status.AppliedDeploymentID, bd.Status.Ready = "s-old:1", "s-old:1", true
			existing[p.namespace] = bd
		}
		plan = append(plan, p)
	}
	one := intstr.FromInt32(1)
	b := &fleet.Bundle{Spec: fleet.BundleSpec{RolloutStrategy: &fleet.RolloutStrategy{MaxUnavailable: &one}}}
	d, err := (&handler{}).newDecider(b, plan, existing, "s-new")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(d.order()); got != "[0 1 2]" || d.progressive != nil || d.partitions.MaxUnavailable != 1 {
		t.Fatalf("order %s, progressive %v, maxUnavailable %d", got, d.progressive, d.partitions.MaxUnavailable)
	}
	var ids []string
	for _, i := range d.order() {
		desired := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleet.ContentNameLabel: "s-new"}}}
		desired.Spec.DeploymentID, desired.Spec.StagedDeploymentID = "s-new:2", "s-new:2"
		next := d.next(i, desired, existing[plan[i].namespace])
		ids = append(ids, next.Spec.DeploymentID+"/"+next.Spec.StagedDeploymentID+"/"+next.Labels[fleet.ContentNameLabel])
		revision := next.Annotations[fleet.RevisionAnnotation]
		delete(next.Annotations, fleet.RevisionAnnotation)
		if len(next.Annotations) != 0 || next.Labels[fleet.RolloutPreviousContentLabel] != "" {
			t.Errorf("target %d keeps a policy's marks: %v %v", i, next.Annotations, next.Labels)
		}
		if want := map[bool]string{true: rollout.Revision(b, "s-new")}[i == 0]; revision != want {
			t.Errorf("target %d is stamped with revision %q, want %q (the promoted one the Bundle's, the held ones none)", i, revision, want)
		}
	}
	// maxUnavailable 1: one cluster takes the new options, the others hold theirs with the new
	// ones staged, and keep the Content they run.
	if got := fmt.Sprint(ids); got != "[s-new:2/s-new:2/s-new s-old:1/s-new:2/s-old s-old:1/s-new:2/s-old]" {
		t.Fatalf("%s", got)
	}
}

// A deleted Bundle's Rollout status waiting to be written is dropped: nothing writes a Rollout
// for an owner that is gone (its create would fail on every retry).
func TestRolloutOfADeletedBundleIsNotWritten(t *testing.T) {
	w := &rolloutWriter{wanted: map[string]*wantedRollout{}}
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}}
	w.wanted["ns/b"] = &wantedRollout{bundle: b, status: fleet.RolloutStatus{Stage: "canary"}}
	if _, ok := w.status(b); !ok {
		t.Fatal("the wanted status is not read back")
	}
	w.forget(b)
	if _, ok := w.status(b); ok {
		t.Error("a deleted Bundle's Rollout is still to be written")
	}
	if roll, err := w.sync("ns/b", nil); err != nil || roll != nil {
		t.Errorf("sync of a forgotten Rollout: %v, %v", roll, err)
	}
}

// statusWriter is a Rollout client that takes status writes, each a new resourceVersion.
type statusWriter struct {
	fleetcontrollers.RolloutController
	writes int
}

func (s *statusWriter) UpdateStatus(r *fleet.Rollout) (*fleet.Rollout, error) {
	s.writes++
	r = r.DeepCopy()
	r.ResourceVersion = fmt.Sprint(100 + s.writes)
	return r, nil
}

func (s *statusWriter) Enqueue(string, string) {}

// A written Rollout status stays what the bundle passes decide from until the cache shows it:
// a pass reading the cache's older one in between would start the revision's rollout again.
func TestAWrittenRolloutStatusIsReadUntilTheCacheShowsIt(t *testing.T) {
	c := &statusWriter{}
	w := &rolloutWriter{wanted: map[string]*wantedRollout{}, rollouts: c}
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}}
	cached := &fleet.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", ResourceVersion: "100", Labels: rolloutLabels(b)},
		Status: fleet.RolloutStatus{Revision: "r1", Phase: fleet.RolloutComplete}}
	w.publish(b, cached, fleet.RolloutStatus{Revision: "r2", Phase: fleet.RolloutRolledBack})
	if _, err := w.sync("ns/b", cached); err != nil || c.writes != 1 {
		t.Fatalf("the status is written once: %d writes, %v", c.writes, err)
	}
	if st, ok := w.status(b); !ok || st.Phase != fleet.RolloutRolledBack {
		t.Fatalf("before the cache shows the write, the passes read: %+v, %v", st, ok)
	}
	if _, err := w.sync("ns/b", cached); err != nil || c.writes != 1 {
		t.Fatalf("an older copy in the cache brings no write again: %d writes, %v", c.writes, err)
	}
	if _, ok := w.status(b); !ok {
		t.Fatal("dropped while the cache shows an older copy")
	}
	shown := cached.DeepCopy()
	shown.ResourceVersion, shown.Status = "101", fleet.RolloutStatus{Revision: "r2", Phase: fleet.RolloutRolledBack}
	if _, err := w.sync("ns/b", shown); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.status(b); ok {
		t.Fatal("kept once the cache shows it")
	}
}
