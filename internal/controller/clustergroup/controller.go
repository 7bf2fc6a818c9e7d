// Package clustergroup rolls the Clusters of each ClusterGroup up into its status: how many
// clusters, which are not ready, and the sum of their bundle summaries. (manager)
package clustergroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/controller/index"
	"github.com/fleetgo/fleet/internal/summary"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

type handler struct {
	groups   fleetcontrollers.ClusterGroupController
	clusters fleetcontrollers.ClusterCache
	now      func() time.Time
}

// Register starts reconciling ClusterGroups, again whenever what their status reads of a Cluster
// of their namespace changes.
func Register(ctx context.Context, groups fleetcontrollers.ClusterGroupController, clusters fleetcontrollers.ClusterController) {
	h := &handler{groups: groups, clusters: clusters.Cache(), now: time.Now}
	fleetcontrollers.RegisterClusterGroupStatusHandler(ctx, groups, "", "clustergroup-status", h.status)
	seen := &index.Fingerprints{}
	clusters.OnChange(ctx, "clustergroup-from-cluster", func(key string, c *fleet.Cluster) (*fleet.Cluster, error) {
		if !rollUpAgain(seen, key, c) {
			return c, nil
		}
		ns, _, _ := strings.Cut(key, "/")
		gs, err := groups.Cache().List(ns, labels.Everything())
		if err != nil {
			return c, err
		}
		for _, g := range gs {
			groups.Enqueue(g.Namespace, g.Name)
		}
		return c, nil
	})
}

// groupInputs is what the groups' roll-up reads of a Cluster: its labels (the groups' selectors)
// and its summary, resource counts and state. Every agent check-in updates its Cluster; at
// thousands of clusters re-rolling every group of the namespace for each would keep a core
// busy, for a status that did not change.
func groupInputs(c *fleet.Cluster) string {
	return fmt.Sprint(c.Labels, c.Status.Summary, c.Status.ResourceCounts, c.Status.Display.State)
}

// rollUpAgain records c (nil: deleted, it leaves its groups) under key and says whether its
// groups must roll up again.
func rollUpAgain(seen *index.Fingerprints, key string, c *fleet.Cluster) bool {
	if c == nil {
		seen.Forget(key)
		return true
	}
	return seen.Changed(key, groupInputs(c))
}

// status rolls up the ClusterGroup's clusters (the generated status handler writes it when it
// changed).
func (h *handler) status(g *fleet.ClusterGroup, status fleet.ClusterGroupStatus) (fleet.ClusterGroupStatus, error) {
	if g.DeletionTimestamp != nil {
		return status, nil
	}
	clusters, err := h.clusters.List(g.Namespace, labels.Everything())
	if err != nil {
		return status, err
	}
	slices.SortFunc(clusters, func(a, b *fleet.Cluster) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	status.ClusterCount, status.NonReadyClusterCount, status.NonReadyClusters = 0, 0, nil
	var s fleet.BundleSummary
	var counts fleet.ResourceCounts
	ready, message := corev1.ConditionTrue, ""
	gm, err := target.NewGroupMatcher([]*fleet.ClusterGroup{g})
	if err != nil {
		ready, message = corev1.ConditionFalse, err.Error()
		clusters = nil
	}
	for _, c := range clusters {
		if len(gm.Groups(c)) == 0 {
			continue
		}
		status.ClusterCount++
		summary.Merge(&s, c.Status.Summary)
		summary.AddCounts(&counts, c.Status.ResourceCounts)
		if c.Status.Display.State != "" {
			status.NonReadyClusterCount++
			if len(status.NonReadyClusters) < summary.MaxNonReady {
				status.NonReadyClusters = append(status.NonReadyClusters, c.Name)
			}
		}
	}
	status.Summary = s
	status.ResourceCounts = counts
	status.Display = fleet.ClusterGroupDisplay{
		ReadyClusters: fmt.Sprintf("%d/%d", status.ClusterCount-status.NonReadyClusterCount, status.ClusterCount),
		ReadyBundles:  fmt.Sprintf("%d/%d", s.Ready, s.DesiredReady),
		State:         string(summary.WorstState(s)),
	}
	if ready == corev1.ConditionTrue && status.NonReadyClusterCount > 0 {
		ready, message = corev1.ConditionFalse, fmt.Sprintf("%d cluster(s) not ready: %v", status.NonReadyClusterCount, status.NonReadyClusters)
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionReady, ready, summary.ReadyReason(ready, status.Display.State), message, h.now())
	return status, nil
}
