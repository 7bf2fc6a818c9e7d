package ui

import (
	"net/url"
	"strings"
	"time"

	"github.com/fleetgo/fleet/internal/historyapi"
)

// The rendered diff between two revisions of a bundle for one cluster, as `fleet plan` renders
// it (historyapi.Diff): /bundles/NS/NAME/diff?cluster=CNS/CNAME&from=R1&to=R2. Rendering is
// Helm's work, twice: a page's diff is kept for diffFresh, so the live updates of an open page
// do not render it again on every change.

const (
	// diffFresh is how long a rendered diff is shown again as it is.
	diffFresh = time.Minute
	// keptDiffs is how many rendered diffs a Server keeps.
	keptDiffs = 16
)

type diffView struct {
	Namespace, Name, Cluster, From, To string
	Lines                              []diffLine
	// Same says the two revisions deploy the same to the cluster.
	Same bool
	// Problem says why there is no diff ("" when there is).
	Problem string
}

// diffLine is a line of the diff, Class "add", "del", "hunk" or "".
type diffLine struct{ Class, Text string }

type keptDiff struct {
	at   time.Time
	view diffView
}

func (s *Server) diffPage(ns, name string, q url.Values) diffView {
	v := diffView{Namespace: ns, Name: name, Cluster: q.Get("cluster"), From: q.Get("from"), To: q.Get("to")}
	clusterNS, clusterName, ok := strings.Cut(v.Cluster, "/")
	switch {
	case s.api == nil:
		v.Problem = "this UI shows fixed objects: no history to read"
		return v
	case !ok || clusterNS == "" || clusterName == "" || v.From == "" || v.To == "":
		v.Problem = "say the cluster (namespace/name) and the two revisions to compare"
		return v
	}
	key := strings.Join([]string{ns, name, v.Cluster, v.From, v.To}, "\x00")
	if k, ok := s.diffs.Get(key); ok && time.Since(k.(keptDiff).at) < diffFresh {
		return k.(keptDiff).view
	}
	d, err := historyapi.Diff(s.api, s.secrets, ns, name, v.From, v.To, clusterNS, clusterName)
	switch {
	case err != nil:
		v.Problem = err.Error()
	case d == "":
		v.Same = true
	default:
		v.Lines = diffLines(d)
	}
	s.diffs.Add(key, keptDiff{at: time.Now(), view: v})
	return v
}

func diffLines(d string) []diffLine {
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
		class := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			class = "add"
		case strings.HasPrefix(l, "-"):
			class = "del"
		case strings.HasPrefix(l, "@@"):
			class = "hunk"
		}
		out = append(out, diffLine{Class: class, Text: l})
	}
	return out
}
