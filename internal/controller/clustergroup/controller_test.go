package clustergroup

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/controller/index"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestGroupsRollUpOnlyWhatTheyRead(t *testing.T) {
	r := &index.Fingerprints{}
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "a", Labels: map[string]string{"env": "prod"}}}
	c.Status.Summary = fleet.BundleSummary{Ready: 1, DesiredReady: 1}
	key := "fleet-default/a"
	if !rollUpAgain(r, key, c) {
		t.Fatal("a new cluster rolls its groups up")
	}
	checkedIn := c.DeepCopy()
	checkedIn.Status.Agent.LastSeen = metav1.NewTime(time.Now())
	checkedIn.ResourceVersion = "2"
	if rollUpAgain(r, key, checkedIn) {
		t.Fatal("a check-in changes nothing a group's status reads")
	}
	for what, mutate := range map[string]func(*fleet.Cluster){
		"labels":          func(c *fleet.Cluster) { c.Labels = map[string]string{"env": "dev"} },
		"summary":         func(c *fleet.Cluster) { c.Status.Summary.Ready = 0 },
		"resource counts": func(c *fleet.Cluster) { c.Status.ResourceCounts.NotReady = 2 },
		"state":           func(c *fleet.Cluster) { c.Status.Display.State = "Offline" },
	} {
		next := c.DeepCopy()
		mutate(next)
		if !rollUpAgain(r, key, next) {
			t.Errorf("a change of its %s rolls its groups up", what)
		}
		rollUpAgain(r, key, c) // back to the first
	}
	if !rollUpAgain(r, key, nil) || !rollUpAgain(r, key, c) {
		t.Fatal("a deleted cluster rolls its groups up, and a new one of the same name too")
	}
}
