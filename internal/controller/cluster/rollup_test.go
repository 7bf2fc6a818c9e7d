package cluster

import (
	"testing"
	"time"

	"github.com/rancher/wrangler/v3/pkg/generic"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// listCounter is a BundleDeployment cache holding one namespace's deployments, counting lists.
type listCounter struct {
	bds   []*fleet.BundleDeployment
	lists int
}

func (l *listCounter) Get(string, string) (*fleet.BundleDeployment, error) { return nil, nil }
func (l *listCounter) List(string, labels.Selector) ([]*fleet.BundleDeployment, error) {
	l.lists++
	out := make([]*fleet.BundleDeployment, len(l.bds))
	for i, bd := range l.bds {
		out[i] = bd.DeepCopy()
	}
	return out, nil
}
func (l *listCounter) AddIndexer(string, generic.Indexer[*fleet.BundleDeployment]) {}
func (l *listCounter) GetByIndex(string, string) ([]*fleet.BundleDeployment, error) {
	return nil, nil
}

func TestRollUpOnlyWhenItsInputsChange(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	interval := time.Minute
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{
		fleet.BundleNamespaceLabel: "fleet-default", fleet.BundleLabel: "app"}}}
	bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID = "s-1", "s-1"
	cache := &listCounter{bds: []*fleet.BundleDeployment{bd}}
	h := &handler{bdCache: cache, mem: &memory{}, now: func() time.Time { return now }, interval: func() time.Duration { return interval }}
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "one"}}
	c.Status.Agent.LastSeen = metav1.NewTime(now)
	const ns = "cluster-ns"

	// rollUp runs the roll-up as the status handler does, then (like the generated handler and
	// the cache after it) keeps what it returned as the Cluster's status. It reports whether the
	// deployments were listed.
	rollUp := func(step string) bool {
		t.Helper()
		before := cache.lists
		status, err := h.rollUp(c, ns, *c.Status.DeepCopy())
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		c.Status = status
		return cache.lists > before
	}
	checkIn := func(at time.Time) {
		now = at
		c.Status.Agent.LastSeen = metav1.NewTime(at)
	}

	if !rollUp("first roll-up") || c.Status.Display.State != string(fleet.WaitApplied) {
		t.Fatalf("first roll-up: listed and state %q, want %s", c.Status.Display.State, fleet.WaitApplied)
	}
	if !rollUp("the write's own event") {
		t.Fatal("the event of the status just written: want one more roll-up, to find nothing to write")
	}
	checkIn(now.Add(interval))
	if rollUp("a check-in") {
		t.Error("a check-in changed nothing the roll-up reads: want no list")
	}
	if got := c.Status.Agent.LastSeen.Time; !got.Equal(now) {
		t.Errorf("the check-in's lastSeen: got %v, want %v kept", got, now)
	}

	// The agent reports the deployment Ready: its event brings the roll-up back.
	ready := bd.DeepCopy()
	ready.Status.AppliedDeploymentID, ready.Status.Ready, ready.Status.NonModified = "s-1", true, true
	cache.bds[0] = ready
	h.mem.changed("fleet-default/one")
	if !rollUp("the deployment's report") || c.Status.Display.State != "" || c.Status.Display.ReadyBundles != "1/1" {
		t.Fatalf("after the report: state %q, ready %q; want \"\" and 1/1", c.Status.Display.State, c.Status.Display.ReadyBundles)
	}
	rollUp("the write's own event")
	checkIn(now.Add(interval))
	if rollUp("another check-in") {
		t.Error("a check-in after the report: want no list")
	}

	// The agent stops checking in: once it counts as Offline the roll-up shows it.
	now = now.Add(4 * interval)
	if !rollUp("silence") || c.Status.Display.State != StateOffline {
		t.Fatalf("after silence: state %q, want %s", c.Status.Display.State, StateOffline)
	}
	rollUp("the write's own event")
	checkIn(now)
	if !rollUp("back") || c.Status.Display.State != "" {
		t.Fatalf("checking in again: state %q, want \"\"", c.Status.Display.State)
	}
	rollUp("the write's own event")

	// Someone else rewrites what the roll-up shows: the next event puts it back.
	c.Status.Display.ReadyBundles = "0/9"
	if !rollUp("a foreign write") || c.Status.Display.ReadyBundles != "1/1" {
		t.Fatalf("after a foreign write: ready %q, want 1/1", c.Status.Display.ReadyBundles)
	}

	// A new check-in interval can change the agent's phase: rolled up again.
	rollUp("the write's own event")
	interval = 2 * time.Minute
	if !rollUp("a new interval") {
		t.Error("a new check-in interval: want a roll-up")
	}

	// A deleted Cluster forgets both; a deployment event for it is not counted.
	if _, err := h.OnChange("fleet-default/one", nil); err != nil {
		t.Fatal(err)
	}
	h.mem.changed("fleet-default/one")
	if _, ok := h.mem.events.Load("fleet-default/one"); ok {
		t.Error("a deleted cluster's deployment event: want no count kept")
	}
	if _, ok := h.mem.rollups.Load("fleet-default/one"); ok {
		t.Error("a deleted cluster: want its roll-up forgotten")
	}
}

// A Cluster counts the GitRepos and HelmOps deploying to it, and those whose deployments there
// are all Ready.
func TestRollUpCountsGitReposAndHelmOps(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	deployment := func(name string, ready bool, labels map[string]string) *fleet.BundleDeployment {
		bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			fleet.BundleNamespaceLabel: "fleet-default", fleet.BundleLabel: name}}}
		for k, v := range labels {
			bd.Labels[k] = v
		}
		bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID = "s-1", "s-1"
		if ready {
			bd.Status.AppliedDeploymentID, bd.Status.Ready, bd.Status.NonModified = "s-1", true, true
		}
		return bd
	}
	cache := &listCounter{bds: []*fleet.BundleDeployment{
		deployment("repo-a", true, map[string]string{fleet.RepoLabel: "repo"}),
		deployment("repo-b", false, map[string]string{fleet.RepoLabel: "repo"}),
		deployment("web", true, map[string]string{fleet.HelmNameLabel: "web"}),
		deployment("db", false, map[string]string{fleet.HelmNameLabel: "db"}),
	}}
	h := &handler{bdCache: cache, mem: &memory{}, now: func() time.Time { return now }, interval: func() time.Duration { return time.Minute }}
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "one"}}
	c.Status.Agent.LastSeen = metav1.NewTime(now)
	status, err := h.rollUp(c, "cluster-ns", c.Status)
	if err != nil {
		t.Fatal(err)
	}
	if status.DesiredReadyGitRepos != 1 || status.ReadyGitRepos != 0 || status.DesiredReadyHelmOps != 2 || status.ReadyHelmOps != 1 {
		t.Errorf("gitrepos %d/%d, helmops %d/%d; want 0/1 and 1/2", status.ReadyGitRepos, status.DesiredReadyGitRepos,
			status.ReadyHelmOps, status.DesiredReadyHelmOps)
	}
}
