package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/fleetgo/fleet/internal/cli/termtext"
)

// maxNames is how many cluster names a group lists before "and N more".
const maxNames = 10

// Summary is a diff in a few words: "replicas: 2 -> 3" when one line changes, else the counts
// of lines added and removed.
func Summary(diff string) string {
	var minus, plus []string
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "---"), strings.HasPrefix(l, "+++"):
		case strings.HasPrefix(l, "-"):
			minus = append(minus, strings.TrimSpace(l[1:]))
		case strings.HasPrefix(l, "+"):
			plus = append(plus, strings.TrimSpace(l[1:]))
		}
	}
	if len(minus) == 1 && len(plus) == 1 {
		mk, mv, ok1 := strings.Cut(minus[0], ":")
		pk, pv, ok2 := strings.Cut(plus[0], ":")
		if ok1 && ok2 && mk == pk {
			return fmt.Sprintf("%s: %s -> %s", mk, strings.TrimSpace(mv), strings.TrimSpace(pv))
		}
		return fmt.Sprintf("%s -> %s", minus[0], plus[0])
	}
	return fmt.Sprintf("+%d -%d lines", len(plus), len(minus))
}

// names lists up to maxNames clusters.
func names(cs []string) string {
	if len(cs) <= maxNames {
		return strings.Join(cs, ", ")
	}
	return strings.Join(cs[:maxNames], ", ") + fmt.Sprintf(" and %d more", len(cs)-maxNames)
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// header is a group's one line: "changed: 412 clusters: replicas: 2 -> 3".
func header(g Group) string {
	if g.Change == "error" {
		return fmt.Sprintf("error on %s: %s", plural(len(g.Clusters), "cluster"), firstLine(g.Diff))
	}
	return fmt.Sprintf("%s: %s: %s", g.Change, plural(len(g.Clusters), "cluster"), Summary(g.Diff))
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	if commit == "" {
		return "(working tree)"
	}
	return commit
}

// Text writes the report for a terminal; color paints the diffs.
func Text(w io.Writer, r *Report, color bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet plan: %s -> %s, %s\n", short(r.Base), short(r.Head), plural(r.Clusters, "cluster"))
	if len(r.Bundles) == 0 {
		b.WriteString("no bundle targets any cluster\n")
	}
	for _, br := range r.Bundles {
		// Names, errors and diffs come from the repository and the clusters: nothing of theirs
		// may act on the terminal (the colours are the plan's own, added after).
		if br.Error != "" {
			fmt.Fprintf(&b, "\nbundle %s: error: %s\n", termtext.Printable(br.Name), termtext.Lines(br.Error))
			continue
		}
		fmt.Fprintf(&b, "\nbundle %s: %s\n", termtext.Printable(br.Name), counts(br))
		for _, g := range br.Groups {
			fmt.Fprintf(&b, "  %s\n    clusters: %s\n", termtext.Printable(header(g)), termtext.Printable(names(g.Clusters)))
			for _, l := range strings.Split(strings.TrimRight(g.Diff, "\n"), "\n") {
				b.WriteString("    " + paint(termtext.Printable(l), color) + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fenceLength is a code fence's length for s: longer than any run of backticks in it, and at
// least three.
func fenceLength(s string) int {
	longest, n := 2, 0
	for i := 0; i < len(s); i++ {
		if s[i] != '`' {
			n = 0
			continue
		}
		if n++; n > longest {
			longest = n
		}
	}
	return longest + 1
}

// counts is a bundle's changes in one line.
func counts(br BundleReport) string {
	by := map[string]int{}
	for _, g := range br.Groups {
		by[g.Change] += len(g.Clusters)
	}
	var parts []string
	for _, c := range []string{Changed, Added, Removed, Drifted, "error"} {
		if by[c] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", by[c], c))
		}
	}
	parts = append(parts, fmt.Sprintf("%d unchanged", br.Unchanged))
	return strings.Join(parts, ", ")
}

func paint(line string, color bool) string {
	if !color {
		return line
	}
	switch {
	case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
		return "\x1b[1m" + line + "\x1b[0m"
	case strings.HasPrefix(line, "+"):
		return "\x1b[32m" + line + "\x1b[0m"
	case strings.HasPrefix(line, "-"):
		return "\x1b[31m" + line + "\x1b[0m"
	case strings.HasPrefix(line, "@@"):
		return "\x1b[36m" + line + "\x1b[0m"
	}
	return line
}

// JSON writes the report as JSON.
func JSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Markdown writes the report as a pull-request comment: a summary table, then each bundle's
// groups collapsed. Past max bytes (0: no limit) the groups left are only counted, with a note
// pointing at the whole report (artifact names where it is). It reports whether it cut.
func Markdown(w io.Writer, r *Report, max int, artifact string) (bool, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "### fleet plan\n\n`%s` → `%s` on %s: %s change.\n\n", short(r.Base), short(r.Head), plural(r.Clusters, "cluster"),
		plural(r.Changes(), "cluster-bundle"))
	b.WriteString("| bundle | changed | added | removed | drifted | unchanged | error |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, br := range r.Bundles {
		by := map[string]int{}
		for _, g := range br.Groups {
			by[g.Change] += len(g.Clusters)
		}
		errMsg := strings.ReplaceAll(firstLine(br.Error), "|", "\\|")
		if by["error"] > 0 && errMsg == "" {
			errMsg = plural(by["error"], "cluster")
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %s |\n", strings.ReplaceAll(escapeHTML(br.Name), "|", "\\|"), by[Changed], by[Added], by[Removed], by[Drifted], br.Unchanged, errMsg)
	}
	cut, left := false, 0
	for _, br := range r.Bundles {
		for _, g := range br.Groups {
			var s strings.Builder
			// The diff is the repository's text: its fence is longer than any run of backticks
			// in it, so no line of it closes the block (CommonMark).
			fence := strings.Repeat("`", fenceLength(g.Diff))
			fmt.Fprintf(&s, "\n<details><summary><code>%s</code> %s</summary>\n\nClusters: %s\n\n%sdiff\n%s\n%s\n</details>\n",
				escapeHTML(br.Name), escapeHTML(header(g)), escapeHTML(names(g.Clusters)), fence, strings.TrimRight(g.Diff, "\n"), fence)
			if max > 0 && b.Len()+s.Len() > max {
				cut = true
				left++
				continue
			}
			b.WriteString(s.String())
		}
	}
	if cut {
		where := "the whole report"
		if artifact != "" {
			where = "`" + artifact + "`"
		}
		fmt.Fprintf(&b, "\n%s more not shown here (the comment's length is capped): see %s.\n", plural(left, "group"), where)
	}
	_, err := io.WriteString(w, b.String())
	return cut, err
}

func escapeHTML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
