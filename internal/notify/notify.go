// Package notify decides what an Alert says: from a Rollout's or a GitRepo's status, the one
// message its current transition is worth (keyed, so that it is sent once), with the clusters
// counted by state and their failures grouped by cause. It is pure: the controller
// (internal/controller/notify) reads the objects and delivers.
package notify

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/rancher/wrangler/v3/pkg/condition"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Event reasons.
const (
	Started            = "Started"
	Soaking            = "Soaking"
	WaitingForApproval = "WaitingForApproval"
	Paused             = "Paused"
	Halted             = "Halted"
	RolledBack         = "RolledBack"
	Aborted            = "Aborted"
	Complete           = "Complete"
	Invalid            = "Invalid"
	// Failed and Recovered are a GitRepo's: it cannot clone, apply or stalls; it is ready again.
	Failed    = "Failed"
	Recovered = "Recovered"
)

// Commit states, as the forges name them.
const (
	CommitPending = "pending"
	CommitSuccess = "success"
	CommitFailure = "failure"
)

// TestReason is a test message's (`fleet notify test`).
const TestReason = "Test"

// Test is the test message the Alert's request nonce asks for.
func Test(alert, nonce string) Event {
	return Event{Source: "Alert/" + alert + "#test", Key: "test/" + nonce, Reason: TestReason, Severity: fleet.SeverityInfo,
		Summary: "a test message of Alert " + alert + " (fleet notify test, " + nonce + ")", Counts: map[string]int{}}
}

// MaxNamed bounds the cluster names a failure group lists.
const MaxNamed = 3

// Event is one transition of a source worth a message.
type Event struct {
	// Source is "Kind/name" in the Alert's namespace.
	Source string
	// Key names the transition: a message of the same key is the same message.
	Key      string
	Reason   string
	Severity string
	// Summary is the message's one line ("app rolled back at stage canary: 3 of 412 clusters
	// failed").
	Summary string
	// Counts are the clusters by state (Ready, Updating, Failed, Pending).
	Counts map[string]int
	// Groups are the failures grouped by cause.
	Groups []Group
	// CommitState (pending, success, failure), for a commit check: of Commit, in the repository
	// Repo, under the check's name Context.
	CommitState, Commit, Repo, Context string
	// Folds: a repeat of its reason for its source within the Alert's digest window is held
	// and sent in a digest (health and GitRepo events; never a rollout's or a commit's).
	Folds bool
}

// Group is the clusters that failed for one cause.
type Group struct {
	// Signature is the cause with numbers, hashes and the cluster's name folded.
	Signature string `json:"signature"`
	Count     int    `json:"count"`
	// Clusters are the first MaxNamed of them, in name order.
	Clusters []string `json:"clusters"`
}

// rolloutReasons are the events of the rollout phases.
var rolloutReasons = map[string]string{
	fleet.RolloutProgressing: Started, fleet.RolloutSoaking: Soaking, fleet.RolloutWaitingForApproval: WaitingForApproval,
	fleet.RolloutPaused: Paused, fleet.RolloutHalted: Halted, fleet.RolloutRolledBack: RolledBack,
	fleet.RolloutAborted: Aborted, fleet.RolloutComplete: Complete, fleet.RolloutInvalid: Invalid,
}

// RolloutEvents are the events of a Bundle's rollout as its Rollout's status shows it now, in
// the order they happened: a rollback is a halt first (at its stage, with the failures), then
// the rollback itself; any other phase is one event (OfRollout). Empty when it has none.
func RolloutEvents(bundle string, st *fleet.RolloutStatus) []Event {
	e, ok := OfRollout(bundle, st)
	if !ok {
		return nil
	}
	if e.Reason != RolledBack || st.Stage == "" {
		return []Event{e}
	}
	halted := *st
	halted.Phase = fleet.RolloutHalted
	h, _ := OfRollout(bundle, &halted)
	e.Summary = fmt.Sprintf("%s revision %s rolled back: the clusters that got it return to revision %s", bundle, st.Revision, cmp.Or(st.PassedRevision, "(none kept)"))
	return []Event{h, e}
}

// OfRollout is the event of a Bundle's rollout as its Rollout's status shows it now; false when
// it has none (no revision yet).
func OfRollout(bundle string, st *fleet.RolloutStatus) (Event, bool) {
	reason := rolloutReasons[st.Phase]
	if st.Revision == "" || reason == "" {
		return Event{}, false
	}
	e := Event{Source: "Bundle/" + bundle, Reason: reason, Severity: fleet.SeverityInfo, Counts: counts(st), Groups: Grouped(st.Failures)}
	stage := ""
	switch reason {
	case Started, Soaking, WaitingForApproval, Halted:
		stage = st.Stage
	}
	e.Key = fmt.Sprintf("rollout/%s/%s/%s", st.Revision, reason, stage)
	switch reason {
	case Halted, RolledBack, Aborted, Invalid:
		e.Severity = fleet.SeverityError
	}
	e.Summary = rolloutSummary(bundle, reason, st, e.Counts)
	return e, true
}

func rolloutSummary(bundle, reason string, st *fleet.RolloutStatus, c map[string]int) string {
	total := c["Ready"] + c["Updating"] + c["Failed"] + c["Pending"]
	what := map[string]string{
		Started: "stage " + st.Stage + " started", Soaking: "stage " + st.Stage + " soaking",
		WaitingForApproval: "stage " + st.Stage + " waiting for approval", Paused: "paused",
		Halted: "halted at stage " + st.Stage, RolledBack: "rolled back", Aborted: "aborted, rolled back",
		Complete: "complete", Invalid: "invalid policy",
	}[reason]
	s := fmt.Sprintf("%s revision %s %s: %d clusters: %d ready, %d updating, %d failed", bundle, st.Revision, what, total, c["Ready"], c["Updating"], c["Failed"])
	if len(st.Failures) > 0 {
		g := Grouped(st.Failures)[0]
		s += fmt.Sprintf(" (%s: %d)", g.Signature, g.Count)
	}
	if st.Message != "" && reason != Complete {
		s += "; " + st.Message
	}
	return s
}

// counts are the rollout's clusters by state, from its stages' counts.
func counts(st *fleet.RolloutStatus) map[string]int {
	c := map[string]int{}
	for _, s := range st.Stages {
		c["Ready"] += s.Passing
		c["Failed"] += s.Failed
		c["Updating"] += max(0, s.Updated-s.Passing-s.Failed)
		c["Pending"] += max(0, s.Clusters-s.Updated)
	}
	return c
}

var (
	hashes  = regexp.MustCompile(`\b[0-9a-f]{7,}\b`)
	numbers = regexp.MustCompile(`[0-9]+`)
)

// Signature folds what differs between clusters failing for one cause: the cluster's name,
// hashes and numbers (addresses, ports, counts, durations).
func Signature(cluster, reason string) string {
	s := reason
	if cluster != "" {
		s = regexp.MustCompile(`\b`+regexp.QuoteMeta(cluster)+`\b`).ReplaceAllString(s, "<cluster>")
	}
	s = hashes.ReplaceAllString(s, "<hash>")
	return numbers.ReplaceAllString(s, "N")
}

// Grouped groups failures by gate and signature, the largest group first.
func Grouped(failures []fleet.RolloutFailure) []Group {
	by := map[string]*Group{}
	for _, f := range failures {
		sig := f.Gate
		if f.Reason != "" {
			sig += ": " + Signature(f.Cluster, f.Reason)
		}
		g := by[sig]
		if g == nil {
			g = &Group{Signature: sig}
			by[sig] = g
		}
		g.Count++
		g.Clusters = append(g.Clusters, f.Cluster)
	}
	out := make([]Group, 0, len(by))
	for _, g := range by {
		sort.Strings(g.Clusters)
		g.Clusters = g.Clusters[:min(len(g.Clusters), MaxNamed)]
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Signature < out[j].Signature
	})
	return out
}

// OfGitRepo is the event of a GitRepo as its status shows it now: Failed while it cannot clone
// or apply or stalls (per commit and cause), Recovered once ready again after that; false when
// neither.
func OfGitRepo(name string, st *fleet.GitRepoStatus, failedBefore bool) (Event, bool) {
	e := Event{Source: "GitRepo/" + name, Folds: true, Counts: map[string]int{"Ready": st.ReadyClusters, "Desired": st.DesiredReadyClusters}}
	if cond, msg, failed := failure(st); failed {
		e.Reason, e.Severity = Failed, fleet.SeverityError
		e.Key = fmt.Sprintf("gitrepo/%s/%s/%s/%s", st.Commit, Failed, cond, Signature("", msg))
		e.Summary = fmt.Sprintf("GitRepo %s at commit %s: %s: %s", name, short(st.Commit), cond, msg)
		return e, true
	}
	ready := fleet.FindCondition(st.Conditions, condType("Ready"))
	if failedBefore && ready != nil && ready.Status == "True" {
		e.Reason, e.Severity = Recovered, fleet.SeverityInfo
		e.Key = fmt.Sprintf("gitrepo/%s/%s", st.Commit, Recovered)
		e.Summary = fmt.Sprintf("GitRepo %s at commit %s is ready again: %d of %d clusters ready", name, short(st.Commit), st.ReadyClusters, st.DesiredReadyClusters)
		return e, true
	}
	return Event{}, false
}

// failure is the condition that says a GitRepo cannot go on (Stalled, or GitPolling or Accepted
// False) and its message.
func failure(st *fleet.GitRepoStatus) (cond, msg string, failed bool) {
	for _, t := range []string{"Stalled", "GitPolling", "Accepted"} {
		c := fleet.FindCondition(st.Conditions, condType(t))
		if c != nil && ((t == "Stalled" && c.Status == "True") || (t != "Stalled" && c.Status == "False")) {
			return t, c.Message, true
		}
	}
	return "", "", false
}

// CommitState is the commit check a GitRepo's commit earns: failure once a rollout of its
// Bundles halted or rolled back, or the GitRepo failed; success once every cluster is ready and
// every rollout complete; pending otherwise. rollouts are its Bundles' Rollouts' statuses.
func CommitState(st *fleet.GitRepoStatus, rollouts []*fleet.RolloutStatus) (state, description string) {
	if cond, msg, failed := failure(st); failed {
		return CommitFailure, cond + ": " + msg
	}
	complete := true
	for _, r := range rollouts {
		switch r.Phase {
		case fleet.RolloutHalted, fleet.RolloutRolledBack, fleet.RolloutAborted, fleet.RolloutInvalid:
			e, _ := OfRollout("rollout", r)
			return CommitFailure, e.Summary
		case fleet.RolloutComplete:
		default:
			complete = false
		}
	}
	ready := fleet.FindCondition(st.Conditions, condType("Ready"))
	if complete && ready != nil && ready.Status == "True" && st.ReadyClusters == st.DesiredReadyClusters {
		return CommitSuccess, fmt.Sprintf("%d of %d clusters ready", st.ReadyClusters, st.DesiredReadyClusters)
	}
	return CommitPending, fmt.Sprintf("rolling out: %d of %d clusters ready", st.ReadyClusters, st.DesiredReadyClusters)
}

// Wanted says whether an Alert of severity and events sends e.
func Wanted(severity string, events []string, e Event) bool {
	if severity == fleet.SeverityError && e.Severity != fleet.SeverityError {
		return false
	}
	return len(events) == 0 || slices.Contains(events, e.Reason)
}

func condType(t string) condition.Cond { return condition.Cond(t) }

func short(commit string) string { return commit[:min(len(commit), 12)] }
