package bundle

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestPlanCache(t *testing.T) {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b1", Generation: 1, Labels: map[string]string{"a": "1"}}}
	other := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "o", Namespace: "ns", UID: "o1", Generation: 1}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	plan := []planned{{namespace: "cluster-ns"}}
	c := newPlanCache()

	key := c.key(b, "s-1")
	if _, _, ok := c.get(b, key, t0); ok {
		t.Fatal("nothing kept yet")
	}
	c.keep(b, key, t0, plan)
	got, at, ok := c.get(b, c.key(b, "s-1"), t0.Add(time.Second))
	if !ok || len(got) != 1 || got[0].namespace != "cluster-ns" || !at.Equal(t0) {
		t.Fatalf("kept plan not returned: %v %v %v", got, at, ok)
	}
	if _, _, ok := c.get(other, c.key(other, "s-1"), t0); ok {
		t.Fatal("another bundle's plan returned")
	}
	if _, _, ok := c.get(b, key, t0.Add(planTTL)); ok {
		t.Fatal("a plan older than planTTL reused")
	}
	if _, _, ok := c.get(b, c.key(b, "s-2"), t0); ok {
		t.Fatal("reused for another content")
	}
	b.Generation = 2
	if _, _, ok := c.get(b, c.key(b, "s-1"), t0); ok {
		t.Fatal("reused for another generation")
	}
	b.Generation = 1
	b.Labels = map[string]string{"a": "2"}
	if _, _, ok := c.get(b, c.key(b, "s-1"), t0); ok {
		t.Fatal("reused for other labels")
	}
	b.Labels = map[string]string{"a": "1"}
	if _, _, ok := c.get(b, c.key(b, "s-1"), t0); !ok {
		t.Fatal("the same inputs reuse it")
	}

	// Targeting input changed: nothing made before is reused, even under the old key.
	c.changed()
	if _, _, ok := c.get(b, key, t0); ok {
		t.Fatal("reused after a targeting change (old key)")
	}
	if _, _, ok := c.get(b, c.key(b, "s-1"), t0); ok {
		t.Fatal("reused after a targeting change")
	}
	// A plan whose making overlapped a change is not kept.
	stale := c.key(b, "s-1")
	c.changed()
	c.keep(b, stale, t0, plan)
	if _, _, ok := c.get(b, stale, t0); ok {
		t.Fatal("a plan made across a change was kept")
	}
	if _, _, ok := c.get(b, c.key(b, "s-1"), t0); ok {
		t.Fatal("a plan made across a change was kept")
	}

	key = c.key(b, "s-1")
	c.keep(b, key, t0, plan)
	c.drop(b)
	if _, _, ok := c.get(b, key, t0); ok {
		t.Fatal("dropped plan returned")
	}
}

func TestPlanCacheExpires(t *testing.T) {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b1", Generation: 1}}
	o := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "o", Namespace: "ns", UID: "o1", Generation: 1}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newPlanCache()
	c.keep(b, c.key(b, "s"), t0, []planned{{}})
	c.keep(o, c.key(o, "s"), t0.Add(10*time.Second), []planned{{}})
	c.expire(t0.Add(planTTL))
	if _, ok := c.m[b.UID]; ok {
		t.Fatal("an expired plan is kept")
	}
	if _, ok := c.m[o.UID]; !ok {
		t.Fatal("a plan within planTTL was dropped")
	}
}
