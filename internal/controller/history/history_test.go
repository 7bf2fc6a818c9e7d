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
