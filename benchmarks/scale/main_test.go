package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
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
	put := func(name string, v interface{}) {
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
