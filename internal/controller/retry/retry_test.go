package retry

import (
	"testing"
	"time"
)

// Failures in a row double the wait up to the cap, a ceiling shortens it, and Forget starts the
// key over; other keys count on their own.
func TestRetries(t *testing.T) {
	r := New(5*time.Second, time.Minute)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var waits []time.Duration
	for range 6 {
		waits = append(waits, r.Failed("a/x", now, 0))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	if at, ok := r.Next("a/x"); !ok || !at.Equal(now.Add(time.Minute)) {
		t.Fatalf("next %v %v", at, ok)
	}
	if w := r.Failed("a/y", now, 2*time.Second); w != 2*time.Second {
		t.Fatalf("ceiling: %v", w)
	}
	r.Forget("a/x")
	if _, ok := r.Next("a/x"); ok {
		t.Fatal("forgotten key still waits")
	}
	if w := r.Failed("a/x", now, 0); w != 5*time.Second {
		t.Fatalf("after Forget: %v", w)
	}
}
