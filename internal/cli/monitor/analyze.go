package monitor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// Read reads snapshots as `fleet monitor` writes them: JSON values one after the other.
func Read(r io.Reader) ([]Snapshot, error) {
	dec := json.NewDecoder(r)
	var out []Snapshot
	for {
		var s Snapshot
		err := dec.Decode(&s)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("snapshot %d: %w", len(out)+1, err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("no snapshot to analyze")
	}
	slices.SortStableFunc(out, func(a, b Snapshot) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// Analyze writes what the snapshots say: the newest one's objects and issues by type (each
// issue with detailed), and with more than one, which issues appeared and went since the first
// and which stood in every snapshot (stuck).
func Analyze(snaps []Snapshot, w io.Writer, detailed bool) {
	last := snaps[len(snaps)-1]
	fmt.Fprintf(w, "snapshot %s: %d gitrepos, %d bundles, %d bundledeployments, %d clusters, %d issues\n",
		last.Time.Format(time.RFC3339), len(last.GitRepos), len(last.Bundles), len(last.BundleDeployments), len(last.Clusters), len(last.Issues))
	byType := map[string][]Issue{}
	for _, i := range last.Issues {
		byType[i.Type] = append(byType[i.Type], i)
	}
	for _, t := range slices.Sorted(maps.Keys(byType)) {
		fmt.Fprintf(w, "  %s: %d\n", t, len(byType[t]))
		if detailed {
			for _, i := range byType[t] {
				fmt.Fprintf(w, "    %s %s/%s: %s\n", i.Kind, i.Namespace, i.Name, i.Message)
			}
		}
	}
	if len(snaps) < 2 {
		return
	}
	first := snaps[0]
	keys := func(s Snapshot) map[string]bool {
		m := map[string]bool{}
		for _, i := range s.Issues {
			m[i.Key()] = true
		}
		return m
	}
	before, now := keys(first), keys(last)
	var appeared, resolved, stuck []string
	for k := range now {
		if !before[k] {
			appeared = append(appeared, k)
		}
	}
	for k := range before {
		if !now[k] {
			resolved = append(resolved, k)
		}
	}
	for k := range now {
		in := true
		for _, s := range snaps {
			in = in && keys(s)[k]
		}
		if in {
			stuck = append(stuck, k)
		}
	}
	fmt.Fprintf(w, "since %s (%d snapshots): %d appeared, %d resolved, %d in every snapshot\n",
		first.Time.Format(time.RFC3339), len(snaps), len(appeared), len(resolved), len(stuck))
	for _, list := range []struct {
		what string
		keys []string
	}{{"appeared", appeared}, {"resolved", resolved}, {"stuck", stuck}} {
		slices.Sort(list.keys)
		for _, k := range list.keys {
			fmt.Fprintf(w, "  %s: %s\n", list.what, k)
		}
	}
}
