package bundle

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func clustersIn(keys ...string) []*fleet.Cluster {
	var out []*fleet.Cluster
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		out = append(out, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	return out
}

func keysOf(cs []*fleet.Cluster) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Namespace+"/"+c.Name)
	}
	return out
}

// The plan's order (rollout partitions follow it) is the order of the clusters' keys, also
// where one namespace is a prefix of another.
func TestClusterOrderIsKeyOrder(t *testing.T) {
	cs := clustersIn("a/x", "a-b/y", "a/b", "fleet-default/c2", "fleet-default/c10", "a-b/a", "b/a", "a/y-z")
	want := keysOf(cs)
	slices.Sort(want)
	slices.SortFunc(cs, byKey)
	if got := keysOf(cs); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestClusterOrderAllocatesNothingWithinANamespace(t *testing.T) {
	// Keys as long as registered clusters' (over 32 bytes: shorter concatenations stay on the
	// stack and would hide the allocations).
	var keys []string
	for i := range 1000 {
		keys = append(keys, fmt.Sprintf("fleet-default/cluster-%012x", (i*7919)%1000))
	}
	cs := clustersIn(keys...)
	shuffled := slices.Clone(cs)
	allocs := testing.AllocsPerRun(5, func() {
		copy(cs, shuffled)
		slices.SortFunc(cs, byKey)
	})
	if allocs != 0 {
		t.Fatalf("sorting 1,000 clusters of one namespace allocated %v times", allocs)
	}
}
