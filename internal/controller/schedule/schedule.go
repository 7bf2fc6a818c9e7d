// Package schedule keeps Schedules' deployment windows: whether each is open, when the next
// opens and which clusters follow it. A cluster that a Schedule targets is scheduled
// (Cluster status.scheduled); while none of its Schedules' windows is open (status.activeSchedule
// false) its BundleDeployments are offSchedule and its agent deploys nothing new, catching up
// when a window opens. (manager)
package schedule

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// ConditionAccepted is False while the Schedule's expression, duration or location is invalid.
const ConditionAccepted = "Accepted"

// edgeDelay is added to the wait for a window's start or end, so the look after it sees the
// window changed.
const edgeDelay = time.Second

// parser reads cron expressions with an optional seconds field and descriptors (@daily...).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Window is a parsed Schedule: starts from the expression, each open for duration.
type Window struct {
	starts   cron.Schedule
	duration time.Duration
	location *time.Location
}

// Parse reads a Schedule's spec; the error names the field.
func Parse(spec fleet.ScheduleSpec) (Window, error) {
	w := Window{duration: spec.Duration.Duration, location: time.UTC}
	if spec.Location != "" {
		loc, err := time.LoadLocation(spec.Location)
		if err != nil {
			return w, fmt.Errorf("spec.location %q: %v", spec.Location, err)
		}
		w.location = loc
	}
	if strings.TrimSpace(spec.Schedule) == "" {
		return w, fmt.Errorf("spec.schedule is empty: give a cron expression")
	}
	starts, err := parser.Parse(spec.Schedule)
	if err != nil {
		return w, fmt.Errorf("spec.schedule %q: %v", spec.Schedule, err)
	}
	if w.duration <= 0 {
		return w, fmt.Errorf("spec.duration %s: must be positive", spec.Duration.Duration)
	}
	w.starts = starts
	return w, nil
}

// At says whether a window is open at now, when the open one closes, and when the next one
// opens.
func (w Window) At(now time.Time) (open bool, closes, next time.Time) {
	local := now.In(w.location)
	start := w.starts.Next(local.Add(-w.duration))
	if !start.After(local) {
		open, closes = true, start.Add(w.duration)
	}
	return open, closes, w.starts.Next(local)
}

// Deps are what the controller reads and writes.
type Deps struct {
	Schedules     fleetcontrollers.ScheduleController
	Clusters      fleetcontrollers.ClusterController
	ClusterGroups fleetcontrollers.ClusterGroupCache
	// Now is the clock (time.Now unless tests drive it).
	Now func() time.Time
}

type handler struct {
	Deps
}

// Register starts keeping Schedules, and returns the status step of the cluster controller
// that says whether a cluster is scheduled and in an open window.
func Register(ctx context.Context, d Deps) func(*fleet.Cluster, fleet.ClusterStatus) (fleet.ClusterStatus, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	h := &handler{Deps: d}
	fleetcontrollers.RegisterScheduleStatusHandler(ctx, d.Schedules, "", "schedule", h.status)
	d.Schedules.OnChange(ctx, "schedule-clusters", func(key string, s *fleet.Schedule) (*fleet.Schedule, error) {
		// Its clusters look again (all of the namespace: a deleted Schedule is gone from the cache).
		ns, _, _ := strings.Cut(key, "/")
		clusters, err := d.Clusters.Cache().List(ns, labels.Everything())
		for _, c := range clusters {
			d.Clusters.Enqueue(c.Namespace, c.Name)
		}
		return s, err
	})
	return h.clusterStep
}

// status reports whether the Schedule's window is open, when the next opens and which clusters
// follow it, and looks again at the next edge.
func (h *handler) status(s *fleet.Schedule, status fleet.ScheduleStatus) (fleet.ScheduleStatus, error) {
	if s.DeletionTimestamp != nil {
		return status, nil
	}
	now := h.Now()
	w, err := Parse(s.Spec)
	if err != nil {
		fleet.SetCondition(&status.Conditions, ConditionAccepted, corev1.ConditionFalse, "Invalid", err.Error(), now)
		status.Active, status.NextStartTime = false, metav1.Time{}
		return status, nil
	}
	fleet.SetCondition(&status.Conditions, ConditionAccepted, corev1.ConditionTrue, "", "", now)
	open, closes, next := w.At(now)
	status.Active, status.NextStartTime = open, metav1.NewTime(next.UTC())
	matching, err := h.matching(s)
	if err != nil {
		return status, err
	}
	status.MatchingClusters = matching
	edge := next
	if open && closes.Before(next) {
		edge = closes
	}
	h.Schedules.EnqueueAfter(s.Namespace, s.Name, edge.Sub(now)+edgeDelay)
	return status, nil
}

// matching are the names of the clusters of the Schedule's namespace one of its targets matches.
func (h *handler) matching(s *fleet.Schedule) ([]string, error) {
	clusters, err := h.Clusters.Cache().List(s.Namespace, labels.Everything())
	if err != nil {
		return nil, err
	}
	gm, err := h.groups(s.Namespace)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range clusters {
		if targets(s, c, gm) {
			names = append(names, c.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// groups matches clusters to the ClusterGroups of namespace ns.
func (h *handler) groups(ns string) (*target.GroupMatcher, error) {
	groups, err := h.ClusterGroups.List(ns, labels.Everything())
	if err != nil {
		return nil, err
	}
	return target.NewGroupMatcher(groups)
}

// targets reports whether one of the Schedule's targets matches the cluster: each field set
// must match (a target that sets none matches nothing).
func targets(s *fleet.Schedule, c *fleet.Cluster, gm *target.GroupMatcher) bool {
	for _, t := range s.Spec.Targets.Clusters {
		if t.ClusterName == "" && t.ClusterSelector == nil && t.ClusterGroup == "" && t.ClusterGroupSelector == nil {
			continue
		}
		if t.ClusterName != "" && t.ClusterName != c.Name {
			continue
		}
		if t.ClusterSelector != nil && !selects(t.ClusterSelector, c.Labels) {
			continue
		}
		if t.ClusterGroup != "" || t.ClusterGroupSelector != nil {
			inGroup := false
			for _, g := range gm.Groups(c) {
				if (t.ClusterGroup == "" || g.Name == t.ClusterGroup) && (t.ClusterGroupSelector == nil || selects(t.ClusterGroupSelector, g.Labels)) {
					inGroup = true
					break
				}
			}
			if !inGroup {
				continue
			}
		}
		return true
	}
	return false
}

func selects(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

// clusterStep sets whether the cluster is scheduled (a valid Schedule of its namespace targets
// it) and in an open window of one of them.
func (h *handler) clusterStep(c *fleet.Cluster, status fleet.ClusterStatus) (fleet.ClusterStatus, error) {
	status.Scheduled, status.ActiveSchedule = false, false
	if c.DeletionTimestamp != nil {
		return status, nil
	}
	schedules, err := h.Schedules.Cache().List(c.Namespace, labels.Everything())
	if err != nil || len(schedules) == 0 {
		return status, err
	}
	gm, err := h.groups(c.Namespace)
	if err != nil {
		return status, err
	}
	now := h.Now()
	for _, s := range schedules {
		w, err := Parse(s.Spec)
		if err != nil || s.DeletionTimestamp != nil || !targets(s, c, gm) {
			continue
		}
		status.Scheduled = true
		if open, _, _ := w.At(now); open {
			status.ActiveSchedule = true
		}
	}
	return status, nil
}
