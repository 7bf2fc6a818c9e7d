// Package history keeps, per bundle, what revision each cluster ran and when: the record a
// deployment history answers from ("what ran on cluster X at T", "which clusters ran revision
// R"). It is pure: the manager folds each pass over a bundle's deployments into the record and
// stores it; the CLI and the UI read it.
//
// Clusters that ran the same revision over the same span are one entry (a Span), their clusters
// written as runs of indexes into the record's cluster table, so that a record of 10,000
// clusters and 100 revisions stays far below what one object may hold. A move is recorded at the
// second the manager wrote it (Seen.Since), applied and ready at the pass that saw them.
package history

import (
	"fmt"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// How a span ended.
const (
	// Replaced: the clusters moved on to a later revision.
	Replaced = "Replaced"
	// RolledBack: the clusters went back to an earlier revision.
	RolledBack = "RolledBack"
	// Removed: the bundle was taken off the clusters (no longer targeted, or deleted).
	Removed = "Removed"
)

// Record is one bundle's history.
type Record struct {
	// Clusters is the table spans index into, in the order clusters were first seen.
	Clusters []string `json:"clusters"`
	// Revisions in the order they were first promoted.
	Revisions []Revision `json:"revisions"`

	index map[string]int
}

// Revision is one revision of the bundle and the spans of clusters that ran it.
type Revision struct {
	Revision string `json:"revision"`
	Commit   string `json:"commit,omitempty"`
	Spans    []Span `json:"spans"`
}

// Span is a set of clusters that ran a revision from one pass to another (its Clusters are
// Ranges).
type Span = fleet.HistorySpan

// Seen is one cluster's deployment of the bundle as a pass sees it.
type Seen struct {
	Cluster  string
	Revision string
	Commit   string
	Applied  bool
	Ready    bool
	// Since, when set, is when the cluster moved to the revision (the manager wrote it), if
	// before the pass: the span begins then, and the one it left ends then.
	Since time.Time
}

// ending is how and when a cluster's span ends.
type ending struct {
	how string
	at  time.Time
}

// movedAt is when s's cluster moved to its revision: Since when set and not after the pass at
// now, else now. The record keeps whole seconds: a move is rounded up to the next one, as its
// agent deploys it after the manager wrote it (what ran before still ran until then).
func (s Seen) movedAt(now time.Time) time.Time {
	if s.Since.IsZero() || s.Since.After(now) {
		return now.UTC()
	}
	at := s.Since.Truncate(time.Second)
	if at.Before(s.Since) {
		at = at.Add(time.Second)
	}
	return at.UTC()
}

// ref locates a span in a record.
type ref struct{ rev, span int }

func (r *Record) clusterIndex(name string) int {
	if r.index == nil {
		r.index = make(map[string]int, len(r.Clusters))
		for i, c := range r.Clusters {
			r.index[c] = i
		}
	}
	i, ok := r.index[name]
	if !ok {
		i = len(r.Clusters)
		r.Clusters = append(r.Clusters, name)
		r.index[name] = i
	}
	return i
}

// open is where each cluster's running span is.
func (r *Record) open() (map[int]ref, error) {
	out := map[int]ref{}
	for ri := range r.Revisions {
		for si, s := range r.Revisions[ri].Spans {
			if s.Until != nil {
				continue
			}
			idx, err := Ranges(s.Clusters).Indexes(len(r.Clusters))
			if err != nil {
				return nil, fmt.Errorf("revision %s: %w", r.Revisions[ri].Revision, err)
			}
			for _, i := range idx {
				out[i] = ref{ri, si}
			}
		}
	}
	return out, nil
}

// Observe folds what one pass at now saw of every cluster the bundle is deployed to; a cluster
// the record has running something that seen leaves out had the bundle removed.
func (r *Record) Observe(seen []Seen, now time.Time) error {
	open, err := r.open()
	if err != nil {
		return err
	}
	seen = slices.Clone(seen)
	sort.Slice(seen, func(i, j int) bool { return seen[i].Cluster < seen[j].Cluster })
	byIndex := map[int]Seen{}
	closing := map[ref]map[int]ending{}
	end := func(o ref, i int, e ending) {
		if closing[o] == nil {
			closing[o] = map[int]ending{}
		}
		closing[o][i] = e
	}
	var promoted []int
	for _, s := range seen {
		i := r.clusterIndex(s.Cluster)
		byIndex[i] = s
		o, running := open[i]
		if running && r.Revisions[o.rev].Revision == s.Revision {
			continue
		}
		if running {
			end(o, i, ending{r.endingFor(o.rev, s.Revision), s.movedAt(now)})
		}
		promoted = append(promoted, i)
	}
	for i, o := range open {
		if _, ok := byIndex[i]; !ok {
			end(o, i, ending{Removed, now})
		}
	}
	r.close(closing)
	r.promote(promoted, byIndex, now)
	return r.mark(byIndex, now)
}

// endingFor is how a span of revision rev ends when its cluster moves to next: back to an
// earlier revision is a rollback.
func (r *Record) endingFor(rev int, next string) string {
	for i := range rev {
		if r.Revisions[i].Revision == next {
			return RolledBack
		}
	}
	return Replaced
}

// close ends the spans' clusters in closing: the clusters that end leave the span for a closed
// one per way and time of ending; the rest run on in it.
func (r *Record) close(closing map[ref]map[int]ending) {
	refs := make([]ref, 0, len(closing))
	for o := range closing {
		refs = append(refs, o)
	}
	sort.Slice(refs, func(i, j int) bool {
		return refs[i].rev < refs[j].rev || refs[i].rev == refs[j].rev && refs[i].span < refs[j].span
	})
	for _, o := range refs {
		rev := &r.Revisions[o.rev]
		s := rev.Spans[o.span]
		all, _ := Ranges(s.Clusters).Indexes(len(r.Clusters))
		byEnd := map[ending][]int{}
		var ends []ending
		var rest []int
		for _, i := range all {
			e, ok := closing[o][i]
			switch {
			case !ok:
				rest = append(rest, i)
			case byEnd[e] == nil:
				ends = append(ends, e)
				fallthrough
			default:
				byEnd[e] = append(byEnd[e], i)
			}
		}
		for _, e := range ends {
			ended, until := s, metav1.NewTime(e.at)
			ended.Clusters, ended.Until, ended.Ended = string(rangesOf(byEnd[e])), &until, e.how
			rev.Spans = append(rev.Spans, ended)
		}
		rev.Spans[o.span].Clusters = string(rangesOf(rest))
	}
	for i := range r.Revisions {
		r.Revisions[i].Spans = slices.DeleteFunc(r.Revisions[i].Spans, func(s Span) bool { return s.Clusters == "" })
	}
}

// promote opens, per revision and moment, one span for the clusters that moved to it then.
func (r *Record) promote(promoted []int, seen map[int]Seen, now time.Time) {
	type key struct {
		rev string
		at  time.Time
	}
	byKey := map[key][]int{}
	var order []key
	for _, i := range promoted {
		k := key{seen[i].Revision, seen[i].movedAt(now)}
		if byKey[k] == nil {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	for _, k := range order {
		ri := slices.IndexFunc(r.Revisions, func(x Revision) bool { return x.Revision == k.rev })
		if ri < 0 {
			r.Revisions = append(r.Revisions, Revision{Revision: k.rev, Commit: seen[byKey[k][0]].Commit})
			ri = len(r.Revisions) - 1
		}
		r.Revisions[ri].Spans = append(r.Revisions[ri].Spans, Span{Clusters: string(rangesOf(byKey[k])), Promoted: metav1.NewTime(k.at)})
	}
}

// mark notes when the last clusters of each running span reported its revision applied and
// ready.
func (r *Record) mark(seen map[int]Seen, now time.Time) error {
	for ri := range r.Revisions {
		for si := range r.Revisions[ri].Spans {
			s := &r.Revisions[ri].Spans[si]
			if s.Until != nil || s.Applied != nil && s.Ready != nil {
				continue
			}
			idx, err := Ranges(s.Clusters).Indexes(len(r.Clusters))
			if err != nil {
				return err
			}
			applied, ready := true, true
			for _, i := range idx {
				applied = applied && seen[i].Applied
				ready = ready && seen[i].Ready
			}
			at := metav1.NewTime(now)
			if applied && s.Applied == nil {
				s.Applied = &at
			}
			if ready && s.Ready == nil {
				s.Ready = &at
			}
		}
	}
	return nil
}

// FromObjects is the record a Bundle's BundleHistory (nil: none yet) and BundleRevisions (any
// order) hold.
func FromObjects(table *fleet.BundleHistory, revs []*fleet.BundleRevision) *Record {
	r := &Record{}
	if table != nil {
		r.Clusters = slices.Clone(table.Status.Clusters)
	}
	revs = slices.Clone(revs)
	slices.SortFunc(revs, func(a, b *fleet.BundleRevision) int { return int(a.Spec.Order - b.Spec.Order) })
	for _, o := range revs {
		r.Revisions = append(r.Revisions, Revision{Revision: o.Spec.Revision, Commit: o.Spec.Commit, Spans: slices.Clone(o.Status.Spans)})
	}
	return r
}
