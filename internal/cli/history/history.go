// Package history is `fleet history`: what revision each cluster ran, from when until when, as
// the manager recorded it (internal/history; docs/history.md). A NAME is a Bundle, or a GitRepo
// or HelmOp (all of its Bundles).
package history

import (
	"fmt"
	"time"

	"github.com/fleetgo/fleet/internal/historyapi"
)

// Bundle is one Bundle's record (historyapi.Find).
type Bundle = historyapi.Bundle

// ParseTime reads --at: RFC 3339 ("2026-12-02T14:03:00Z"), or "now".
func ParseTime(s string, now time.Time) (time.Time, error) {
	if s == "" || s == "now" {
		return now, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--at %q: a time as RFC 3339 (2026-12-02T14:03:00Z) or now", s)
	}
	return t, nil
}
