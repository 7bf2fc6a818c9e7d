package history

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/fleetgo/fleet/internal/history"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func deploymentAt(cluster, revision string) *fleet.BundleDeployment {
	return &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-" + cluster, Name: "app",
		Labels: map[string]string{fleet.BundleNamespaceLabel: "ns", fleet.BundleLabel: "app",
			fleet.ClusterNamespaceLabel: "ns", fleet.ClusterLabel: cluster, fleet.CommitLabel: "c" + revision},
		Annotations: map[string]string{fleet.RevisionAnnotation: "r" + revision}}}
}

// A snapshot taken when a deployment moves a second time holds what every deployment of the
// Bundle ran as the events delivered so far say, each since its own move: a deployment whose
// next move is not delivered yet is at its last revision in it.
func TestASnapshotHoldsWhatTheEventsSaid(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	r := &recorder{Deps: Deps{Now: func() time.Time { return now }}, current: map[string]map[string]lastSeen{},
		bundleOf: map[string]string{}, moved: map[string]map[string]time.Time{}, snapshots: map[string][]snapshot{},
		captured: map[string]map[string]*fleet.RolloutRevision{},
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	defer r.queue.ShutDown()
	for _, c := range []string{"a", "b"} {
		r.deploymentChanged("cluster-"+c+"/app", deploymentAt(c, "1"))
	}
	firstMove := now
	now = now.Add(4 * time.Second)
	r.deploymentChanged("cluster-b/app", deploymentAt("b", "2"))
	taken := r.takeSnapshots("ns/app")
	if len(taken.snapshots) != 1 {
		t.Fatalf("snapshots: %d, want 1", len(taken.snapshots))
	}
	got := map[string]history.Seen{}
	for _, s := range taken.snapshots[0].seen {
		got[s.Cluster] = s
	}
	for _, c := range []string{"a", "b"} {
		if got[c].Revision != "r1" || !got[c].Since.Equal(firstMove) {
			t.Errorf("cluster %s in the snapshot: %+v, want r1 since %s", c, got[c], firstMove)
		}
	}
	now = now.Add(time.Second)
	r.deploymentChanged("cluster-a/app", deploymentAt("a", "2"))
	taken = r.takeSnapshots("ns/app")
	if len(taken.snapshots) != 0 || len(taken.seen) != 2 {
		t.Fatalf("after the pass: %d snapshots, %d seen; want 0 and 2", len(taken.snapshots), len(taken.seen))
	}
	for _, s := range taken.seen {
		if s.Revision != "r2" {
			t.Errorf("cluster %s now: %s, want r2", s.Cluster, s.Revision)
		}
	}
	r.deploymentChanged("cluster-a/app", nil)
	if taken = r.takeSnapshots("ns/app"); len(taken.seen) != 1 || taken.seen[0].Cluster != "b" {
		t.Errorf("after cluster a's deployment is deleted: %+v, want b alone", taken.seen)
	}
}

// A cluster that moves in the same second as the pass that records the move ran its old
// revision until the move: asked for that second, the record names the old one (it named the
// new one when the pass's time was truncated, as the e2e history spec once saw).
func TestAMoveInThePassSecondIsRecordedAfterIt(t *testing.T) {
	base := time.Date(2026, 12, 4, 6, 34, 40, 0, time.UTC)
	rec := &history.Record{}
	if err := rec.Observe([]history.Seen{{Cluster: "prod", Revision: "r2", Commit: "c2", Since: base}}, passTime(base)); err != nil {
		t.Fatal(err)
	}
	moved := base.Add(6*time.Second + 300*time.Millisecond) // 06:34:46.3
	pass := moved.Add(500 * time.Millisecond)               // 06:34:46.8, the same second
	if err := rec.Observe([]history.Seen{{Cluster: "prod", Revision: "r3", Commit: "c3", Since: moved}}, passTime(pass)); err != nil {
		t.Fatal(err)
	}
	at := base.Add(6 * time.Second) // 06:34:46
	if ran, ok := rec.At("prod", at); !ok || ran.Revision != "r2" {
		t.Errorf("at %s the record says %+v (%v), want r2", at, ran, ok)
	}
	if ran, ok := rec.At("prod", at.Add(time.Second)); !ok || ran.Revision != "r3" {
		t.Errorf("at %s the record says %+v (%v), want r3", at.Add(time.Second), ran, ok)
	}
	if got := passTime(at); !got.Equal(at) {
		t.Errorf("a whole second is its own pass time: %s, want %s", got, at)
	}
}
