package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetgo/fleet/benchmarks/sim"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A small run (BENCH_SIZE=small, for iteration) names its results apart from the full run's,
// which RESULTS.md cites, and each reads back only its own sizes for the growth plots.
func TestSmallRunsLeaveTheFullRunsResultsAlone(t *testing.T) {
	if got := resultsBase("full"); got != "scale" {
		t.Errorf("full run's results begin %q, want scale", got)
	}
	if got := resultsBase("small"); got != "scale-small" {
		t.Errorf("small run's results begin %q, want scale-small", got)
	}
	dir := t.TempDir()
	put := func(name string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(date string, n int) Run {
		return Run{Date: date, Clusters: n, Phases: []Phase{{Name: "registration storm", Seconds: 1}}}
	}
	put("scale-1000.json", run("full", 1000))
	put("scale-10000.json", run("full", 10000))
	put("scale-small-1000.json", run("small", 1000))
	put("scale-small-1000-checkin-1m.json", run("checkin", 1000))
	put("scale-10000-313cf22-1.json", run("kept", 10000))
	put("scale-shards.json", map[string]int{"clusters": 1000})
	for size, want := range map[string][]int{"full": {1000, 10000}, "small": {1000}} {
		runs, err := readRuns(dir, size)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != len(want) {
			t.Fatalf("%s: read %d runs, want %d: %+v", size, len(runs), len(want), runs)
		}
		for i, r := range runs {
			if r.Date != size || r.Clusters != want[i] {
				t.Errorf("%s: run %d is %s of %d clusters, want %s of %d", size, i, r.Date, r.Clusters, size, want[i])
			}
		}
	}
}

// The plain client's status writes are the ones the simulated agents make (conditions, release,
// resource counts), so that its time is the machine's limit for the same writes, not for smaller
// ones.
func TestPlainClientReportsWhatTheAgentsReport(t *testing.T) {
	bd := rawDeployment(scaleBundle(0), 7)
	for _, rev := range []int{1, 2} {
		got := reported(bd, rev).Status
		if got.AppliedDeploymentID != bd.Spec.DeploymentID || !got.Ready || !got.NonModified || got.Display.State != string(fleet.Ready) {
			t.Errorf("revision %d: status %+v is not applied, Ready and unmodified", rev, got)
		}
		var types []string
		for _, c := range got.Conditions {
			if c.Status != corev1.ConditionTrue {
				t.Errorf("revision %d: condition %s is %s", rev, c.Type, c.Status)
			}
			types = append(types, c.Type)
		}
		if want := []string{"Deployed", "Installed", "Monitored", "Ready"}; !slices.Equal(types, want) {
			t.Errorf("revision %d: conditions %v, want %v", rev, types, want)
		}
		if want := (fleet.ResourceCounts{DesiredReady: sim.DefaultResources, Ready: sim.DefaultResources}); got.ResourceCounts == nil || *got.ResourceCounts != want {
			t.Errorf("revision %d: resource counts %+v, want %+v", rev, got.ResourceCounts, want)
		}
		if want := fmt.Sprintf("scale/%s:%d", bd.Name, rev); got.Release != want {
			t.Errorf("revision %d: release %q, want %q", rev, got.Release, want)
		}
	}
	if bd.Status.AppliedDeploymentID != "" || len(bd.Status.Conditions) != 0 {
		t.Errorf("reported changed the BundleDeployment it was given: %+v", bd.Status)
	}
}

// make bench runs the standard sizes (up to 5,000 clusters), make bench-10k the 10,000-cluster
// experiments with the idle window; both write the results RESULTS.md cites.
func TestPlanSizes(t *testing.T) {
	sizes := func(size string) []int {
		var out []int
		for _, p := range plans(size) {
			out = append(out, p.clusters)
		}
		return out
	}
	for size, want := range map[string][]int{"standard": {100, 1000, 5000}, "10k": {10000}, "full": {100, 1000, 5000, 10000},
		"small": {100, 1000}, "25k": {25000}} {
		if got := sizes(size); !slices.Equal(got, want) {
			t.Errorf("%s runs %v clusters, want %v", size, got, want)
		}
	}
	if p := plans("10k")[0]; p.idle == 0 || !slices.Equal(p.creates, []int{5}) {
		t.Errorf("10k: idle %s, creates %v: want the idle window and 5 x 10,000", p.idle, p.creates)
	}
	if p := plans("standard")[1]; !slices.Equal(p.creates, []int{5, 50}) || !p.badInput {
		t.Errorf("standard at 1,000: creates %v, bad input %v: want 5 and 50 x 1,000 and the garbage agent", p.creates, p.badInput)
	}
	if p := plans("25k")[0]; !p.registerOnly || p.idle == 0 || len(p.creates) > 0 || p.wave == 0 || p.wave >= p.clusters {
		t.Errorf("25k: register only %v, idle %s, creates %v, waves of %d: want registration in waves and the idle window, no bundles",
			p.registerOnly, p.idle, p.creates, p.wave)
	}
	if resultsBase("standard") != "scale" || resultsBase("10k") != "scale" {
		t.Error("the standard and 10k runs must write the results RESULTS.md cites (scale-<N>.json)")
	}
}

// The restart experiment waits for the rollout's Events before sampling standing still: it
// counts every write of Events, refused ones too, and nothing else.
func TestEventWritesCountsEventsOnly(t *testing.T) {
	counts := map[string]int{"POST events": 5, "PATCH events": 2, "POST events 429": 1, "PUT leases": 40,
		"PATCH clusters/status": 100, "POST eventsources": 7}
	if got := eventWrites(counts); got != 8 {
		t.Errorf("eventWrites = %d, want 8", got)
	}
}
