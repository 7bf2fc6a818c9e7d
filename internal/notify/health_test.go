package notify

import (
	"strings"
	"testing"
	"time"

	"github.com/rancher/wrangler/v3/pkg/genericcondition"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Drift: one Drifted per set of drifted deployments, grouped by what drifted; DriftCorrected
// only after a Drifted was sent, a digest's key counting as its state's.
func TestDriftIsToldOncePerSetAndCorrectedOnlyAfterIt(t *testing.T) {
	s := fleet.BundleSummary{Ready: 97, Modified: 3, DesiredReady: 100}
	for _, c := range []string{"edge-3", "edge-1", "edge-2"} {
		s.NonReadyResources = append(s.NonReadyResources, fleet.NonReadyResource{Name: c, State: fleet.Modified,
			Message: "configmap.v1 default/settings modified {\"data\":{\"replicas\":\"" + c[5:] + "\"}}"})
	}
	s.NonReadyResources = append(s.NonReadyResources, fleet.NonReadyResource{Name: "edge-9", State: fleet.NotReady, Message: "not ready"})
	e, ok := Drift("GitRepo/shop", s, "")
	if !ok || e.Reason != Drifted || e.Source != "GitRepo/shop"+DriftSuffix || !e.Folds || e.Severity != fleet.SeverityError {
		t.Fatalf("event: %+v", e)
	}
	if len(e.Groups) != 1 || e.Groups[0].Count != 3 || strings.Join(e.Groups[0].Clusters, ",") != "edge-1,edge-2,edge-3" {
		t.Fatalf("groups: %+v", e.Groups)
	}
	if !strings.Contains(e.Summary, "GitRepo shop: 3 of 100 deployments drifted") {
		t.Errorf("summary: %s", e.Summary)
	}
	again, _ := Drift("GitRepo/shop", s, e.Key)
	if again.Key != e.Key {
		t.Errorf("the same drift has a new key: %s, %s", again.Key, e.Key)
	}
	s.NonReadyResources[0].Name = "edge-4"
	if other, _ := Drift("GitRepo/shop", s, e.Key); other.Key == e.Key {
		t.Errorf("another set of drifted deployments has the same key %s", e.Key)
	}
	clean := fleet.BundleSummary{Ready: 100, DesiredReady: 100}
	if _, ok := Drift("GitRepo/shop", clean, ""); ok {
		t.Error("a source that never drifted is told corrected")
	}
	// After a Drifted, or a DriftCorrected (a Drifted held back since is corrected): the same.
	for _, last := range []string{e.Key, e.Key + DigestMark + "1700000000", "drift/" + DriftCorrected} {
		c, ok := Drift("GitRepo/shop", clean, last)
		if !ok || c.Reason != DriftCorrected || c.Severity != fleet.SeverityInfo || c.Key != "drift/"+DriftCorrected {
			t.Errorf("after %s: %+v", last, c)
		}
	}
}

// Late: nothing before the deadline (but when it falls), one NotReady per stretch of not being
// ready after it, Ready once all are; drifted deployments are Drift's, not Late's.
func TestNotReadyIsToldPastTheDeadlineOnly(t *testing.T) {
	since := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	cond := &genericcondition.GenericCondition{Type: "Ready", Status: "False", LastTransitionTime: since.Format(time.RFC3339)}
	s := fleet.BundleSummary{Ready: 8, NotReady: 2, DesiredReady: 10, NonReadyResources: []fleet.NonReadyResource{
		{Name: "edge-1", State: fleet.NotReady, Message: "deployment.apps default/web: 0/3 ready"},
		{Name: "edge-2", State: fleet.NotReady, Message: "deployment.apps default/web: 1/3 ready"}}}
	if _, ok, wake := Late("Bundle/web", s, cond, 10*time.Minute, since.Add(4*time.Minute), ""); ok || wake != 6*time.Minute {
		t.Fatalf("before the deadline: ok %v, wake %s", ok, wake)
	}
	e, ok, _ := Late("Bundle/web", s, cond, 10*time.Minute, since.Add(11*time.Minute), "")
	if !ok || e.Reason != NotReady || e.Source != "Bundle/web"+ReadySuffix || len(e.Groups) != 1 || e.Groups[0].Count != 2 {
		t.Fatalf("past it: %+v", e)
	}
	if later, _, _ := Late("Bundle/web", s, cond, 10*time.Minute, since.Add(time.Hour), e.Key); later.Key != e.Key {
		t.Errorf("one stretch, two keys: %s, %s", e.Key, later.Key)
	}
	drifted := fleet.BundleSummary{Ready: 8, Modified: 1, DesiredReady: 10} // and one offline
	if _, ok, _ := Late("Bundle/web", drifted, cond, 10*time.Minute, since.Add(time.Hour), ""); ok {
		t.Error("a drifted deployment or an offline cluster is told not ready")
	}
	ready := &genericcondition.GenericCondition{Type: "Ready", Status: "True", LastTransitionTime: since.Add(time.Hour).Format(time.RFC3339)}
	all := fleet.BundleSummary{Ready: 10, DesiredReady: 10}
	r, ok, _ := Late("Bundle/web", all, ready, 10*time.Minute, since.Add(time.Hour), e.Key)
	if !ok || r.Reason != Ready {
		t.Errorf("ready again: %+v", r)
	}
	if still, _, _ := Late("Bundle/web", all, ready, 10*time.Minute, since.Add(2*time.Hour), r.Key); still.Key != r.Key {
		t.Errorf("ready, told ready: a new key %s after %s", still.Key, r.Key)
	}
	if _, ok, _ := Late("Bundle/web", all, ready, 10*time.Minute, since.Add(time.Hour), ""); ok {
		t.Error("ready, never told not ready, told ready")
	}
}

// OfClusters: which clusters went offline, once per set; Online after that only.
func TestOfflineClustersAreToldTogether(t *testing.T) {
	var cs []*fleet.Cluster
	for _, n := range []string{"e5", "e1", "e4", "e2", "e3"} {
		c := &fleet.Cluster{}
		c.Name = n
		if n != "e3" {
			c.Status.Display.State = Offline
		}
		cs = append(cs, c)
	}
	e, ok := OfClusters(cs, "")
	if !ok || e.Reason != Offline || e.Summary != "4 of 5 clusters offline: e1, e2, e4 and 1 more" || e.Groups[0].Count != 4 {
		t.Fatalf("offline: %+v", e)
	}
	for _, c := range cs {
		c.Status.Display.State = ""
	}
	if _, ok := OfClusters(cs, ""); ok {
		t.Error("all online, never told offline, told online")
	}
	if o, ok := OfClusters(cs, e.Key); !ok || o.Reason != Online {
		t.Errorf("back: %+v", o)
	}
}

func TestDigestKeepsItsStatesKey(t *testing.T) {
	e := Event{Key: "drift/Drifted/3/abc", Summary: "GitRepo shop: 3 of 100 deployments drifted"}
	d := Digest(e, map[string]int{Drifted: 2, DriftCorrected: 2}, time.Unix(1700000000, 0))
	if BaseKey(d.Key) != e.Key || d.Key == e.Key {
		t.Errorf("key %s", d.Key)
	}
	if d.Summary != "4 changes held back (DriftCorrected 2, Drifted 2); now: "+e.Summary {
		t.Errorf("summary %s", d.Summary)
	}
}
