package history

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetgo/fleet/internal/history"
	"github.com/fleetgo/fleet/internal/history/historytest"
)

var t0 = historytest.T0

func fixture(t *testing.T) []Bundle {
	return []Bundle{{Name: "repo-app", Record: historytest.Record(t)}}
}

func TestRowsAnswerEachQuery(t *testing.T) {
	b := fixture(t)
	rows, err := Rows(b, Query{})
	if err != nil || len(rows) != 2 || rows[0].Clusters != 2 || rows[0].Running != 1 || rows[1].Running != 1 || rows[1].Commit != "bbbb" {
		t.Fatalf("overview: %+v %v", rows, err)
	}
	at := t0.Add(5 * time.Minute)
	rows, err = Rows(b, Query{At: &at})
	if err != nil || len(rows) != 2 || rows[0].Revision != "r1" || rows[1].Revision != "r1" {
		t.Fatalf("at +5m: %+v %v", rows, err)
	}
	rows, err = Rows(b, Query{Cluster: "dev"})
	if err != nil || len(rows) != 2 || rows[0].Ended != history.Replaced || !rows[0].Until.Equal(t0.Add(10*time.Minute)) || rows[1].Ready != nil {
		t.Fatalf("dev: %+v %v", rows, err)
	}
	at = t0.Add(11 * time.Minute)
	rows, err = Rows(b, Query{Cluster: "dev", At: &at})
	if err != nil || len(rows) != 1 || rows[0].Commit != "bbbb" {
		t.Fatalf("dev at +11m: %+v %v", rows, err)
	}
}

func TestWhichClustersRanARevision(t *testing.T) {
	b := fixture(t)
	for _, id := range []string{"r1", "aaaa"} {
		rows, err := Rows(b, Query{Revision: id})
		if err != nil || len(rows) != 2 || !slices.Equal(sorted(rows[0].Cluster, rows[1].Cluster), []string{"dev", "prod"}) {
			t.Fatalf("clusters of %s: %+v %v", id, rows, err)
		}
	}
	if _, err := Rows(b, Query{Revision: "cccc"}); err == nil || !strings.Contains(err.Error(), "no revision or commit cccc") {
		t.Fatalf("an unknown revision: %v", err)
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func TestBadQueriesSayWhy(t *testing.T) {
	b := fixture(t)
	before := t0.Add(-time.Hour)
	if _, err := Rows(b, Query{At: &before}); err == nil || !strings.Contains(err.Error(), "is before the record, which begins at 2026-12-02T14:00:00Z") {
		t.Fatalf("a time before the record: %v", err)
	}
	if _, err := Rows(b, Query{Cluster: "edge"}); err == nil || !strings.Contains(err.Error(), "cluster edge ran none of these bundles") {
		t.Fatalf("an unknown cluster: %v", err)
	}
	if _, err := ParseTime("yesterday", t0); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
		t.Fatalf("an unreadable time: %v", err)
	}
}

func TestPrint(t *testing.T) {
	b := fixture(t)
	rows, _ := Rows(b, Query{Cluster: "dev"})
	var out bytes.Buffer
	Print(&out, rows, Query{Cluster: "dev"})
	want := "BUNDLE    CLUSTER  REVISION  COMMIT  PROMOTED              APPLIED               READY                 UNTIL                 ENDED\n" +
		"repo-app  dev      r1        aaaa    2026-12-02T14:00:00Z  2026-12-02T14:01:00Z  2026-12-02T14:01:00Z  2026-12-02T14:10:00Z  Replaced\n" +
		"repo-app  dev      r2        bbbb    2026-12-02T14:10:00Z  2026-12-02T14:10:00Z  -                     -                     -\n"
	if out.String() != want {
		t.Fatalf("got\n%s", out.String())
	}
}
