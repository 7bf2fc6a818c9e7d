package bundle

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestClusterFacts(t *testing.T) {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", ResourceVersion: "1",
		Labels: map[string]string{"env": "a"}}}
	f := newClusterFacts()
	first := f.of(c)
	if first.namespace != target.ClusterNamespace(c) || first.hash != clusterHash(c) {
		t.Fatalf("facts %+v do not match the cluster", first)
	}
	// The same object (an informer never changes one in place): remembered, not derived again.
	c.Labels["env"] = "b"
	if f.of(c).hash != first.hash {
		t.Fatal("the facts of an unchanged resourceVersion are derived again")
	}
	c.ResourceVersion = "2"
	if got := f.of(c); got.hash == first.hash || got.hash != clusterHash(c) {
		t.Fatal("a new resourceVersion must be derived again")
	}
	// A Cluster deleted and created again under its name is another object.
	again := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u2", ResourceVersion: "2"}}
	if f.of(again).hash != clusterHash(again) {
		t.Fatal("another UID must be derived again")
	}
	f.forget("ns/c")
	if len(f.m) != 0 {
		t.Fatalf("forget left %d facts", len(f.m))
	}
	// Objects not from the apiserver are not remembered.
	f.of(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}})
	if len(f.m) != 0 {
		t.Fatal("an object without resourceVersion was remembered")
	}
}

func TestClusterFingerprint(t *testing.T) {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Labels: map[string]string{"env": "a"}}}
	group := func(name string) *fleet.ClusterGroup {
		return &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	}
	fp := func(groups []*fleet.ClusterGroup, targets ...int) [32]byte {
		return clusterFingerprint(clusterHash(c), target.ClusterInfo{Cluster: c, Groups: groups}, &target.Match{Targets: targets})
	}
	base := fp([]*fleet.ClusterGroup{group("ab")}, 1)
	if fp([]*fleet.ClusterGroup{group("ab")}, 1) != base {
		t.Fatal("the same inputs must give the same fingerprint")
	}
	for name, other := range map[string][32]byte{
		"another group":            fp([]*fleet.ClusterGroup{group("a")}, 1),
		"groups split differently": fp([]*fleet.ClusterGroup{group("a"), group("b")}, 1),
		"no group":                 fp(nil, 1),
		"another target":           fp([]*fleet.ClusterGroup{group("ab")}, 2),
		"one target more":          fp([]*fleet.ClusterGroup{group("ab")}, 1, 2),
		"target 11 rather than 1":  fp([]*fleet.ClusterGroup{group("ab")}, 11),
	} {
		if other == base {
			t.Errorf("%s: same fingerprint", name)
		}
	}
	c.Labels["env"] = "b"
	if fp([]*fleet.ClusterGroup{group("ab")}, 1) == base {
		t.Error("a label change must change the fingerprint")
	}
}

func TestInClusterOrder(t *testing.T) {
	bd := func(ns, name string) *fleet.BundleDeployment {
		return &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	bds := []*fleet.BundleDeployment{bd("cluster-b", "x"), bd("cluster-a", "y"), bd("cluster-c", "a"), bd("cluster-a", "x")}
	inClusterOrder(bds)
	var got []string
	for _, b := range bds {
		got = append(got, b.Namespace+"/"+b.Name)
	}
	want := []string{"cluster-a/x", "cluster-a/y", "cluster-b/x", "cluster-c/a"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
