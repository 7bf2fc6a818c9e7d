package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ShardRun is the two-shard experiment.
type ShardRun struct {
	Date              string  `json:"date"`
	Cores             int     `json:"cores"`
	MemGiB            float64 `json:"memoryGiB"`
	Clusters          int     `json:"clusters"`
	Bundles           int     `json:"bundles"`
	BundleDeployments int     `json:"bundleDeployments"`
	Seconds           float64 `json:"seconds"`
	RawSeconds        float64 `json:"rawSeconds"`
	Ratio             float64 `json:"ratioToRaw"`
	// Shards are by shard ID ("" for the unsharded controller).
	Shards map[string]*ShardShare `json:"shards"`
	// HandledTwice counts objects written by more than one controller, or by another shard
	// than their label names.
	HandledTwice int    `json:"handledTwice"`
	Check        string `json:"check"`
}

// ShardShare is one controller's part of the work.
type ShardShare struct {
	Bundles           int     `json:"bundles"`
	BundleDeployments int     `json:"bundleDeploymentsWritten"`
	BundleStatuses    int     `json:"bundleStatusesWritten"`
	CPU               float64 `json:"cpuSeconds"`
	PeakMiB           float64 `json:"peakRSSMiB"`
}

// shardOf is the shard of bundle i: a, b and the unsharded controller in turn.
func shardOf(i int) string { return []string{"a", "b", ""}[i%3] }

// runShards runs the unsharded controller and shards a and b against n clusters (made as
// registration leaves them) and bundles Bundles spread over the three, then reads which
// controller wrote each BundleDeployment and each Bundle's status (their field managers).
func runShards(fleetBin string, n, bundles int) (ShardRun, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := ShardRun{Date: time.Now().UTC().Format(time.RFC3339), Cores: runtime.NumCPU(), MemGiB: proc.MemTotalGiB(), Clusters: n, Bundles: bundles,
		BundleDeployments: n * bundles, Shards: map[string]*ShardShare{}}
	e, err := newEnv(ctx, "shards", time.Minute)
	if err != nil {
		return r, err
	}
	defer e.stop()
	fmt.Printf("[shards] %d clusters\n", n)
	if err := proc.Parallel(n, 32, func(i int) error { return registered(ctx, e, i) }); err != nil {
		return r, err
	}
	fmt.Printf("[shards] raw: create and delete %d BundleDeployments\n", n*bundles)
	_, _, rawTook, _, err := rawCreateDelete(scaleBundle(0), bundles, n, rawBDs{e: e})
	if err != nil {
		return r, err
	}
	r.RawSeconds = rawTook.Seconds()
	for _, id := range []string{"", "a", "b"} {
		if err := e.startController(fleetBin, id); err != nil {
			return r, err
		}
		r.Shards[id] = &ShardShare{}
	}
	if err := waitFor(3*time.Minute, func() (bool, error) {
		list, err := e.api.Cluster().List(fleet.DefaultNamespace, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		settled := 0
		for _, c := range list.Items {
			if slices.Contains(c.Finalizers, fleet.ClusterFinalizer) && c.Status.Display.ReadyBundles != "" {
				settled++
			}
		}
		return settled == n, nil
	}); err != nil {
		return r, fmt.Errorf("the unsharded controller did not take on the clusters: %w", err)
	}
	bw := bdWatcher(ctx, e)
	defer bw.cancel()
	before := map[string]usage{}
	for id := range r.Shards {
		before[id] = e.usage(id)
	}
	start := time.Now()
	for i := range bundles {
		b := scaleBundle(i)
		if id := shardOf(i); id != "" {
			b.Labels[fleet.ShardLabel] = id
		}
		r.Shards[shardOf(i)].Bundles++
		if _, err := e.api.Bundle().Create(b); err != nil {
			return r, err
		}
	}
	ours := []func(*fleet.BundleDeployment) bool{func(bd *fleet.BundleDeployment) bool {
		return strings.HasPrefix(bd.Labels[fleet.BundleLabel], "bench-")
	}}
	if _, err := until(bw.counter(ctx, ours), 15*time.Minute, func(c []int) bool { return c[0] >= n*bundles }); err != nil {
		return r, err
	}
	r.Seconds = time.Since(start).Seconds()
	r.Ratio = r.RawSeconds / r.Seconds
	// Let the Bundles' status settle, then read who wrote what.
	time.Sleep(5 * time.Second)
	for id, s := range r.Shards {
		u := e.usage(id)
		s.CPU, s.PeakMiB = u.CPU-before[id].CPU, u.PeakMiB
	}
	return r, r.tally(e)
}

// tally counts each controller's writes by field manager and every object handled twice.
func (r *ShardRun) tally(e *env) error {
	shardOfManager := func(m string) string {
		if id, ok := strings.CutPrefix(m, "fleet-shard-"); ok {
			return id
		}
		return ""
	}
	bds, err := e.api.BundleDeployment().List("", metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, bd := range bds.Items {
		if !strings.HasPrefix(bd.Labels[fleet.BundleLabel], "bench-") {
			continue
		}
		writers := map[string]bool{}
		for _, m := range bd.ManagedFields {
			if m.Subresource == "" {
				writers[shardOfManager(m.Manager)] = true
			}
		}
		want := bd.Labels[fleet.ShardLabel]
		if len(writers) != 1 || !writers[want] {
			r.HandledTwice++
			continue
		}
		r.Shards[want].BundleDeployments++
	}
	bundles, err := e.api.Bundle().List(fleet.DefaultNamespace, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, b := range bundles.Items {
		writers := map[string]bool{}
		for _, m := range b.ManagedFields {
			if m.Subresource == "status" {
				writers[shardOfManager(m.Manager)] = true
			}
		}
		want := b.Labels[fleet.ShardLabel]
		if len(writers) != 1 || !writers[want] {
			r.HandledTwice++
			continue
		}
		r.Shards[want].BundleStatuses++
	}
	r.Check = fmt.Sprintf("%d objects written by more than one controller or by the wrong one", r.HandledTwice)
	fmt.Printf("[shards] %d BundleDeployments in %.1f s (raw %.1f s, ratio %.2f); %s\n", r.BundleDeployments, r.Seconds, r.RawSeconds, r.Ratio, r.Check)
	for id, s := range r.Shards {
		fmt.Printf("[shards] shard %q: %+v\n", id, *s)
	}
	if r.HandledTwice > 0 {
		return fmt.Errorf("%s", r.Check)
	}
	return nil
}

// registered creates cluster i as registration leaves it: its namespace, the agent identity's
// annotation, and a first check-in.
func registered(ctx context.Context, e *env, i int) error {
	name := fmt.Sprintf("c-%05d", i)
	ns := names.ClusterNamespace(fleet.DefaultNamespace, name)
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	c, err := e.api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace, Labels: simLabels,
		Annotations: map[string]string{registration.IdentityAnnotation: registration.AgentIdentity(ns)}}})
	if err != nil {
		return err
	}
	c.Status.Namespace, c.Status.Agent.LastSeen = ns, metav1.Now()
	_, err = e.api.Cluster().UpdateStatus(c)
	return err
}
