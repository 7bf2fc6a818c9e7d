package notify

import (
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/notify"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// health gathers the drift and readiness events of source ("Kind/name"), whose status summary
// is s, and notes when its NotReady is due.
func (g *gathered) health(source string, s fleet.BundleSummary, conds []genericcondition.GenericCondition) {
	if e, ok := notify.Drift(source, s, sentKey(g.a, source+notify.DriftSuffix)); ok {
		g.events = append(g.events, e)
	}
	ready := fleet.FindCondition(conds, fleet.ConditionReady)
	e, ok, wake := notify.Late(source, s, ready, notReadyAfter(g.a), g.now, sentKey(g.a, source+notify.ReadySuffix))
	if ok {
		g.events = append(g.events, e)
	}
	if wake > 0 && (g.wake == 0 || wake < g.wake) {
		g.wake = wake
	}
}

// helmOpEvents gathers the health of the HelmOps src names (those of this controller's shard)
// and adds every shard's Bundles of them (their Rollouts carry the HelmOp's name).
func (h *handler) helmOpEvents(g *gathered, src fleet.AlertSource) error {
	ops, err := h.HelmOps.Cache().List(g.a.Namespace, selector(src))
	if err != nil {
		return err
	}
	for _, op := range ops {
		if named(src, op.Name) {
			g.health("HelmOp/"+op.Name, op.Status.Summary, op.Status.Conditions)
		}
	}
	return h.bundlesOf(g, fleet.HelmNameLabel, src.Name)
}

// bundlesNamed gathers the health of the Bundles src names (those of this controller's shard)
// and adds them for their rollouts (a Bundle named by name whichever shard holds it).
func (h *handler) bundlesNamed(g *gathered, src fleet.AlertSource) error {
	if len(src.MatchLabels) == 0 && src.Name != "" && src.Name != "*" {
		g.bundles[src.Name] = true
		if b, err := h.Bundles.Cache().Get(g.a.Namespace, src.Name); err == nil {
			g.health("Bundle/"+b.Name, b.Status.Summary, b.Status.Conditions)
		}
		return nil
	}
	bs, err := h.Bundles.Cache().List(g.a.Namespace, selector(src))
	for _, b := range bs {
		if named(src, b.Name) {
			g.bundles[b.Name] = true
			g.health("Bundle/"+b.Name, b.Status.Summary, b.Status.Conditions)
		}
	}
	return err
}

// bundlesOf adds the names of the Bundles whose label names owner ("" or "*": every owner),
// as their Rollouts carry it (the Rollouts cache holds every shard's).
func (h *handler) bundlesOf(g *gathered, label, owner string) error {
	sel := labels.Everything()
	if owner != "" && owner != "*" {
		sel = labels.SelectorFromSet(labels.Set{label: owner})
	}
	rs, err := h.Rollouts.Cache().List(g.a.Namespace, sel)
	for _, r := range rs {
		if r.Labels[label] != "" {
			g.bundles[r.Name] = true
		}
	}
	return err
}

// clustersOf are the Clusters of the namespace src names.
func (h *handler) clustersOf(ns string, src fleet.AlertSource) ([]*fleet.Cluster, error) {
	cs, err := h.Clusters.Cache().List(ns, selector(src))
	out := cs[:0:0]
	for _, c := range cs {
		if named(src, c.Name) {
			out = append(out, c)
		}
	}
	return out, err
}

// dedup drops the Clusters named twice (by two sources).
func dedup(cs []*fleet.Cluster) []*fleet.Cluster {
	seen := map[string]bool{}
	out := cs[:0:0]
	for _, c := range cs {
		if !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c)
		}
	}
	return out
}

// sentKey is the key of the last message the Alert sent for source.
func sentKey(a *fleet.Alert, source string) string {
	for _, s := range a.Status.Sent {
		if s.Source == source {
			return s.Key
		}
	}
	return ""
}
