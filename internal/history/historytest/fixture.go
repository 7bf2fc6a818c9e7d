// Package historytest holds a deployment history record the readers' tests share.
package historytest

import (
	"testing"
	"time"

	"github.com/fleetgo/fleet/internal/history"
)

// T0 is when the fixture's record begins.
var T0 = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

// Record: dev and prod run r1 (commit aaaa) from T0, both applied and ready at +1m; dev moves
// to r2 (commit bbbb) at +10m, applied, not ready.
func Record(t *testing.T) *history.Record {
	r := &history.Record{}
	for _, pass := range []struct {
		min  int
		seen []history.Seen
	}{
		{0, []history.Seen{{Cluster: "dev", Revision: "r1", Commit: "aaaa"}, {Cluster: "prod", Revision: "r1", Commit: "aaaa"}}},
		{1, []history.Seen{{Cluster: "dev", Revision: "r1", Applied: true, Ready: true}, {Cluster: "prod", Revision: "r1", Applied: true, Ready: true}}},
		{10, []history.Seen{{Cluster: "dev", Revision: "r2", Commit: "bbbb", Applied: true}, {Cluster: "prod", Revision: "r1", Applied: true, Ready: true}}},
	} {
		if err := r.Observe(pass.seen, T0.Add(time.Duration(pass.min)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}
