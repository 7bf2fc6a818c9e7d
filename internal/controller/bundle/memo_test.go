package bundle

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestRenderMemo(t *testing.T) {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b1", Generation: 1, Labels: map[string]string{fleet.CommitLabel: "c1"}},
		Spec: fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}}}
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "c1", Labels: map[string]string{"env": "a"}}}
	ci := target.ClusterInfo{Cluster: c}
	m := &target.Match{Targets: []int{0}}
	mem := newMemory()
	memo := mem.renders
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{UID: "bd1", Generation: 1}}
	fp := func() [32]byte { return clusterFingerprint(clusterHash(c), ci, m) }

	if memo.current(b, c.UID, "s-content", fp(), bd) {
		t.Fatal("nothing written yet")
	}
	// New inputs are rendered once, while planning, and the pass writes what was rendered;
	// inputs seen before are not rendered again.
	if desired, err := checkRender(mem, b, ci, m, "s-content", fp()); err != nil || desired == nil || desired.Spec.DeploymentID == "" {
		t.Fatalf("first look: %v %v", desired, err)
	}
	if desired, err := checkRender(mem, b, ci, m, "s-content", fp()); err != nil || desired != nil {
		t.Fatalf("second look rendered again: %v %v", desired, err)
	}
	if memo.current(b, c.UID, "s-content", fp(), bd) {
		t.Fatal("checked is not written")
	}
	memo.written(b, c.UID, "s-content", fp(), bd)
	if !memo.current(b, c.UID, "s-content", fp(), bd) {
		t.Fatal("written for unchanged inputs is current")
	}
	c.Status.Summary.Ready = 7 // status churn is not an input
	if !memo.current(b, c.UID, "s-content", fp(), bd) {
		t.Fatal("cluster status is not an input")
	}
	bd.Generation = 2 // someone else changed the spec
	if memo.current(b, c.UID, "s-content", fp(), bd) {
		t.Fatal("a changed deployment is not current")
	}
	memo.written(b, c.UID, "s-content", fp(), bd)
	c.Labels["env"] = "b"
	if memo.current(b, c.UID, "s-content", fp(), bd) {
		t.Fatal("a cluster label change needs rendering")
	}
	memo.written(b, c.UID, "s-content", fp(), bd)
	if memo.current(b, c.UID, "s-other", fp(), bd) {
		t.Fatal("new content needs rendering")
	}
	memo.written(b, c.UID, "s-content", fp(), bd)
	b.Labels[fleet.CommitLabel] = "c2"
	if memo.current(b, c.UID, "s-content", fp(), bd) {
		t.Fatal("bundle labels reach the deployment")
	}
	memo.written(b, c.UID, "s-content", fp(), bd)
	b.Generation = 2
	if memo.current(b, c.UID, "s-content", fp(), bd) {
		t.Fatal("a new bundle generation needs rendering")
	}

	// Rendering errors are remembered for the same inputs, and forgotten when they change.
	b.Spec.Helm = &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"x": "${ .Nope.Nope }"}}}
	b.Generation = 3
	if _, err := checkRender(mem, b, ci, m, "s-content", fp()); err == nil {
		t.Fatal("a templating error is reported")
	}
	b.Spec.Helm = nil // as if the cache had changed under the same generation
	if _, err := checkRender(mem, b, ci, m, "s-content", fp()); err == nil {
		t.Fatal("the error is remembered for the same inputs")
	}
	b.Generation = 4
	if _, err := checkRender(mem, b, ci, m, "s-content", fp()); err != nil {
		t.Fatalf("a new generation renders again: %v", err)
	}

	memo.setContentName(b, "s-content")
	if name, ok := memo.contentName(b); !ok || name != "s-content" {
		t.Fatal("content name is remembered per generation")
	}
	b.Generation = 5
	if _, ok := memo.contentName(b); ok {
		t.Fatal("a new generation hashes the manifest again")
	}
	memo.written(b, c.UID, "s-content", fp(), bd)
	memo.forget(b)
	if memo.current(b, c.UID, "s-content", fp(), bd) {
		t.Fatal("forget drops the bundle's memo")
	}
}

// A Bundle read again under its resourceVersion keeps its memo without printing its labels; a
// label change comes with a new resourceVersion and starts the memo afresh.
func TestRenderMemoByResourceVersion(t *testing.T) {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b1", Generation: 1, ResourceVersion: "10",
		Labels: map[string]string{fleet.CommitLabel: "c1"}}}
	mem := newMemory()
	memo := mem.renders
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{UID: "bd1", Generation: 1}}
	var fp [32]byte
	memo.written(b, "c1", "s-content", fp, bd)
	if !memo.current(b, "c1", "s-content", fp, bd) {
		t.Fatal("written is current")
	}
	b.ResourceVersion = "11" // a status write: same labels
	if !memo.current(b, "c1", "s-content", fp, bd) {
		t.Fatal("a status write keeps the memo")
	}
	b.Labels = map[string]string{fleet.CommitLabel: "c2"}
	b.ResourceVersion = "12"
	if memo.current(b, "c1", "s-content", fp, bd) {
		t.Fatal("a label change starts the memo afresh")
	}
}

// A deployment written for the same inputs at a newer generation than the cache's copy is
// ahead: the cache lags, and a write from that copy would conflict.
func TestRenderMemoAhead(t *testing.T) {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "b1", Generation: 1}}
	mem := newMemory()
	memo := mem.renders
	var fp, other [32]byte
	other[0] = 1
	cached := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{UID: "bd1", Generation: 1}}
	if memo.ahead(b, "c1", "s", fp, cached) {
		t.Fatal("nothing written yet")
	}
	memo.written(b, "c1", "s", fp, &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{UID: "bd1", Generation: 2}})
	if !memo.ahead(b, "c1", "s", fp, cached) {
		t.Fatal("generation 2 written, the cache shows 1: ahead")
	}
	if memo.ahead(b, "c1", "s", other, cached) {
		t.Fatal("other inputs: not ahead")
	}
	if memo.ahead(b, "c1", "s", fp, &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{UID: "bd1", Generation: 2}}) {
		t.Fatal("the cache caught up: not ahead")
	}
	if memo.ahead(b, "c1", "s", fp, &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{UID: "bd2", Generation: 1}}) {
		t.Fatal("another deployment (recreated): not ahead")
	}
}
