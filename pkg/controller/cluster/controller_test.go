package cluster

import (
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	h := &handler{now: func() time.Time { return now }}
	h.written.Store("quiet/long-ago", now.Add(-time.Minute))
	h.written.Store("busy/just-now", now.Add(-2*time.Second))
	h.written.Store("busy/a-while", now.Add(-9800*time.Millisecond))
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
