package bundle

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// filledMemory remembers a plan and a render of b, the facts of c and a BundleDeployment created
// for it.
func filledMemory(t *testing.T, b *fleet.Bundle, c *fleet.Cluster, now time.Time) *memory {
	t.Helper()
	m := newMemory()
	m.plans.keep(b, m.plans.key(b, "s-1"), now, []planned{{namespace: "cluster-ns"}})
	m.facts.of(c)
	ci, match := target.ClusterInfo{Cluster: c}, &target.Match{Targets: []int{0}}
	fp := clusterFingerprint(clusterHash(c), ci, match)
	if _, err := checkRender(m, b, ci, match, "s-1", fp); err != nil {
		t.Fatal(err)
	}
	m.renders.written(b, c.UID, "s-1", fp, &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{UID: "bd1", Generation: 1}})
	m.created.add(&fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-ns", Name: b.Name}}, now)
	return m
}

// What each change makes the controller forget, and what it keeps.
func TestMemoryInvalidation(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b1", Generation: 1},
		Spec: fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}}}
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "c1", ResourceVersion: "1"}}
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{UID: "bd1", Generation: 1}}
	fp := clusterFingerprint(clusterHash(c), target.ClusterInfo{Cluster: c}, &target.Match{Targets: []int{0}})
	type kept struct{ plan, render, facts, created bool }
	look := func(m *memory) kept {
		_, _, plan := m.plans.get(b, m.plans.key(b, "s-1"), now)
		m.facts.mu.Lock()
		_, facts := m.facts.m[clusterKey{c.Namespace, c.Name}]
		m.facts.mu.Unlock()
		return kept{plan: plan, render: m.renders.current(b, c.UID, "s-1", fp, bd), facts: facts,
			created: m.created.get("cluster-ns/b", now) != nil}
	}
	if got := look(filledMemory(t, b, c, now)); got != (kept{true, true, true, true}) {
		t.Fatalf("a filled memory shows %+v", got)
	}
	for _, tc := range []struct {
		name   string
		change func(*memory)
		want   kept
	}{
		{"targeting changed", func(m *memory) { m.targetingChanged() }, kept{plan: false, render: true, facts: true, created: true}},
		{"cluster gone", func(m *memory) { m.clusterGone("ns/c") }, kept{plan: false, render: true, facts: false, created: true}},
		{"rules changed", func(m *memory) { m.rulesChanged([]*fleet.Bundle{b}) }, kept{plan: false, render: false, facts: true, created: true}},
		{"rules of other bundles changed", func(m *memory) {
			m.rulesChanged([]*fleet.Bundle{{ObjectMeta: metav1.ObjectMeta{UID: "other"}}})
		}, kept{plan: false, render: true, facts: true, created: true}},
		{"bundle gone", func(m *memory) { m.bundleGone(b) }, kept{plan: false, render: false, facts: true, created: true}},
		{"deployment seen", func(m *memory) { m.deploymentSeen("cluster-ns/b", now) }, kept{plan: true, render: true, facts: true, created: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := filledMemory(t, b, c, now)
			tc.change(m)
			if got := look(m); got != tc.want {
				t.Fatalf("kept %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A deleted Bundle's deployments the cache does not show yet are handed to its finalizer, and
// one the cache shows later, within finalizedTTL, is known as an orphan; other bundles' are not.
func TestFinalizedBundleOrphans(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	of := func(ns, bundle string) *fleet.BundleDeployment {
		return &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-" + ns, Name: bundle,
			Labels: map[string]string{fleet.BundleNamespaceLabel: ns, fleet.BundleLabel: bundle}}}
	}
	m := newMemory()
	m.created.add(of("ns", "gone"), now)
	m.created.add(of("ns", "kept"), now)
	m.created.add(of("other-ns", "gone"), now)
	if got := m.bundleFinalized("ns/gone", now); len(got) != 1 || got[0].Labels[fleet.BundleNamespaceLabel] != "ns" {
		t.Fatalf("created deployments handed to the finalizer: %v", got)
	}
	if !m.lateOrphan(of("ns", "gone"), now.Add(time.Minute)) {
		t.Error("a deployment of the finalized bundle shown later is not an orphan")
	}
	if m.lateOrphan(of("ns", "kept"), now) || m.lateOrphan(of("other-ns", "gone"), now) {
		t.Error("a deployment of another bundle is an orphan")
	}
	if m.lateOrphan(of("ns", "gone"), now.Add(finalizedTTL+time.Second)) {
		t.Error("the deletion is remembered past finalizedTTL")
	}
}

// What the watches saw of Clusters and groups, and the Bundles' resources sums, live in memory
// too: a changed fingerprint drops the plans, an unchanged one keeps them; a deleted Bundle's
// sum goes with it.
func TestMemorySeenAndSums(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b1", Generation: 1}}
	m := newMemory()
	kept := func() bool {
		_, _, ok := m.plans.get(b, m.plans.key(b, "s-1"), now)
		return ok
	}
	m.plans.keep(b, m.plans.key(b, "s-1"), now, []planned{{namespace: "cluster-ns"}})
	if !m.clusterSeen("ns/c", "fp1") || kept() {
		t.Fatal("a cluster seen for the first time re-plans")
	}
	m.plans.keep(b, m.plans.key(b, "s-1"), now, []planned{{namespace: "cluster-ns"}})
	if m.clusterSeen("ns/c", "fp1") || !kept() {
		t.Fatal("an unchanged cluster keeps the plan")
	}
	if !m.groupSeen("ns/g", "x") || m.groupSeen("ns/g", "x") {
		t.Fatal("group fingerprints")
	}
	m.clusterGone("ns/c")
	if !m.clusterSeen("ns/c", "fp1") {
		t.Fatal("a cluster seen again after it was gone counts as new")
	}
	calls := 0
	sum := func() string { calls++; return "sum" }
	if m.resourcesSum(b, sum) != "sum" || m.resourcesSum(b, sum) != "sum" || calls != 1 {
		t.Fatalf("summed %d times for one generation", calls)
	}
	m.bundleGone(b)
	if m.resourcesSum(b, sum); calls != 2 {
		t.Fatal("a deleted Bundle's sum is kept")
	}
}

// Contents read and found without SOPS files are not read again; other contents, a Bundle that
// has them, or a deleted Bundle are.
func TestMemoryNoSecrets(t *testing.T) {
	m := newMemory()
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", UID: "u1"}}
	if m.noSecretsIn(b, "s-1") {
		t.Fatal("unread contents known")
	}
	m.secretsRead(b, "s-1", true)
	if !m.noSecretsIn(b, "s-1") || m.noSecretsIn(b, "s-2") {
		t.Fatal("read contents not known, or other contents known")
	}
	m.secretsRead(b, "s-2", false)
	if m.noSecretsIn(b, "s-1") || m.noSecretsIn(b, "s-2") {
		t.Fatal("contents with SOPS files known as without")
	}
	m.secretsRead(b, "s-3", true)
	m.bundleGone(b)
	if m.noSecretsIn(b, "s-3") {
		t.Fatal("kept past the Bundle's deletion")
	}
}

func TestBackOnlineOnceAfterCountedOffline(t *testing.T) {
	m := newMemory()
	if m.backOnline("ns/a") {
		t.Fatal("a cluster never counted Offline is not back online")
	}
	m.countedOffline("ns/a")
	m.countedOffline("ns/a")
	if !m.backOnline("ns/a") {
		t.Fatal("a cluster a roll-up counted Offline is back online at its next check-in")
	}
	if m.backOnline("ns/a") {
		t.Fatal("back online once, not at every check-in after")
	}
	m.countedOffline("ns/b")
	m.clusterGone("ns/b")
	if m.backOnline("ns/b") {
		t.Fatal("a deleted cluster's mark goes with it")
	}
}
