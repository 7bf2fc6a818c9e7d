package historyapi

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetgo/fleet/internal/history"
	"github.com/fleetgo/fleet/internal/history/historytest"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var t0 = historytest.T0

func fixture(t *testing.T) []Bundle {
	return []Bundle{{Name: "repo-app", Record: historytest.Record(t)}}
}

func TestARollbackToATimeHoldsEachClusterAtWhatItRanThen(t *testing.T) {
	b := fixture(t)
	rb := Rollback{To: t0.Add(11 * time.Minute).Format(time.RFC3339), At: t0.Add(time.Hour), Reason: "why"}
	holds, err := rb.holds(b[0], "ns", []string{"ns/dev", "ns/prod"}, "r3", b)
	if err != nil || len(holds) != 2 {
		t.Fatalf("holds: %+v %v", holds, err)
	}
	got := map[string][]string{}
	for _, h := range holds {
		if h.Over != "r3" || h.Reason != "why" || !h.Since.Time.Equal(t0.Add(time.Hour)) {
			t.Fatalf("hold: %+v", h)
		}
		got[h.Revision] = h.Clusters
	}
	if !slices.Equal(got["r2"], []string{"ns/dev"}) || !slices.Equal(got["r1"], []string{"ns/prod"}) {
		t.Fatalf("by revision: %v", got)
	}
	rb.To = t0.Add(-time.Hour).Format(time.RFC3339)
	if _, err := rb.holds(b[0], "ns", []string{"ns/dev"}, "r3", b); err == nil || !strings.Contains(err.Error(), "none of the chosen clusters ran the Bundle then") {
		t.Fatalf("a time before the record: %v", err)
	}
}

func TestACommitNamesTheBundlesRevisionThenEvenWhereItDidNotChangeIt(t *testing.T) {
	b := fixture(t)
	if rev, err := revisionNamed(b[0], "bbbb", b); err != nil || rev != "r2" {
		t.Fatalf("its own commit: %s %v", rev, err)
	}
	// Another bundle of the repository that commit cccc changed, at +20m: repo-app was then at r2.
	other := &history.Record{}
	if err := other.Observe([]history.Seen{{Cluster: "dev", Revision: "x1", Commit: "cccc"}}, t0.Add(20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	all := append(b, Bundle{Name: "repo-db", Record: other})
	if rev, err := revisionNamed(b[0], "cccc", all); err != nil || rev != "r2" {
		t.Fatalf("a commit of another bundle: %s %v", rev, err)
	}
	if _, err := revisionNamed(b[0], "dddd", all); err == nil || !strings.Contains(err.Error(), "no revision or commit of that name") {
		t.Fatalf("an unknown commit: %v", err)
	}
}

func TestReleaseTakesOnlyTheChosenClustersOutOfTheirHolds(t *testing.T) {
	holds := []fleet.RevisionHold{{Revision: "r1", Clusters: []string{"ns/a", "ns/b"}, Over: "r3"}, {Revision: "r2", Clusters: []string{"ns/c"}, Over: "r3"},
		{Revision: "r1", Clusters: []string{"ns/d"}, Over: "r2"}}
	left := inForce(slices.Clone(holds), "r3")
	if len(left) != 2 {
		t.Fatalf("in force: %+v", left)
	}
	left, released := release(left, []string{"ns/b", "ns/c", "ns/z"})
	if !slices.Equal(released, []string{"ns/b", "ns/c"}) || len(left) != 1 || !slices.Equal(left[0].Clusters, []string{"ns/a"}) {
		t.Fatalf("left %+v, released %v", left, released)
	}
}
