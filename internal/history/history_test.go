package history

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

func observe(t *testing.T, r *Record, now time.Time, seen ...Seen) {
	t.Helper()
	if err := r.Observe(seen, now); err != nil {
		t.Fatal(err)
	}
}

func ready(cluster, rev string) Seen {
	return Seen{Cluster: cluster, Revision: rev, Commit: "c-" + rev, Applied: true, Ready: true}
}

func ranAt(t *testing.T, r *Record, cluster string, when time.Time) string {
	t.Helper()
	got, ok := r.At(cluster, when)
	if !ok {
		return ""
	}
	return got.Revision
}

// Three revisions reach three clusters with different targeting: what each ran at any time is
// what the passes saw, and clusters moving together share one span.
func TestWhatRanWhereAndWhen(t *testing.T) {
	r := &Record{}
	observe(t, r, at(0), Seen{Cluster: "dev", Revision: "r1"}, Seen{Cluster: "prod", Revision: "r1"})
	observe(t, r, at(1), ready("dev", "r1"), ready("prod", "r1"))
	observe(t, r, at(10), Seen{Cluster: "dev", Revision: "r2"}, ready("prod", "r1"), Seen{Cluster: "edge", Revision: "r2"})
	observe(t, r, at(11), ready("dev", "r2"), ready("prod", "r1"), ready("edge", "r2"))
	observe(t, r, at(20), ready("dev", "r3"), ready("prod", "r3"))

	for _, c := range []struct {
		cluster string
		min     int
		want    string
	}{{"dev", -1, ""}, {"dev", 0, "r1"}, {"dev", 9, "r1"}, {"dev", 10, "r2"}, {"dev", 25, "r3"},
		{"prod", 15, "r1"}, {"prod", 20, "r3"}, {"edge", 5, ""}, {"edge", 15, "r2"}, {"edge", 20, ""}, {"nowhere", 15, ""}} {
		if got := ranAt(t, r, c.cluster, at(c.min)); got != c.want {
			t.Errorf("%s at +%dm: %q, want %q", c.cluster, c.min, got, c.want)
		}
	}
	r1 := r.Revisions[0]
	if r1.Revision != "r1" || len(r1.Spans) != 2 {
		t.Fatalf("r1: %+v", r1)
	}
	if got, _ := r.At("edge", at(19)); got.Applied == nil || !got.Applied.Time.Equal(at(11)) || !got.Until.Time.Equal(at(20)) {
		t.Errorf("edge's r2 span: %+v", got)
	}
	if got := r.Of("edge"); len(got) != 1 || got[0].Ended != Removed || !got[0].Until.Time.Equal(at(20)) {
		t.Errorf("edge, no longer targeted by r3: %+v", got)
	}
	if got, _ := r.At("prod", at(5)); got.Clusters != "1" || got.Ended != Replaced || !got.Ready.Time.Equal(at(1)) || !got.Until.Time.Equal(at(20)) {
		t.Errorf("prod's r1 span, which dev left at +10m: %+v", got)
	}
	if got, _ := r.ClustersOf("r2"); !reflect.DeepEqual(got, []string{"dev", "edge"}) {
		t.Errorf("clusters of r2: %v", got)
	}
}

// A rollout that moves half the clusters splits the span of the revision they leave; a
// cluster returned to an earlier revision ends its span as rolled back.
func TestPartialRolloutAndRollback(t *testing.T) {
	r := &Record{}
	var all []Seen
	for i := range 10 {
		all = append(all, ready(fmt.Sprintf("c%d", i), "r1"))
	}
	observe(t, r, at(0), all...)
	half := append([]Seen{}, all...)
	for i := range 5 {
		half[i] = ready(half[i].Cluster, "r2")
	}
	observe(t, r, at(5), half...)
	if got := r.Revisions[0].Spans; len(got) != 2 || got[0].Clusters != "5-9" || got[1].Clusters != "0-4" || got[1].Ended != Replaced {
		t.Fatalf("r1's spans after half moved: %+v", got)
	}
	observe(t, r, at(8), all...)
	if got := r.Of("c0"); len(got) != 3 || got[1].Revision != "r2" || got[1].Ended != RolledBack || got[2].Revision != "r1" || got[2].Until != nil {
		t.Fatalf("c0 rolled back: %+v", got)
	}
	if ranAt(t, r, "c7", at(6)) != "r1" || ranAt(t, r, "c3", at(6)) != "r2" || ranAt(t, r, "c3", at(9)) != "r1" {
		t.Fatal("what ran during and after the rollback")
	}
}

// Clusters that have not all applied leave the span's applied time open.
func TestAppliedOnlyOnceAllHave(t *testing.T) {
	r := &Record{}
	observe(t, r, at(0), Seen{Cluster: "a", Revision: "r1"}, Seen{Cluster: "b", Revision: "r1"})
	observe(t, r, at(1), Seen{Cluster: "a", Revision: "r1", Applied: true}, Seen{Cluster: "b", Revision: "r1"})
	if s := r.Revisions[0].Spans[0]; s.Applied != nil {
		t.Fatalf("applied while b has not: %+v", s)
	}
	observe(t, r, at(2), Seen{Cluster: "a", Revision: "r1", Applied: true}, Seen{Cluster: "b", Revision: "r1", Applied: true})
	observe(t, r, at(3), ready("a", "r1"), ready("b", "r1"))
	if s := r.Revisions[0].Spans[0]; !s.Applied.Time.Equal(at(2)) || !s.Ready.Time.Equal(at(3)) {
		t.Fatalf("applied and ready: %+v", s)
	}
}

// A record survives being stored and read back (the manager restarts between passes).
func TestARecordReadBackGoesOn(t *testing.T) {
	r := &Record{}
	observe(t, r, at(0), ready("a", "r1"), ready("b", "r1"))
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	observe(t, &back, at(5), ready("a", "r2"), ready("b", "r1"), ready("c", "r2"))
	if back.Clusters[2] != "c" || ranAt(t, &back, "a", at(6)) != "r2" || ranAt(t, &back, "b", at(6)) != "r1" || ranAt(t, &back, "a", at(4)) != "r1" {
		t.Fatalf("after reading back: %+v", back)
	}
}

func TestPruneKeepsWhatRuns(t *testing.T) {
	r := &Record{}
	for i, rev := range []string{"r1", "r2", "r3", "r4"} {
		observe(t, r, at(i*60), ready("a", rev))
	}
	observe(t, r, at(300), ready("a", "r4"))
	if got := r.Prune(at(300), 150*time.Minute, 0); !reflect.DeepEqual(got, []string{"r1", "r2"}) {
		t.Fatalf("pruned by age: %v", got)
	}
	if got := r.Prune(at(300), 0, 0); got != nil {
		t.Fatalf("no bound, nothing pruned: %v", got)
	}
	observe(t, r, at(301), ready("a", "r5"))
	if got := r.Prune(at(301), 0, 1); !reflect.DeepEqual(got, []string{"r3"}) || len(r.Revisions) != 2 {
		t.Fatalf("pruned by count: %v, kept %d", got, len(r.Revisions))
	}
	if got := r.Prune(at(10000), time.Minute, 0); !reflect.DeepEqual(got, []string{"r4"}) || r.Revisions[0].Revision != "r5" {
		t.Fatalf("the running revision stays: %v", got)
	}
}

func TestRanges(t *testing.T) {
	run := make([]int, 100)
	for i := range run {
		run[i] = 100 - i
	}
	if got := rangesOf(run); got != "1-100" {
		t.Fatalf("rangesOf a run: %q", got)
	}
	if idx, _ := rangesOf([]int{7, 0, 1, 2, 5, 8, 9}).Indexes(10); !reflect.DeepEqual(idx, []int{0, 1, 2, 5, 7, 8, 9}) {
		t.Fatalf("a few clusters read back: %v", idx)
	}
	idx, err := Ranges("0-2,5,7-9").Indexes(10)
	if err != nil || !reflect.DeepEqual(idx, []int{0, 1, 2, 5, 7, 8, 9}) {
		t.Fatalf("Indexes: %v %v", idx, err)
	}
	for _, bad := range []Ranges{"x", "3-1", "5,2", "1-", "-1"} {
		if _, err := bad.Indexes(10); err == nil {
			t.Errorf("%q read as ranges", bad)
		}
	}
	if !Ranges("0-2,5").Has(5) || Ranges("0-2,5").Has(3) {
		t.Fatal("Has")
	}
	var scattered []int
	for i := 3; i < 3000; i += 7 {
		scattered = append(scattered, i)
	}
	bm := rangesOf(scattered)
	if bm[0] != 'b' || len(bm) > 3000/8*4/3+8 {
		t.Fatalf("scattered clusters as a bitmap: %d bytes", len(bm))
	}
	if idx, err := bm.Indexes(3000); err != nil || !reflect.DeepEqual(idx, scattered) || !bm.Has(10) || bm.Has(11) {
		t.Fatalf("bitmap read back: %v", err)
	}
	if _, err := Ranges("b1:!!").Indexes(10); err == nil {
		t.Fatal("a broken bitmap read")
	}
}

// A span is input (whoever may write its object wrote it): one naming indexes past the table,
// however many, is refused before anything is allocated for them.
func TestSpansPastTheTableAreRefused(t *testing.T) {
	for _, r := range []Ranges{"0-2000000000", "5", "0-3,9", "b0:__________8"} {
		if _, err := r.Indexes(5); err == nil || !strings.Contains(err.Error(), "past the 5 clusters of the table") {
			t.Errorf("%q over a table of 5: %v", r, err)
		}
	}
	forged := &Record{Clusters: []string{"a"}, Revisions: []Revision{{Revision: "r1", Spans: []Span{{Clusters: "0-2000000000"}}}}}
	if err := forged.Observe([]Seen{{Cluster: "a", Revision: "r1"}}, t0); err == nil || !strings.Contains(err.Error(), "revision r1: cluster range") {
		t.Fatalf("a forged span: %v", err)
	}
}

// A move the manager wrote before the pass is recorded at its own time: the span it begins and
// the one it ends, per cluster (clusters that moved at other moments are other spans).
func TestAMoveIsRecordedWhenItHappened(t *testing.T) {
	r := &Record{}
	observe(t, r, at(0), Seen{Cluster: "a", Revision: "r1"}, Seen{Cluster: "b", Revision: "r1"})
	moved := at(3).Add(1500 * time.Millisecond)
	observe(t, r, at(4), Seen{Cluster: "a", Revision: "r2", Since: moved}, Seen{Cluster: "b", Revision: "r2"})
	a, b := r.Of("a"), r.Of("b")
	// (Rounded up: at 3:01.5 the agent had not deployed it yet.)
	if len(a) != 2 || !a[0].Until.Time.Equal(at(3).Add(2*time.Second)) || !a[1].Promoted.Time.Equal(at(3).Add(2*time.Second)) {
		t.Fatalf("a: %+v", a)
	}
	if len(b) != 2 || !b[0].Until.Time.Equal(at(4)) || !b[1].Promoted.Time.Equal(at(4)) {
		t.Fatalf("b: %+v", b)
	}
	if ran, ok := r.At("a", at(3).Add(30*time.Second)); !ok || ran.Revision != "r2" {
		t.Fatalf("a between the move and the pass: %+v", ran)
	}
	// A Since after the pass (a clock ahead) is the pass's time.
	observe(t, r, at(5), Seen{Cluster: "a", Revision: "r3", Since: at(9)}, Seen{Cluster: "b", Revision: "r2"})
	if a := r.Of("a"); !a[2].Promoted.Time.Equal(at(5)) {
		t.Fatalf("a at r3: %+v", a)
	}
}
