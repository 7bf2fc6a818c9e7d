package rollout

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func waiting() *fleet.Rollout {
	return &fleet.Rollout{ObjectMeta: metav1.ObjectMeta{Name: "shop-web", Namespace: "fleet-default"},
		Status: fleet.RolloutStatus{Revision: "abc", Phase: fleet.RolloutWaitingForApproval, Stage: "europe", Policy: "careful",
			Message: "stage europe waits for approval (fleet rollout approve)",
			Stages: []fleet.RolloutStageStatus{{Name: "canary", Clusters: 1, Updated: 1, Passing: 1, State: "Complete"},
				{Name: "europe", Clusters: 4, State: "WaitingForApproval"}},
			Failures: []fleet.RolloutFailure{{Cluster: "edge-2", Gate: "web", Reason: "GET http://web/: status 500"}}}}
}

func TestApproveTheWaitingStage(t *testing.T) {
	r := waiting()
	if _, err := Approve("")(r); err != nil || len(r.Spec.Approved) != 1 || r.Spec.Approved[0] != "abc/europe" {
		t.Fatalf("%v %v", err, r.Spec.Approved)
	}
	if _, err := Approve("")(r); err != nil || len(r.Spec.Approved) != 1 {
		t.Fatalf("approving twice adds nothing: %v", r.Spec.Approved)
	}
	if _, err := Approve("nowhere")(r); err == nil {
		t.Fatal("an unknown stage is refused")
	}
	r.Status.Phase = fleet.RolloutProgressing
	if _, err := Approve("")(r); err == nil || !strings.Contains(err.Error(), "waits for no approval") {
		t.Fatalf("nothing waits: %v", err)
	}
}

func TestAbortAndRetry(t *testing.T) {
	r := waiting()
	if _, err := Retry(r); err == nil {
		t.Fatal("a rollout in progress is not retried")
	}
	if _, err := Abort(r); err != nil || r.Spec.Abort != "abc" {
		t.Fatalf("%v %q", err, r.Spec.Abort)
	}
	r.Status.Phase, r.Status.Retried = fleet.RolloutAborted, 2
	if _, err := Abort(r); err == nil {
		t.Fatal("an aborted rollout is not aborted again")
	}
	if _, err := Retry(r); err != nil || r.Spec.Retry != 3 || r.Spec.Abort != "" {
		t.Fatalf("%v retry %d abort %q", err, r.Spec.Retry, r.Spec.Abort)
	}
}

func TestPrint(t *testing.T) {
	var out bytes.Buffer
	Print(&out, []fleet.Rollout{*waiting()})
	for _, want := range []string{"Rollout fleet-default/shop-web  policy careful  revision abc  WaitingForApproval  stage europe",
		"europe  4         0        0        0       WaitingForApproval", "failed: cluster edge-2, gate web: GET http://web/: status 500"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out.String())
		}
	}
}

// A failure's reason and the Rollout's message are what agents and tenants wrote: nothing of
// them acts on the terminal.
func TestPrintStripsControlCharacters(t *testing.T) {
	r := waiting()
	r.Status.Message = "halted \x1b[2J\x1b]0;title\x07\u202eevil"
	r.Status.Failures[0].Reason = "GET http://web/: status 500\x1b[1A\x1b[2Kall passed"
	var out bytes.Buffer
	Print(&out, []fleet.Rollout{*r})
	for _, bad := range []string{"\x1b", "\x07", "\u202e"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("output holds %q:\n%q", bad, out.String())
		}
	}
	if !strings.Contains(out.String(), "halted [2J]0;titleevil") {
		t.Errorf("the message's printable text is shown: %q", out.String())
	}
}
