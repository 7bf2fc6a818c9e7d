package main

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/benchmarks/sim"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The rollback experiment (issue 66): a Bundle reaches every simulated cluster at two
// revisions, one after the other; then the real `fleet rollback --to <first revision>` puts every
// cluster back, and the phase ends when every simulated agent reported the held revision applied.
const rollbackBundle = "rollback"

// rollbackLimit is the goal: 1,000 clusters back at the earlier revision within it.
const rollbackLimit = 2 * time.Minute

// RollbackRun is the experiment's result.
type RollbackRun struct {
	Date     string  `json:"date"`
	Cores    int     `json:"cores"`
	MemGiB   float64 `json:"memoryGiB"`
	Clusters int     `json:"clusters"`
	// Deliveries are the two revisions' rollouts; Rollback from running `fleet rollback` until
	// every cluster reported the first revision applied again.
	Deliveries   []SecretsPhase `json:"deliveries"`
	Rollback     SecretsPhase   `json:"rollback"`
	LimitSeconds float64        `json:"limitSeconds"`
	Phases       []Phase        `json:"phases"`
}

func runRollback(fleetBin string, n int, checkin time.Duration) (r RollbackRun, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r = RollbackRun{Date: time.Now().UTC().Format(time.RFC3339), Cores: runtime.NumCPU(), MemGiB: proc.MemTotalGiB(), Clusters: n,
		LimitSeconds: rollbackLimit.Seconds()}
	e, _, ph, err := simulated(ctx, fleetBin, "rollback", n, checkin, sim.Options{})
	if e != nil {
		defer e.stop()
	}
	r.Phases = append(r.Phases, ph)
	if err != nil {
		return r, err
	}
	bds := bdWatcher(ctx, e)
	defer bds.cancel()
	ours := func(bd *fleet.BundleDeployment) bool { return bd.Labels[fleet.BundleLabel] == rollbackBundle }
	applied := func(bd *fleet.BundleDeployment) bool {
		return bd.Spec.DeploymentID != "" && bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID
	}
	for i, content := range []string{"first", "second"} {
		old := deploymentIDs(bds, ours)
		name := fmt.Sprintf("revision %d reaches every cluster", i+1)
		sp, ph, err := meteredDelivery(ctx, e, bds, n, name, "applied", rollbackLimit+5*time.Minute, ours,
			func(bd *fleet.BundleDeployment) bool { return !old[bd.Spec.DeploymentID] && applied(bd) },
			func() error { return writeRollbackBundle(e, content, i == 0) })
		r.Deliveries, r.Phases = append(r.Deliveries, sp), append(r.Phases, ph)
		if err != nil {
			return r, err
		}
		fmt.Printf("[rollback %d] %s: %.1f s\n", n, name, sp.Seconds)
	}
	first, err := firstRevision(e)
	if err != nil {
		return r, err
	}
	sp, ph, err := meteredDelivery(ctx, e, bds, n, "fleet rollback to revision 1", "held at revision 1 and applied", rollbackLimit+5*time.Minute, ours,
		func(bd *fleet.BundleDeployment) bool {
			return bd.Annotations[fleet.HeldAnnotation] == first && applied(bd)
		},
		func() error {
			out, err := exec.Command(fleetBin, "rollback", rollbackBundle, "--to", first, "-n", fleet.DefaultNamespace, "--kubeconfig", e.mgr.Kubeconfig).CombinedOutput()
			if err != nil {
				return fmt.Errorf("fleet rollback: %w: %s", err, out)
			}
			return nil
		})
	r.Rollback, r.Phases = sp, append(r.Phases, ph)
	if err == nil {
		fmt.Printf("[rollback %d] every cluster back at revision %s: %.1f s, manager CPU %.1f s (%.2f ms per cluster)\n", n, first, sp.Seconds, sp.ManagerCPUSeconds, sp.CPUPerClusterMs)
	}
	return r, err
}

// writeRollbackBundle creates the Bundle, or gives it a new ConfigMap content.
func writeRollbackBundle(e *env, content string, first bool) error {
	res := []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rollback\ndata:\n  v: " + content + "\n"}}
	if first {
		b := scaleBundle(0)
		b.Name, b.Spec.Resources = rollbackBundle, res
		_, err := e.api.Bundle().Create(b)
		return err
	}
	return waitFor(time.Minute, func() (bool, error) {
		b, err := e.api.Bundle().Get(fleet.DefaultNamespace, rollbackBundle, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		b.Spec.Resources = res
		_, err = e.api.Bundle().Update(b)
		return err == nil, nil
	})
}

// firstRevision waits until the deployment history recorded both revisions, the first with
// what it deploys, and returns the first.
func firstRevision(e *env) (string, error) {
	first := ""
	err := waitFor(2*time.Minute, func() (bool, error) {
		list, err := e.api.BundleRevision().List(fleet.DefaultNamespace, metav1.ListOptions{LabelSelector: fleet.HistoryBundleLabel + "=" + rollbackBundle})
		if err != nil {
			return false, err
		}
		for _, o := range list.Items {
			if o.Spec.Order == 1 && o.Spec.Inputs != nil {
				first = o.Spec.Revision
			}
		}
		return len(list.Items) == 2 && first != "", nil
	})
	return first, err
}
