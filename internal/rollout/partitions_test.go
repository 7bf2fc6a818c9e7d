package rollout

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// state of a target's current BundleDeployment in a partitions test.
type state int

const (
	missing  state = iota // no BundleDeployment yet
	ready                 // the old options applied and ready
	notReady              // the old options applied, not ready
)

// fixture makes one target per state, clusters labelled env=canary for the first `canaries`.
func fixture(states []state, canaries int) ([]target.ClusterInfo, []*fleet.BundleDeployment) {
	var targets []target.ClusterInfo
	bds := make([]*fleet.BundleDeployment, len(states))
	for i, s := range states {
		labels := map[string]string{"env": "prod"}
		if i < canaries {
			labels["env"] = "canary"
		}
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%03d", i), Namespace: "fleet-default", Labels: labels}}
		targets = append(targets, target.ClusterInfo{Cluster: c})
		if s == ready || s == notReady {
			bds[i] = &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns-" + c.Name, Labels: map[string]string{}},
				Spec:   fleet.BundleDeploymentSpec{DeploymentID: "old"},
				Status: fleet.BundleDeploymentStatus{AppliedDeploymentID: "old", Ready: s == ready}}
		}
	}
	return targets, bds
}

func all(n int, s state) []state {
	out := make([]state, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestPartitionsAndLimits(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	canary := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "canary"}}
	tests := []struct {
		name     string
		rs       *fleet.RolloutStrategy
		states   []state
		canaries int
		// want
		partitions     []int // member counts, in order
		names          []string
		maxUnavailable int
		partMax        []int
		maxParts       int
		unavailable    int
	}{
		{name: "defaults: one partition, everything may be unavailable", states: all(10, ready),
			partitions: []int{10}, names: []string{"All"}, maxUnavailable: 10, partMax: []int{10}},
		{name: "maxUnavailable as a percentage rounds down", rs: &fleet.RolloutStrategy{MaxUnavailable: pct("25%")}, states: all(10, ready),
			partitions: []int{10}, maxUnavailable: 2, partMax: []int{2}},
		{name: "maxUnavailable as a number", rs: &fleet.RolloutStrategy{MaxUnavailable: num(3)}, states: all(10, ready),
			partitions: []int{10}, maxUnavailable: 3, partMax: []int{3}},
		{name: "maxUnavailable 0 still lets one through", rs: &fleet.RolloutStrategy{MaxUnavailable: pct("0%")}, states: all(10, ready),
			partitions: []int{10}, maxUnavailable: 1, partMax: []int{1}},
		{name: "below the threshold of 200: no auto partitions", states: all(199, ready),
			partitions: []int{199}, names: []string{"All"}, maxUnavailable: 199, partMax: []int{199}},
		{name: "at the threshold: partitions of 25%", states: all(200, ready),
			partitions: []int{50, 50, 50, 50}, names: []string{"Partition 0", "Partition 1", "Partition 2", "Partition 3"},
			maxUnavailable: 200, partMax: []int{200, 200, 200, 200}},
		{name: "auto partition size and threshold set", rs: &fleet.RolloutStrategy{AutoPartitionThreshold: ptr(5), AutoPartitionSize: num(2)}, states: all(5, ready),
			partitions: []int{2, 2, 1}, maxUnavailable: 5, partMax: []int{5, 5, 5}},
		{name: "explicit partitions, the rest unpartitioned, partition maxUnavailable of its members",
			rs:     &fleet.RolloutStrategy{MaxUnavailable: num(4), Partitions: []fleet.Partition{{Name: "canary", ClusterSelector: canary, MaxUnavailable: pct("50%")}}},
			states: all(6, ready), canaries: 2,
			partitions: []int{2, 4}, names: []string{"canary", "unpartitioned"}, maxUnavailable: 4, partMax: []int{1, 4}},
		{name: "a partition without maxUnavailable takes the bundle's",
			rs:     &fleet.RolloutStrategy{MaxUnavailable: num(2), Partitions: []fleet.Partition{{Name: "canary", ClusterSelector: canary}}},
			states: all(4, ready), canaries: 4,
			partitions: []int{4}, names: []string{"canary"}, maxUnavailable: 2, partMax: []int{2}},
		{name: "maxUnavailablePartitions as a percentage is of the partitions",
			rs:     &fleet.RolloutStrategy{AutoPartitionThreshold: ptr(4), AutoPartitionSize: num(1), MaxUnavailablePartitions: pct("50%")},
			states: all(4, ready), partitions: []int{1, 1, 1, 1}, maxUnavailable: 4, partMax: []int{4, 4, 4, 4}, maxParts: 2},
		{name: "maxUnavailablePartitions as a number",
			rs:     &fleet.RolloutStrategy{AutoPartitionThreshold: ptr(4), AutoPartitionSize: num(1), MaxUnavailablePartitions: num(1)},
			states: all(4, ready), partitions: []int{1, 1, 1, 1}, maxUnavailable: 4, partMax: []int{4, 4, 4, 4}, maxParts: 1},
		{name: "missing and not ready deployments count as unavailable", states: []state{ready, missing, notReady, ready},
			partitions: []int{4}, maxUnavailable: 4, partMax: []int{4}, unavailable: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			targets, bds := fixture(tt.states, tt.canaries)
			r, err := NewPartitions(tt.rs, false, targets, bds)
			if err != nil {
				t.Fatal(err)
			}
			var sizes, maxes []int
			var names []string
			for _, p := range r.partitions {
				sizes, maxes, names = append(sizes, len(p.members)), append(maxes, p.maxUnavailable), append(names, p.name)
			}
			if fmt.Sprint(sizes) != fmt.Sprint(tt.partitions) {
				t.Errorf("partition sizes %v, want %v", sizes, tt.partitions)
			}
			if tt.names != nil && fmt.Sprint(names) != fmt.Sprint(tt.names) {
				t.Errorf("partition names %q, want %q", names, tt.names)
			}
			if r.MaxUnavailable != tt.maxUnavailable {
				t.Errorf("maxUnavailable %d, want %d", r.MaxUnavailable, tt.maxUnavailable)
			}
			if fmt.Sprint(maxes) != fmt.Sprint(tt.partMax) {
				t.Errorf("partition maxUnavailable %v, want %v", maxes, tt.partMax)
			}
			if r.MaxUnavailablePartitions != tt.maxParts {
				t.Errorf("maxUnavailablePartitions %d, want %d", r.MaxUnavailablePartitions, tt.maxParts)
			}
			if r.unavailable != tt.unavailable {
				t.Errorf("unavailable %d, want %d", r.unavailable, tt.unavailable)
			}
		})
	}
}

// promoted runs one pass of the strategy over every target, in its order, and returns which
// targets (by index) get the new options.
func promoted(t *testing.T, rs *fleet.RolloutStrategy, paused bool, targets []target.ClusterInfo, bds []*fleet.BundleDeployment) []int {
	t.Helper()
	r, err := NewPartitions(rs, paused, targets, bds)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, k := range r.Order() {
		if r.Decide(k, bds[k], "new") == Promote {
			out = append(out, k)
		}
	}
	return out
}

func TestRolloutPromotion(t *testing.T) {
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	canary := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "canary"}}
	tests := []struct {
		name     string
		rs       *fleet.RolloutStrategy
		paused   bool
		states   []state
		canaries int
		want     []int
	}{
		{name: "defaults promote everything", states: all(4, ready), want: []int{0, 1, 2, 3}},
		{name: "paused promotes nothing", paused: true, states: all(3, ready), want: nil},
		{name: "maxUnavailable bounds the available targets taken down at once", rs: &fleet.RolloutStrategy{MaxUnavailable: num(2)},
			states: all(5, ready), want: []int{0, 1}},
		{name: "targets unavailable anyway cost nothing", rs: &fleet.RolloutStrategy{MaxUnavailable: num(1)},
			states: []state{missing, notReady, ready, ready}, want: []int{0, 1}},
		{name: "with room left by the unavailable ones, available targets follow", rs: &fleet.RolloutStrategy{MaxUnavailable: num(3)},
			states: []state{notReady, ready, ready, ready}, want: []int{0, 1, 2}},
		{name: "a partition takes one target at a time with maxUnavailable 0, and the next waits while it is over its limit",
			rs:     &fleet.RolloutStrategy{Partitions: []fleet.Partition{{Name: "canary", ClusterSelector: canary, MaxUnavailable: num(0)}}},
			states: all(4, ready), canaries: 2, want: []int{0}},
		{name: "maxUnavailablePartitions lets that many partitions be over their limit",
			rs: &fleet.RolloutStrategy{MaxUnavailablePartitions: num(1),
				Partitions: []fleet.Partition{{Name: "canary", ClusterSelector: canary, MaxUnavailable: num(0)}}},
			states: all(4, ready), canaries: 2, want: []int{0, 2, 3}},
		{name: "maxUnavailablePartitions 50% of two partitions is one",
			rs: &fleet.RolloutStrategy{MaxUnavailablePartitions: pct("50%"),
				Partitions: []fleet.Partition{{Name: "canary", ClusterSelector: canary, MaxUnavailable: num(0)}}},
			states: all(4, ready), canaries: 2, want: []int{0, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			targets, bds := fixture(tt.states, tt.canaries)
			if got := promoted(t, tt.rs, tt.paused, targets, bds); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("promoted %v, want %v", got, tt.want)
			}
		})
	}
}

// A limit that is neither a number nor a percentage fails closed: the pass stops naming the
// field, rather than read it as "no limit" and let every cluster go unavailable at once.
func TestInvalidRolloutLimitsFailClosed(t *testing.T) {
	targets, bds := fixture(all(4, ready), 0)
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	for field, rs := range map[string]*fleet.RolloutStrategy{
		"rolloutStrategy.maxUnavailable":               {MaxUnavailable: pct("all of them")},
		"rolloutStrategy.maxUnavailablePartitions":     {MaxUnavailablePartitions: pct("x%")},
		"rolloutStrategy.partitions[0].maxUnavailable": {Partitions: []fleet.Partition{{Name: "p", MaxUnavailable: pct("lots")}}},
	} {
		_, err := NewPartitions(rs, false, targets, bds)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}
