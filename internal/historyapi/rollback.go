package historyapi

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/history"
	kname "github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/rollout"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Rollback is `fleet rollback`: the clusters chosen run an earlier revision again, held there
// until their Bundle's next revision (a hold in its BundleHistory, which the manager deploys:
// internal/controller/bundle/holds.go), or released.
type Rollback struct {
	// To is a revision, a commit (7 or more of its characters) or a time (RFC 3339): what each
	// cluster ran then.
	To string
	// Clusters selects the clusters by their labels (nil: every cluster that ran the Bundle).
	Clusters labels.Selector
	Reason   string
	// Release removes the holds of the chosen clusters instead.
	Release bool
	// Now rolls back at once where the Bundle rolls out by a RolloutPolicy; without it the
	// rollback goes through the policy's stages and gates (a staged hold).
	Now bool
	At  time.Time
}

// Held is what a rollback did to one Bundle: the clusters held (or released) at each revision.
type Held struct {
	Bundle   string               `json:"bundle"`
	Holds    []fleet.RevisionHold `json:"holds,omitempty"`
	Released []string             `json:"released,omitempty"`
}

// Run reads NAME's Bundles and their records, decides every hold first (any error writes
// nothing), then writes each Bundle's BundleHistory once.
func (rb Rollback) Run(api fleetcontrollers.Interface, namespace, name string) ([]Held, error) {
	found, err := Find(api, namespace, name)
	if err != nil {
		return nil, err
	}
	var out []Held
	var writes []func() error
	for _, b := range found {
		held, write, err := rb.plan(api, namespace, b, found)
		if err != nil {
			return nil, fmt.Errorf("bundle %s/%s: %w", namespace, b.Name, err)
		}
		if write != nil {
			out, writes = append(out, held), append(writes, write)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--clusters %s matches no cluster that ran %s", selectorText(rb.Clusters), name)
	}
	for _, w := range writes {
		if err := w(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// plan decides the holds of one Bundle and returns the write that makes them (nil: none of its
// clusters is chosen).
func (rb Rollback) plan(api fleetcontrollers.Interface, ns string, b Bundle, all []Bundle) (Held, func() error, error) {
	bundle, err := api.Bundle().Get(ns, b.Name, metav1.GetOptions{})
	if err != nil {
		return Held{}, nil, err
	}
	over, err := rollout.RevisionOf(bundle)
	if err != nil {
		return Held{}, nil, err
	}
	chosen, err := rb.chosen(api, ns, b.Record)
	if err != nil || len(chosen) == 0 {
		return Held{}, nil, err
	}
	hist, err := api.BundleHistory().Get(ns, b.Name, metav1.GetOptions{})
	if err != nil {
		return Held{}, nil, err
	}
	held := Held{Bundle: b.Name}
	spec := hist.Spec.DeepCopy()
	spec.Holds = inForce(spec.Holds, over)
	if rb.Release {
		spec.Holds, held.Released = release(spec.Holds, chosen)
		if len(held.Released) == 0 {
			return held, nil, nil
		}
	} else {
		if held.Holds, err = rb.holds(b, ns, chosen, over, all); err != nil {
			return held, nil, err
		}
		if p := policyOf(api, bundle); p != "" && !rb.Now {
			if len(held.Holds) > 1 {
				return held, nil, fmt.Errorf("it rolls out by RolloutPolicy %s, whose stages take one revision at a time, and the chosen clusters return to %d: choose fewer clusters, or --now rolls back at once", p, len(held.Holds))
			}
			held.Holds[0].Staged = true
		}
		if err := checkRevisions(api, ns, b.Name, held.Holds); err != nil {
			return held, nil, err
		}
		spec.Holds = append(spec.Holds, held.Holds...)
	}
	return held, func() error {
		upd := hist.DeepCopy()
		upd.Spec = *spec
		_, err := api.BundleHistory().Update(upd)
		if err != nil {
			return fmt.Errorf("bundlehistory %s/%s: %w", ns, b.Name, err)
		}
		return nil
	}, nil
}

// policyOf is the RolloutPolicy b rolls out by, as the bundle controller reads it: its own
// annotation, else its GitRepo's or HelmOp's ("": none, or they cannot be read).
func policyOf(api fleetcontrollers.Interface, b *fleet.Bundle) string {
	if p := b.Annotations[fleet.RolloutPolicyAnnotation]; p != "" {
		return p
	}
	if repo := b.Labels[fleet.RepoLabel]; repo != "" {
		if gr, err := api.GitRepo().Get(b.Namespace, repo, metav1.GetOptions{}); err == nil {
			return gr.Annotations[fleet.RolloutPolicyAnnotation]
		}
	}
	if op := b.Labels[fleet.HelmNameLabel]; op != "" {
		if o, err := api.HelmOp().Get(b.Namespace, op, metav1.GetOptions{}); err == nil {
			return o.Annotations[fleet.RolloutPolicyAnnotation]
		}
	}
	return ""
}

// chosen are the clusters of the record that the selector picks, as "namespace/name".
func (rb Rollback) chosen(api fleetcontrollers.Interface, ns string, rec *history.Record) ([]string, error) {
	byNamespace := map[string]bool{}
	for _, c := range rec.Clusters {
		cns, _ := splitCluster(ns, c)
		byNamespace[cns] = true
	}
	sel := rb.Clusters
	if sel == nil {
		sel = labels.Everything()
	}
	picked := map[string]bool{}
	for cns := range byNamespace {
		list, err := api.Cluster().List(cns, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, err
		}
		for _, c := range list.Items {
			picked[c.Namespace+"/"+c.Name] = true
		}
	}
	var out []string
	for _, c := range rec.Clusters {
		cns, name := splitCluster(ns, c)
		if picked[cns+"/"+name] {
			out = append(out, cns+"/"+name)
		}
	}
	return out, nil
}

// splitCluster reads a record's cluster name: "name" in the Bundle's namespace, else
// "namespace/name".
func splitCluster(bundleNS, c string) (string, string) {
	if ns, name, ok := strings.Cut(c, "/"); ok {
		return ns, name
	}
	return bundleNS, c
}

// RecordName is cluster clusterNS/name's name in the record of a Bundle of namespace bundleNS.
func RecordName(bundleNS, clusterNS, name string) string {
	if clusterNS == bundleNS {
		return name
	}
	return clusterNS + "/" + name
}

// holds resolves --to for the chosen clusters: one hold per revision they return to.
func (rb Rollback) holds(b Bundle, ns string, chosen []string, over string, all []Bundle) ([]fleet.RevisionHold, error) {
	at, isTime := parseTo(rb.To)
	byRevision := map[string][]string{}
	var order []string
	for _, key := range chosen {
		rev := ""
		if isTime {
			clusterNS, clusterName, _ := strings.Cut(key, "/")
			ran, ok := b.Record.At(RecordName(ns, clusterNS, clusterName), at)
			if !ok {
				continue // ran nothing of the Bundle then
			}
			rev = ran.Revision
		} else {
			var err error
			if rev, err = revisionNamed(b, rb.To, all); err != nil {
				return nil, err
			}
		}
		if byRevision[rev] == nil {
			order = append(order, rev)
		}
		byRevision[rev] = append(byRevision[rev], key)
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("--to %s: none of the chosen clusters ran the Bundle then (a time before the record?)", rb.To)
	}
	out := make([]fleet.RevisionHold, 0, len(order))
	for _, rev := range order {
		out = append(out, fleet.RevisionHold{Revision: rev, Clusters: byRevision[rev], Over: over, Reason: rb.Reason,
			Since: metav1.NewTime(rb.At.UTC().Truncate(time.Second))})
	}
	return out, nil
}

// parseTo reads --to as a time, when it is one.
func parseTo(to string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, to)
	return t, err == nil
}

// revisionNamed is the Bundle's revision that id names: the revision itself, or the last of the
// Bundle's revisions of that commit. A Bundle of a GitRepo that the commit did not change
// returns to the revision it had when the commit first reached a cluster of another Bundle.
func revisionNamed(b Bundle, id string, all []Bundle) (string, error) {
	var found string
	for _, rev := range b.Record.Revisions {
		if Names(rev, id) {
			found = rev.Revision
		}
	}
	if found != "" {
		return found, nil
	}
	first, ok := commitArrived(all, id)
	if !ok {
		return "", fmt.Errorf("--to %s: no revision or commit of that name in the deployment history (past its retention, or never run)", id)
	}
	for i := len(b.Record.Revisions) - 1; i >= 0; i-- {
		rev := b.Record.Revisions[i]
		if p, ok := firstPromoted(rev); ok && !p.After(first) {
			return rev.Revision, nil
		}
	}
	return "", fmt.Errorf("--to %s: the Bundle had not run yet when that commit arrived", id)
}

// commitArrived is when the commit id first reached a cluster, over all the Bundles.
func commitArrived(all []Bundle, id string) (time.Time, bool) {
	var first time.Time
	ok := false
	for _, b := range all {
		for _, rev := range b.Record.Revisions {
			if rev.Commit == "" || !Names(history.Revision{Commit: rev.Commit}, id) {
				continue
			}
			if p, has := firstPromoted(rev); has && (!ok || p.Before(first)) {
				first, ok = p, true
			}
		}
	}
	return first, ok
}

func firstPromoted(rev history.Revision) (time.Time, bool) {
	var first time.Time
	for i, s := range rev.Spans {
		if i == 0 || s.Promoted.Time.Before(first) {
			first = s.Promoted.Time
		}
	}
	return first, len(rev.Spans) > 0
}

// checkRevisions says why a revision held cannot be deployed again: its record does not say
// what it deploys, or its Content is gone.
func checkRevisions(api fleetcontrollers.Interface, ns, bundle string, holds []fleet.RevisionHold) error {
	for _, h := range holds {
		o, err := api.BundleRevision().Get(ns, kname.SafeConcatName(bundle, h.Revision), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("revision %s: %w", h.Revision, err)
		}
		in := o.Spec.Inputs
		if in == nil {
			return fmt.Errorf("revision %s: the deployment history did not record what it deploys (the Bundle had moved on when it was first seen)", h.Revision)
		}
		if in.ContentsID == "" {
			if _, err := api.Content().Get(in.Content, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("revision %s: its content %s: %w", h.Revision, in.Content, err)
			}
		}
	}
	return nil
}

// inForce are the holds made over the Bundle's revision over: the others are released already.
func inForce(holds []fleet.RevisionHold, over string) []fleet.RevisionHold {
	return slices.DeleteFunc(holds, func(h fleet.RevisionHold) bool { return h.Over != over })
}

// release takes the chosen clusters out of the holds; it returns the holds left and the
// clusters released.
func release(holds []fleet.RevisionHold, chosen []string) ([]fleet.RevisionHold, []string) {
	var released []string
	out := holds[:0]
	for _, h := range holds {
		keep := h.Clusters[:0:0]
		for _, c := range h.Clusters {
			if slices.Contains(chosen, c) {
				released = append(released, c)
			} else {
				keep = append(keep, c)
			}
		}
		if len(keep) > 0 {
			h.Clusters = keep
			out = append(out, h)
		}
	}
	slices.Sort(released)
	return out, slices.Compact(released)
}

func selectorText(s labels.Selector) string {
	if s == nil || s.Empty() {
		return "(every cluster)"
	}
	return s.String()
}
