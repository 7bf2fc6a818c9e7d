package helmop

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// What the controller remembers of a HelmOp goes with it: its resolved source and its retries.
func TestDeletedHelmOpsAreForgotten(t *testing.T) {
	h := &handler{mem: newMemory()}
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"},
		Spec: fleet.HelmOpSpec{BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
			Helm: &fleet.HelmOptions{Chart: "c", Repo: "https://charts.example"}}}}}
	now := time.Now()
	h.mem.resolvedFrom("ns/a", op)
	h.mem.pollFailed("ns/b", now, 0)
	if h.mem.sourceChanged("ns/a", op) {
		t.Fatal("the source just resolved from reads as changed")
	}
	if _, err := h.forgetDeleted("ns/a", op); err != nil || h.mem.size() != 1 {
		t.Fatalf("a HelmOp that still exists was forgotten: %v, %d", err, h.mem.size())
	}
	_, _ = h.forgetDeleted("ns/a", nil)
	_, _ = h.forgetDeleted("ns/b", nil)
	if h.mem.size() != 0 || !h.mem.sourceChanged("ns/a", op) {
		t.Errorf("a deleted HelmOp's resolved source is kept (%d kept)", h.mem.size())
	}
	if _, failed := h.mem.retryAt("ns/b"); failed {
		t.Error("a deleted HelmOp's failed polls are kept")
	}
}
