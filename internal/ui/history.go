package ui

import (
	"slices"
	"strings"
	"time"

	"github.com/fleetgo/fleet/internal/history"
	"github.com/fleetgo/fleet/internal/historyapi"
	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The deployment history's pages (docs/history.md): a cluster's page (its bundles, each with
// revision, commit, state and what it ran) and a bundle's timeline (its revisions, how many
// clusters ran each, from when). The record is read through the API as the viewer, per render.

// clusterBundle is one bundle on a cluster's page.
type clusterBundle struct {
	Namespace, Name, Revision, Commit, State, HeldAt string
	// Ran is what the cluster ran of the bundle, newest first (none when the record cannot be
	// read with the viewer's credential, or has no entry yet).
	Ran []ranRow
}

// ranRow is a span of a revision in the record.
type ranRow struct {
	Revision, Commit, Promoted, Until, Ended string
	// Before is the revision the cluster ran before this one ("": none, or the same), to diff with.
	Before string
}

type clusterHistory struct {
	Namespace, Name string
	Bundles         []clusterBundle
	// Problem says why the history could not be read ("" when it was).
	Problem string
}

// clusterHistoryPage is cluster ns/name's page: every bundle deployed to it, from the watched
// deployments, with what the record says it ran of each.
func (s *Server) clusterHistoryPage(ns, name string) clusterHistory {
	v := clusterHistory{Namespace: ns, Name: name}
	for _, bd := range list[*fleet.BundleDeployment](s.k.deployments) {
		if bd.Labels[fleet.ClusterNamespaceLabel] != ns || bd.Labels[fleet.ClusterLabel] != name {
			continue
		}
		b := clusterBundle{Namespace: bd.Labels[fleet.BundleNamespaceLabel], Name: bd.Labels[fleet.BundleLabel],
			Revision: bd.Annotations[fleet.RevisionAnnotation], Commit: bd.Labels[fleet.CommitLabel],
			State: stateOr(string(summary.State(bd)), "Ready"), HeldAt: summary.HeldAt(bd)}
		if s.api != nil && v.Problem == "" {
			recs, err := historyapi.Find(s.api, b.Namespace, b.Name)
			switch {
			case err != nil && !strings.Contains(err.Error(), "no deployment history"):
				v.Problem = err.Error()
			case err == nil:
				b.Ran = ranOn(recs, historyapi.RecordName(b.Namespace, ns, name))
			}
		}
		v.Bundles = append(v.Bundles, b)
	}
	slices.SortFunc(v.Bundles, func(a, b clusterBundle) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return v
}

// ranOn is what cluster ran of the (one) bundle, newest first.
func ranOn(recs []historyapi.Bundle, cluster string) []ranRow {
	var out []ranRow
	for _, b := range recs {
		for _, r := range b.Record.Of(cluster) {
			out = append(out, ranRow{Revision: r.Revision, Commit: r.Commit, Promoted: stamp(&r.Promoted.Time), Until: untilOf(r), Ended: r.Ended})
		}
	}
	for i := 1; i < len(out); i++ {
		if out[i].Revision != out[i-1].Revision {
			out[i].Before = out[i-1].Revision
		}
	}
	slices.Reverse(out)
	return out
}

func untilOf(r history.Ran) string {
	if r.Until == nil {
		return "now"
	}
	return stamp(&r.Until.Time)
}

func stamp(t *time.Time) string { return t.UTC().Format(time.RFC3339) }

// timelineRow is one revision of a bundle's timeline.
type timelineRow struct {
	Revision, Commit, First, Last string
	// Clusters ran it at some time; Running run it now.
	Clusters, Running int
}

type timeline struct {
	Namespace, Name, Problem string
	Rows                     []timelineRow
}

// timelinePage is bundle ns/name's revisions, newest first.
func (s *Server) timelinePage(ns, name string) timeline {
	v := timeline{Namespace: ns, Name: name}
	if s.api == nil {
		v.Problem = "this UI shows fixed objects: no history to read"
		return v
	}
	recs, err := historyapi.Find(s.api, ns, name)
	if err != nil {
		v.Problem = err.Error()
		return v
	}
	for _, b := range recs {
		if b.Name != name {
			continue
		}
		for _, rev := range b.Record.Revisions {
			v.Rows = append(v.Rows, timelineOf(b.Record, rev))
		}
	}
	slices.Reverse(v.Rows)
	return v
}

func timelineOf(rec *history.Record, rev history.Revision) timelineRow {
	row := timelineRow{Revision: rev.Revision, Commit: rev.Commit, Last: "now"}
	clusters, _ := rec.ClustersOf(rev.Revision)
	row.Clusters = len(clusters)
	var first, last time.Time
	running := false
	for i, sp := range rev.Spans {
		if i == 0 || sp.Promoted.Time.Before(first) {
			first = sp.Promoted.Time
		}
		if sp.Until == nil {
			running = true
		} else if sp.Until.Time.After(last) {
			last = sp.Until.Time
		}
	}
	for _, c := range clusters {
		if ran, ok := rec.At(c, time.Now()); ok && ran.Revision == rev.Revision {
			row.Running++
		}
	}
	row.First = stamp(&first)
	if !running {
		row.Last = stamp(&last)
	}
	return row
}
