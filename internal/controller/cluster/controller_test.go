package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestDelay(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	h := &handler{now: func() time.Time { return now }, mem: &memory{clusters: &atomic.Int64{}}}
	h.mem.clusters.Store(smallInstallation + 1)
	h.mem.written.Store("quiet/long-ago", now.Add(-time.Minute))
	h.mem.written.Store("busy/just-now", now.Add(-2*time.Second))
	h.mem.written.Store("busy/a-while", now.Add(-9800*time.Millisecond))
	for _, c := range []struct {
		key  string
		base time.Duration
		want time.Duration
	}{
		// Never written, or not for busyDelay: the base delay.
		{"new/cluster", statusDelay, statusDelay},
		{"new/cluster", specDelay, specDelay},
		{"quiet/long-ago", statusDelay, statusDelay},
		{"quiet/long-ago", specDelay, specDelay},
		// Written 2 s ago: a report waits out the rest of busyReportDelay, a new deployment
		// busyDelay.
		{"busy/just-now", statusDelay, 8 * time.Second},
		{"busy/just-now", specDelay, busyDelay},
		// Written almost busyReportDelay ago: never less than the base.
		{"busy/a-while", statusDelay, statusDelay},
	} {
		if got := h.delay(c.key, c.base); got != c.want {
			t.Errorf("delay(%s, %s) = %s, want %s", c.key, c.base, got, c.want)
		}
	}
}

// On a small installation every roll-up follows its cluster's BundleDeployments within
// statusDelay, however recently the cluster's status was written.
func TestDelayOnASmallInstallation(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	h := &handler{now: func() time.Time { return now }, mem: &memory{clusters: &atomic.Int64{}}}
	h.mem.clusters.Store(3)
	h.mem.written.Store("busy/just-now", now.Add(-2*time.Second))
	for _, base := range []time.Duration{statusDelay, specDelay} {
		for _, key := range []string{"new/cluster", "busy/just-now"} {
			if got := h.delay(key, base); got != statusDelay {
				t.Errorf("delay(%s, %s) = %s with 3 clusters, want %s", key, base, got, statusDelay)
			}
		}
	}
	h.mem.clusters.Store(smallInstallation + 1)
	if got := h.delay("busy/just-now", specDelay); got != busyDelay {
		t.Errorf("delay = %s with %d clusters, want %s", got, smallInstallation+1, busyDelay)
	}
}

func TestRecheckIn(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	interval := 15 * time.Minute
	h := &handler{now: func() time.Time { return now }, interval: func() time.Duration { return interval }}
	seen := func(ago time.Duration) *fleet.Cluster {
		c := &fleet.Cluster{}
		if ago >= 0 {
			c.Status.Agent.LastSeen = metav1.NewTime(now.Add(-ago))
		}
		return c
	}
	for _, tc := range []struct {
		name string
		c    *fleet.Cluster
		want time.Duration
		ok   bool
	}{
		{"never checked in", seen(-1), 0, false},
		{"just checked in", seen(0), 45*time.Minute + time.Second, true},
		{"one interval ago", seen(interval), 30*time.Minute + time.Second, true},
		{"about to turn Offline", seen(45*time.Minute - time.Second), 2 * time.Second, true},
		{"three intervals ago to the second: not Offline yet", seen(45 * time.Minute), time.Second, true},
		{"Offline since a second ago", seen(45*time.Minute + time.Second), 0, false},
		{"Offline for an hour", seen(105 * time.Minute), 0, false},
	} {
		got, ok := h.recheckIn(tc.c)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%s: recheckIn = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
		// Whenever a recheck is due, the Cluster is Offline by then and not a second before.
		if ok {
			if summary.Offline(tc.c, interval, now.Add(got-time.Second)) || !summary.Offline(tc.c, interval, now.Add(got)) {
				t.Errorf("%s: the recheck in %v does not follow the Offline rule", tc.name, got)
			}
		}
	}
	interval = 0
	if _, ok := h.recheckIn(seen(0)); ok {
		t.Error("no interval configured: want no recheck")
	}
}

func TestChangeDelay(t *testing.T) {
	bd := func(generation int64, ready bool) *fleet.BundleDeployment {
		b := &fleet.BundleDeployment{}
		b.Generation, b.Status.Ready = generation, ready
		return b
	}
	for _, tc := range []struct {
		name     string
		old, cur any
		want     time.Duration
	}{
		{"created", nil, bd(1, false), specDelay},
		{"deleted", bd(1, true), nil, specDelay},
		{"deleted, its last state unknown", cache.DeletedFinalStateUnknown{Obj: bd(1, true)}, nil, specDelay},
		{"a new spec", bd(1, true), bd(2, true), specDelay},
		{"the agent's report", bd(1, false), bd(1, true), statusDelay},
	} {
		if got := changeDelay(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: changeDelay = %v, want %v", tc.name, got, tc.want)
		}
	}
}
