package history

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/fleetgo/fleet/internal/cli/termtext"
	"github.com/fleetgo/fleet/internal/history"
	"github.com/fleetgo/fleet/internal/historyapi"
)

// Query narrows a report: to one cluster, to one moment, or both; or asks which clusters ran
// one revision.
type Query struct {
	Cluster string
	// At, when set, asks what ran then.
	At *time.Time
	// Revision, when set, asks which clusters ran it (a revision, or a commit or its first 7 or
	// more characters).
	Revision string
}

// ranRevision are the rows of every cluster that ran the revision id names, span by span.
func ranRevision(b Bundle, id string) ([]Row, error) {
	var rows []Row
	for _, rev := range b.Record.Revisions {
		if !historyapi.Names(rev, id) {
			continue
		}
		for _, s := range rev.Spans {
			idx, err := history.Ranges(s.Clusters).Indexes(len(b.Record.Clusters))
			if err != nil {
				return nil, err
			}
			for _, i := range idx {
				if i < len(b.Record.Clusters) {
					rows = append(rows, rowOf(b.Name, b.Record.Clusters[i], history.Ran{Revision: rev.Revision, Commit: rev.Commit, Span: s}))
				}
			}
		}
	}
	return rows, nil
}

// Row is a line of the report: a revision of a bundle overall (Cluster empty: how many
// clusters ran it, how many run it now), or what one cluster ran over one span.
type Row struct {
	Bundle   string     `json:"bundle"`
	Cluster  string     `json:"cluster,omitempty"`
	Revision string     `json:"revision"`
	Commit   string     `json:"commit,omitempty"`
	Clusters int        `json:"clusters,omitempty"`
	Running  int        `json:"running,omitempty"`
	Promoted *time.Time `json:"promoted,omitempty"`
	Applied  *time.Time `json:"applied,omitempty"`
	Ready    *time.Time `json:"ready,omitempty"`
	Until    *time.Time `json:"until,omitempty"`
	Ended    string     `json:"ended,omitempty"`
}

// Rows answers q from the bundles' records.
func Rows(bundles []Bundle, q Query) ([]Row, error) {
	if q.At != nil {
		if first, ok := earliest(bundles); ok && q.At.Before(first) {
			return nil, fmt.Errorf("--at %s is before the record, which begins at %s", q.At.UTC().Format(time.RFC3339), first.UTC().Format(time.RFC3339))
		}
	}
	var rows []Row
	if q.Revision != "" {
		for _, b := range bundles {
			ran, err := ranRevision(b, q.Revision)
			if err != nil {
				return nil, err
			}
			rows = append(rows, ran...)
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("no revision or commit %s in the record", q.Revision)
		}
		return rows, nil
	}
	known := q.Cluster == ""
	for _, b := range bundles {
		clusters := b.Record.Clusters
		if q.Cluster != "" {
			if !slices.Contains(clusters, q.Cluster) {
				continue
			}
			known, clusters = true, []string{q.Cluster}
		}
		switch {
		case q.At != nil:
			for _, c := range clusters {
				if ran, ok := b.Record.At(c, *q.At); ok {
					rows = append(rows, rowOf(b.Name, c, ran))
				}
			}
		case q.Cluster != "":
			for _, ran := range b.Record.Of(q.Cluster) {
				rows = append(rows, rowOf(b.Name, q.Cluster, ran))
			}
		default:
			overview, err := revisions(b)
			if err != nil {
				return nil, err
			}
			rows = append(rows, overview...)
		}
	}
	if !known {
		return nil, fmt.Errorf("cluster %s ran none of these bundles in their record", q.Cluster)
	}
	return rows, nil
}

func earliest(bundles []Bundle) (time.Time, bool) {
	var first time.Time
	for _, b := range bundles {
		for _, rev := range b.Record.Revisions {
			for _, s := range rev.Spans {
				if first.IsZero() || s.Promoted.Time.Before(first) {
					first = s.Promoted.Time
				}
			}
		}
	}
	return first, !first.IsZero()
}

func rowOf(bundle, cluster string, ran history.Ran) Row {
	r := Row{Bundle: bundle, Cluster: cluster, Revision: ran.Revision, Commit: ran.Commit, Promoted: ptr(ran.Promoted.Time), Ended: ran.Ended}
	if ran.Applied != nil {
		r.Applied = ptr(ran.Applied.Time)
	}
	if ran.Ready != nil {
		r.Ready = ptr(ran.Ready.Time)
	}
	if ran.Until != nil {
		r.Until = ptr(ran.Until.Time)
	}
	return r
}

// revisions are a bundle's revisions overall: first promoted, last ended, how many clusters
// ran each and how many still do.
func revisions(b Bundle) ([]Row, error) {
	var rows []Row
	for _, rev := range b.Record.Revisions {
		ran, err := b.Record.ClustersOf(rev.Revision)
		if err != nil {
			return nil, err
		}
		r := Row{Bundle: b.Name, Revision: rev.Revision, Commit: rev.Commit, Clusters: len(ran)}
		running := 0
		for _, s := range rev.Spans {
			if r.Promoted == nil || s.Promoted.Time.Before(*r.Promoted) {
				r.Promoted = ptr(s.Promoted.Time)
			}
			if s.Until == nil {
				idx, _ := history.Ranges(s.Clusters).Indexes(len(b.Record.Clusters))
				running += len(idx)
			} else if r.Until == nil || s.Until.Time.After(*r.Until) {
				r.Until = ptr(s.Until.Time)
			}
		}
		if r.Running = running; r.Running > 0 {
			r.Until = nil
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func ptr(t time.Time) *time.Time { return &t }

// PrintJSON writes the rows as JSON.
func PrintJSON(out io.Writer, rows []Row) error {
	if rows == nil {
		rows = []Row{}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// Print writes the rows as a table: per revision overall, or per cluster and span.
func Print(out io.Writer, rows []Row, q Query) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	if q.Cluster == "" && q.At == nil && q.Revision == "" {
		fmt.Fprintln(w, "BUNDLE\tREVISION\tCOMMIT\tPROMOTED\tCLUSTERS\tRUNNING\tUNTIL")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", termtext.Printable(r.Bundle), r.Revision, commit(r.Commit), when(r.Promoted), r.Clusters, r.Running, when(r.Until))
		}
		return
	}
	fmt.Fprintln(w, "BUNDLE\tCLUSTER\tREVISION\tCOMMIT\tPROMOTED\tAPPLIED\tREADY\tUNTIL\tENDED")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termtext.Printable(r.Bundle), termtext.Printable(r.Cluster), r.Revision, commit(r.Commit),
			when(r.Promoted), when(r.Applied), when(r.Ready), when(r.Until), dash(r.Ended))
	}
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func commit(c string) string { return dash(termtext.Printable(c[:min(len(c), 12)])) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
