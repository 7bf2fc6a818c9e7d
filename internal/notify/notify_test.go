package notify

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rancher/wrangler/v3/pkg/genericcondition"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// 412 clusters, 3 failing the same gate for the same cause with different addresses: one message,
// the failures in one group naming the first clusters; its key names the transition only.
func TestOneGroupedMessagePerTransition(t *testing.T) {
	var failures []fleet.RolloutFailure
	for i, c := range []string{"edge-7", "edge-2", "edge-9"} {
		failures = append(failures, fleet.RolloutFailure{Cluster: c, Stage: "canary", Gate: "web",
			Reason: fmt.Sprintf("GET http://10.0.%d.4:8080/healthz on %s: status 503 after 1%ds (pod web-5d8f9c7b6-x%d)", i, c, i, i)})
	}
	st := &fleet.RolloutStatus{Revision: "6d4b29e3086f", Phase: fleet.RolloutRolledBack, Stage: "canary",
		Stages:   []fleet.RolloutStageStatus{{Name: "canary", Clusters: 12, Updated: 12, Passing: 9, Failed: 3}, {Name: "rest", Clusters: 400}},
		Failures: failures}
	e, ok := OfRollout("app", st)
	if !ok || e.Reason != RolledBack || e.Severity != fleet.SeverityError || e.Source != "Bundle/app" {
		t.Fatalf("event: %+v", e)
	}
	if sig := Signature("b", "GET http://web/ on b: status 503"); sig != "GET http://web/ on <cluster>: status N" {
		t.Errorf("a cluster's name folded inside a word: %s", sig)
	}
	if len(e.Groups) != 1 || e.Groups[0].Count != 3 || strings.Join(e.Groups[0].Clusters, ",") != "edge-2,edge-7,edge-9" {
		t.Fatalf("groups: %+v", e.Groups)
	}
	if want := "web: GET http://N.N.N.N:N/healthz on <cluster>: status N after Ns (pod web-<hash>-xN)"; e.Groups[0].Signature != want {
		t.Errorf("signature %q, want %q", e.Groups[0].Signature, want)
	}
	if !strings.Contains(e.Summary, "412 clusters: 9 ready, 0 updating, 3 failed") {
		t.Errorf("summary: %s", e.Summary)
	}
	st.Failures = append(st.Failures, fleet.RolloutFailure{Cluster: "edge-1", Gate: "web", Reason: "GET http://10.0.9.4:8080/healthz on edge-1: status 503 after 2s (pod web-5d8f9c7b6-x9)"})
	if again, _ := OfRollout("app", st); again.Key != e.Key {
		t.Errorf("another failing cluster made another message: %s, %s", again.Key, e.Key)
	}
	seq := RolloutEvents("app", st)
	if len(seq) != 2 || seq[0].Reason != Halted || seq[1].Reason != RolledBack || seq[0].Key == seq[1].Key ||
		!strings.Contains(seq[0].Summary, "halted at stage canary") {
		t.Fatalf("a rollback is a halt, then the rollback: %+v", seq)
	}
	st.Phase = fleet.RolloutProgressing
	if next, _ := OfRollout("app", st); next.Key == e.Key || next.Reason != Started {
		t.Errorf("a new phase is not a new message: %+v", next)
	}
}

func TestGitRepoFailsAndRecovers(t *testing.T) {
	st := &fleet.GitRepoStatus{Commit: "abc"}
	st.Conditions = []genericcondition.GenericCondition{{Type: "GitPolling", Status: "False", Message: "fetching https://git.example/r: 503 after 3 tries"}}
	e, ok := OfGitRepo("repo", st, false)
	if !ok || e.Reason != Failed || !strings.Contains(e.Summary, "GitPolling: fetching") {
		t.Fatalf("%+v", e)
	}
	st.Conditions[0].Message = "fetching https://git.example/r: 503 after 4 tries"
	if e2, _ := OfGitRepo("repo", st, false); e2.Key != e.Key {
		t.Error("a retry count made another message")
	}
	if s, _ := CommitState(st, nil); s != CommitFailure {
		t.Errorf("commit state of a failing GitRepo: %s", s)
	}
	st.Conditions = []genericcondition.GenericCondition{{Type: "Ready", Status: "True"}}
	st.ReadyClusters, st.DesiredReadyClusters = 2, 2
	if e, ok := OfGitRepo("repo", st, true); !ok || e.Reason != Recovered {
		t.Errorf("recovered: %+v", e)
	}
	if _, ok := OfGitRepo("repo", st, false); ok {
		t.Error("a GitRepo ready all along says something")
	}
	if s, _ := CommitState(st, []*fleet.RolloutStatus{{Phase: fleet.RolloutProgressing}}); s != CommitPending {
		t.Errorf("commit state while a rollout goes on: %s", s)
	}
	if s, _ := CommitState(st, []*fleet.RolloutStatus{{Phase: fleet.RolloutComplete}}); s != CommitSuccess {
		t.Errorf("commit state once every rollout completed: %s", s)
	}
	if s, _ := CommitState(st, []*fleet.RolloutStatus{{Phase: fleet.RolloutComplete}, {Revision: "r", Phase: fleet.RolloutHalted}}); s != CommitFailure {
		t.Errorf("commit state of a halted rollout: %s", s)
	}
}

func TestWanted(t *testing.T) {
	info, failed := Event{Reason: Started, Severity: fleet.SeverityInfo}, Event{Reason: Halted, Severity: fleet.SeverityError}
	for _, tc := range []struct {
		sev    string
		events []string
		e      Event
		want   bool
	}{
		{"", nil, info, true}, {fleet.SeverityError, nil, info, false}, {fleet.SeverityError, nil, failed, true},
		{"", []string{Halted}, info, false}, {"", []string{Halted}, failed, true},
	} {
		if got := Wanted(tc.sev, tc.events, tc.e); got != tc.want {
			t.Errorf("Wanted(%q, %v, %s) = %v", tc.sev, tc.events, tc.e.Reason, got)
		}
	}
}
