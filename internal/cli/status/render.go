package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fleetgo/fleet/internal/cli/termtext"
	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Style says how to print: in color (a terminal), and the time "offline 12m" counts from.
type Style struct {
	Color bool
	Now   time.Time
}

const (
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	red    = "\x1b[31m"
	dim    = "\x1b[2m"
	reset  = "\x1b[0m"
)

func (s Style) paint(color, text string) string {
	if !s.Color || text == "" {
		return text
	}
	return color + text + reset
}

// state colors a state: green when ready, yellow while on its way, red when failing.
func (s Style) state(st string) string {
	switch st {
	case string(fleet.Ready):
		return s.paint(green, st)
	case string(fleet.WaitApplied), string(fleet.Pending), string(fleet.OutOfSync), "GitUpdating", "WaitCheckIn":
		return s.paint(yellow, st)
	}
	return s.paint(red, st)
}

// Print writes the report as a tree.
func Print(w io.Writer, r *Report, s Style) error {
	var b strings.Builder
	for i, g := range r.GitRepos {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "GitRepo %s/%s  %s  %d/%d clusters ready  %s\n", g.Namespace, g.Name, printable(commitOf(g.Commit)),
			g.ReadyClusters, g.DesiredReadyClusters, s.state(g.State))
		if g.LatestCommit != "" {
			fmt.Fprintf(&b, "  %s\n", s.paint(yellow, "latest commit "+short(g.LatestCommit)+" is not applied yet"))
		}
		if g.Error != "" {
			fmt.Fprintf(&b, "  %s %s\n", s.paint(red, "error:"), oneLine(g.Error))
		}
		if !g.Complete {
			fmt.Fprintf(&b, "  %s\n", s.paint(dim, "(BundleDeployments not readable: only non-ready clusters are listed)"))
		}
		if len(g.Bundles) == 0 {
			fmt.Fprintf(&b, "  %s\n", s.paint(dim, "no Bundles"))
		}
		for j, bu := range g.Bundles {
			last := j == len(g.Bundles)-1
			fmt.Fprintf(&b, "%s Bundle %s  %d/%d ready  %s\n", branch(last), bu.Name, bu.Ready, bu.Desired, s.state(printable(bu.State)))
			indent := "│  "
			if last {
				indent = "   "
			}
			if ro := bu.Rollout; ro != nil {
				fmt.Fprintf(&b, "%s%s\n", indent, s.rollout(ro))
			}
			if len(bu.Secrets) > 0 {
				fmt.Fprintf(&b, "%s%s\n", indent, secretsLine(bu))
			}
			if bu.Held != "" {
				fmt.Fprintf(&b, "%s%s %s\n", indent, s.paint(yellow, "rolled back:"), oneLine(printable(bu.Held)))
			}
			width := 0
			for _, c := range bu.Clusters {
				width = max(width, len(c.Name))
			}
			for k, c := range bu.Clusters {
				fmt.Fprintf(&b, "%s%s %-*s  %s%s\n", indent, branch(k == len(bu.Clusters)-1), width, printable(c.Name), s.state(printable(c.State)), s.details(c))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rollout is a Bundle's progressive rollout on one line: phase, each stage's passing count and
// state, and what it waits for or why it halted.
func (s Style) rollout(ro *Rollout) string {
	var stages []string
	for _, st := range ro.Stages {
		stages = append(stages, fmt.Sprintf("%s %d/%d %s", printable(st.Name), st.Passing, st.Clusters, printable(st.State)))
	}
	line := fmt.Sprintf("rollout (%s) %s: %s", printable(ro.Policy), s.state(printable(ro.Phase)), strings.Join(stages, ", "))
	if ro.Message != "" {
		line += s.paint(dim, " - "+oneLine(ro.Message))
	}
	return line
}

// secretsLine names a Bundle's sealed secrets and on how many of its clusters they are unsealed.
func secretsLine(bu Bundle) string {
	sealed, unsealed := 0, 0
	for _, c := range bu.Clusters {
		if c.Sealed != "" {
			sealed++
		}
		if c.Sealed == summary.SealedUnsealed {
			unsealed++
		}
	}
	return fmt.Sprintf("secrets %s: sealed to %d clusters, unsealed on %d", printable(strings.Join(bu.Secrets, ", ")), sealed, unsealed)
}

func (s Style) details(c Cluster) string {
	var parts []string
	if c.OlderCommit != "" {
		parts = append(parts, s.paint(yellow, "still on commit "+printable(short(c.OlderCommit))))
	}
	if c.Offline && c.LastSeen != nil {
		parts = append(parts, s.paint(red, "offline "+ago(s.Now.Sub(*c.LastSeen))))
	} else if c.Offline {
		parts = append(parts, s.paint(red, "offline"))
	}
	if c.Sealed == summary.SealedWaiting {
		parts = append(parts, s.paint(yellow, "secrets not unsealed yet"))
	}
	if c.HeldAt != "" {
		parts = append(parts, s.paint(yellow, "held at revision "+printable(c.HeldAt)))
	}
	if c.Message != "" {
		parts = append(parts, oneLine(c.Message))
	}
	if len(parts) == 0 {
		return ""
	}
	return "  " + strings.Join(parts, " · ")
}

func branch(last bool) string {
	if last {
		return "└─"
	}
	return "├─"
}

func commitOf(c string) string {
	if c == "" {
		return "no commit applied yet"
	}
	return "commit " + short(c)
}

func short(c string) string {
	if len(c) > 7 {
		return c[:7]
	}
	return c
}

// ago is a duration as people say it: 45s, 12m, 3h, 2d.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// oneLine keeps the first line of a message, at most 160 characters, printable.
func oneLine(msg string) string {
	msg, _, _ = strings.Cut(msg, "\n")
	msg = printable(msg)
	if len(msg) > 160 {
		msg = msg[:157] + "..."
	}
	return msg
}

// printable: names and messages come from status that agents and downstream objects wrote.
func printable(s string) string { return termtext.Printable(s) }

// PrintJSON writes the report as JSON, for scripts.
func PrintJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Progress is the one line --watch prints while waiting.
func Progress(r *Report) string {
	ready, desired, waiting, failing := 0, 0, 0, 0
	for _, g := range r.GitRepos {
		ready += g.ReadyClusters
		desired += g.DesiredReadyClusters
		for _, b := range g.Bundles {
			for _, c := range b.Clusters {
				switch c.State {
				case string(fleet.Ready):
				case string(fleet.WaitApplied), string(fleet.Pending), string(fleet.OutOfSync):
					waiting++
				default:
					failing++
				}
			}
		}
	}
	return fmt.Sprintf("%d/%d clusters ready, %d deployments waiting, %d not ready", ready, desired, waiting, failing)
}
