package history

import (
	"cmp"
	"slices"
	"time"
)

// Ran is a revision a cluster ran, over one span.
type Ran struct {
	Revision string `json:"revision"`
	Commit   string `json:"commit,omitempty"`
	Span
}

// running reports whether s covers t: promoted at or before it, not ended by then.
func running(s *Span, t time.Time) bool {
	return !s.Promoted.After(t) && (s.Until == nil || s.Until.After(t))
}

// At is what cluster ran at t (false: nothing the record knows of).
func (r *Record) At(cluster string, t time.Time) (Ran, bool) {
	i := slices.Index(r.Clusters, cluster)
	if i < 0 {
		return Ran{}, false
	}
	for _, rev := range r.Revisions {
		for _, s := range rev.Spans {
			if running(&s, t) && Ranges(s.Clusters).Has(i) {
				return Ran{Revision: rev.Revision, Commit: rev.Commit, Span: s}, true
			}
		}
	}
	return Ran{}, false
}

// Of is everything cluster ran, oldest first.
func (r *Record) Of(cluster string) []Ran {
	i := slices.Index(r.Clusters, cluster)
	if i < 0 {
		return nil
	}
	var out []Ran
	for _, rev := range r.Revisions {
		for _, s := range rev.Spans {
			if Ranges(s.Clusters).Has(i) {
				out = append(out, Ran{Revision: rev.Revision, Commit: rev.Commit, Span: s})
			}
		}
	}
	// In promotion order; of two spans promoted in one second, the one that ended first.
	slices.SortStableFunc(out, func(a, b Ran) int {
		return cmp.Or(a.Promoted.Time.Compare(b.Promoted.Time), untilOrLast(a).Compare(untilOrLast(b)))
	})
	return out
}

// untilOrLast is when r's span ended; a span still running sorts after every ended one.
func untilOrLast(r Ran) time.Time {
	if r.Until == nil {
		return time.Unix(1<<62, 0)
	}
	return r.Until.Time
}

// ClustersOf are the clusters that ran revision rev at any time, by name.
func (r *Record) ClustersOf(rev string) ([]string, error) {
	seen := map[int]bool{}
	for _, x := range r.Revisions {
		if x.Revision != rev {
			continue
		}
		for _, s := range x.Spans {
			idx, err := Ranges(s.Clusters).Indexes(len(r.Clusters))
			if err != nil {
				return nil, err
			}
			for _, i := range idx {
				seen[i] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for i := range seen {
		if i < len(r.Clusters) {
			out = append(out, r.Clusters[i])
		}
	}
	slices.Sort(out)
	return out, nil
}

// Prune drops the revisions no cluster runs that ended before now-maxAge, then the oldest
// such ones beyond maxRevisions (0: no bound); it returns the revisions dropped. A revision a
// cluster runs is always kept.
func (r *Record) Prune(now time.Time, maxAge time.Duration, maxRevisions int) []string {
	var dropped []string
	keep := r.Revisions[:0:0]
	ended := 0
	for _, rev := range r.Revisions {
		if _, done := rev.ended(); done {
			ended++
		}
	}
	for _, rev := range r.Revisions {
		last, done := rev.ended()
		if done && (maxAge > 0 && last.Before(now.Add(-maxAge)) || maxRevisions > 0 && ended > maxRevisions) {
			dropped = append(dropped, rev.Revision)
			ended--
			continue
		}
		keep = append(keep, rev)
	}
	r.Revisions = keep
	return dropped
}

// ended is when the last cluster stopped running the revision (false: one still does).
func (rev *Revision) ended() (time.Time, bool) {
	var last time.Time
	for _, s := range rev.Spans {
		if s.Until == nil {
			return time.Time{}, false
		}
		if s.Until.After(last) {
			last = s.Until.Time
		}
	}
	return last, true
}
