package target

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// An agent may patch its Cluster's status: whatever status.namespace says, the manager's
// writes go to the namespace derived from the Cluster's own namespace and name.
func TestClusterNamespaceIgnoresStatus(t *testing.T) {
	want := names.ClusterNamespace("fleet-default", "edge")
	for _, claimed := range []string{"", "kube-system", names.ClusterNamespace("fleet-default", "other"), want} {
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "edge"},
			Status: fleet.ClusterStatus{Namespace: claimed}}
		if got := ClusterNamespace(c); got != want {
			t.Errorf("status.namespace %q: got %q, want %q", claimed, got, want)
		}
	}
}
