package schedule

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func spec(expr string, d time.Duration, loc string) fleet.ScheduleSpec {
	return fleet.ScheduleSpec{Schedule: expr, Duration: metav1.Duration{Duration: d}, Location: loc}
}

func TestWindow(t *testing.T) {
	// Saturdays 01:00 Berlin time for two hours (CET in November: UTC+1).
	w, err := Parse(spec("0 0 1 * * SAT", 2*time.Hour, "Europe/Berlin"))
	if err != nil {
		t.Fatal(err)
	}
	sat := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC) // Saturday 01:00 Berlin
	for _, tc := range []struct {
		name   string
		now    time.Time
		open   bool
		closes time.Time
		next   time.Time
	}{
		{"before", sat.Add(-time.Minute), false, time.Time{}, sat},
		{"at the start", sat, true, sat.Add(2 * time.Hour), sat.Add(7 * 24 * time.Hour)},
		{"inside", sat.Add(90 * time.Minute), true, sat.Add(2 * time.Hour), sat.Add(7 * 24 * time.Hour)},
		{"at the end", sat.Add(2 * time.Hour), false, time.Time{}, sat.Add(7 * 24 * time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open, closes, next := w.At(tc.now)
			if open != tc.open || !closes.Equal(tc.closes) || !next.Equal(tc.next) {
				t.Fatalf("At(%s) = %v, %s, %s; want %v, %s, %s", tc.now, open, closes, next, tc.open, tc.closes, tc.next)
			}
		})
	}
	// Five fields (no seconds) are read too.
	if _, err := Parse(spec("30 2 * * *", time.Hour, "")); err != nil {
		t.Fatal(err)
	}
}

func TestParseNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		spec fleet.ScheduleSpec
		want string
	}{
		{spec("every day", time.Hour, ""), "spec.schedule"},
		{spec("", time.Hour, ""), "spec.schedule"},
		{spec("0 0 * * *", time.Hour, "Mars/Olympus_Mons"), "spec.location"},
		{spec("0 0 * * *", 0, ""), "spec.duration"},
	} {
		if _, err := Parse(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want it to name %s", tc.spec, err, tc.want)
		}
	}
}

func TestTargets(t *testing.T) {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Namespace: "ns", Labels: map[string]string{"env": "prod"}}}
	g := &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "edges", Namespace: "ns", Labels: map[string]string{"kind": "edge"}},
		Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}}
	gm, err := target.NewGroupMatcher([]*fleet.ClusterGroup{g})
	if err != nil {
		t.Fatal(err)
	}
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	for _, tc := range []struct {
		name string
		t    fleet.ScheduleTarget
		want bool
	}{
		{"by name", fleet.ScheduleTarget{ClusterName: "edge-1"}, true},
		{"another name", fleet.ScheduleTarget{ClusterName: "edge-2"}, false},
		{"by labels", fleet.ScheduleTarget{ClusterSelector: sel("env", "prod")}, true},
		{"by group", fleet.ScheduleTarget{ClusterGroup: "edges"}, true},
		{"by group labels", fleet.ScheduleTarget{ClusterGroupSelector: sel("kind", "edge")}, true},
		{"all fields must match", fleet.ScheduleTarget{ClusterName: "edge-1", ClusterSelector: sel("env", "dev")}, false},
		{"an empty target matches nothing", fleet.ScheduleTarget{Name: "empty"}, false},
	} {
		s := &fleet.Schedule{Spec: fleet.ScheduleSpec{Targets: fleet.ScheduleTargets{Clusters: []fleet.ScheduleTarget{tc.t}}}}
		if got := targets(s, c, gm); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
