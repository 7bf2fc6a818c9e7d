// Package notify is the manager's notifier: for each Alert, the one message each of its sources'
// transitions is worth (internal/notify decides it), delivered through the Alert's provider by
// workers of its own, so a slow or failing endpoint never slows another controller. What was
// delivered is the Alert's status (status.sent), so a restart neither loses nor repeats a
// message: what a source's status says now and the Alert does not record as sent is sent.
package notify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/rancher/wrangler/v3/pkg/relatedresource"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetgo/fleet/internal/notify"
	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Deps are what the notifier reads and writes.
type Deps struct {
	Alerts    fleetcontrollers.AlertController
	Providers fleetcontrollers.AlertProviderController
	GitRepos  fleetcontrollers.GitRepoController
	Bundles   fleetcontrollers.BundleController
	Rollouts  fleetcontrollers.RolloutController
	Secrets   corecontrollers.SecretCache
	// Guard refuses Secrets that are credentials of the manager or a cluster.
	Guard secretuse.Guard
}

type handler struct {
	Deps
	out *deliveries
}

// Register starts the notifier: Alerts are looked at again when their provider or any source of
// their namespace changes.
func Register(ctx context.Context, d Deps) {
	h := &handler{Deps: d}
	h.out = newDeliveries(ctx, h)
	d.Alerts.OnChange(ctx, "notify", h.sync)
	again := func(namespace string, _ string, _ runtime.Object) ([]relatedresource.Key, error) {
		alerts, err := d.Alerts.Cache().List(namespace, labels.Everything())
		keys := make([]relatedresource.Key, 0, len(alerts))
		for _, a := range alerts {
			keys = append(keys, relatedresource.Key{Namespace: a.Namespace, Name: a.Name})
		}
		return keys, err
	}
	relatedresource.Watch(ctx, "notify-sources", again, d.Alerts, d.Rollouts, d.GitRepos, d.Providers)
}

// sync hands each source event the Alert has not sent to the delivery workers. An Alert seen for
// the first time records what its sources show without sending it: it reports what happens
// from its creation on.
func (h *handler) sync(key string, a *fleet.Alert) (*fleet.Alert, error) {
	if a == nil || a.DeletionTimestamp != nil {
		h.out.forget(key)
		return a, nil
	}
	if a.Spec.Suspend {
		return a, nil
	}
	events, err := h.events(a)
	if err != nil {
		return a, err
	}
	if a.Status.Sent == nil && fleet.FindCondition(a.Status.Conditions, fleet.ConditionDelivered) == nil {
		return h.baseline(a, events)
	}
	if nonce := a.Annotations[fleet.NotifyTestAnnotation]; nonce != "" {
		events = append(events, notify.Test(a.Name, nonce))
	}
	forge := false
	if p, err := h.Providers.Cache().Get(a.Namespace, a.Spec.ProviderRef); err == nil {
		forge = p.Spec.Type == fleet.ProviderGitHub || p.Spec.Type == fleet.ProviderGitLab
	}
	for source, evs := range unsent(a, events) {
		var wanted []notify.Event
		for _, e := range evs {
			// A forge takes commit checks only; chat and webhooks take the rest; a test goes to
			// any (a forge's fails, saying so).
			if e.Reason != notify.TestReason && (e.CommitState != "") != forge {
				continue
			}
			if e.CommitState != "" || e.Reason == notify.TestReason || notify.Wanted(a.Spec.EventSeverity, a.Spec.Events, e) {
				wanted = append(wanted, e)
			}
		}
		h.out.add(a, source, wanted)
	}
	return a, nil
}

// unsent are, per source, its events (in order) after the last one the Alert sent: all of them
// when it sent none of them.
func unsent(a *fleet.Alert, events []notify.Event) map[string][]notify.Event {
	sent := map[string]string{}
	for _, s := range a.Status.Sent {
		sent[s.Source] = s.Key
	}
	by := map[string][]notify.Event{}
	for _, e := range events {
		by[e.Source] = append(by[e.Source], e)
	}
	for source, evs := range by {
		for i, e := range evs {
			if e.Key == sent[source] {
				by[source] = evs[i+1:]
			}
		}
	}
	return by
}

// baseline records the sources' events as sent, sending none.
func (h *handler) baseline(a *fleet.Alert, events []notify.Event) (*fleet.Alert, error) {
	upd := a.DeepCopy()
	upd.Status.Sent = []fleet.AlertSent{}
	for _, e := range events {
		if e.Reason != notify.TestReason { // asked for: sent once the Alert watches
			setSent(&upd.Status, fleet.AlertSent{Source: e.Source, Key: e.Key}) // a source's last
		}
	}
	fleet.SetCondition(&upd.Status.Conditions, fleet.ConditionDelivered, corev1.ConditionUnknown, "Watching",
		"nothing sent yet: what the sources showed when the Alert came is not sent", time.Now())
	return h.Alerts.UpdateStatus(upd)
}

// events are the current events of the Alert's sources: each GitRepo's own and its commit's
// state, and each rollout of the Bundles it names or those of the GitRepos and HelmOps it names.
func (h *handler) events(a *fleet.Alert) ([]notify.Event, error) {
	var out []notify.Event
	bundles := map[string]bool{}
	for _, src := range a.Spec.Sources {
		var err error
		switch src.Kind {
		case "GitRepo":
			var evs []notify.Event
			evs, err = h.gitRepoEvents(a, src, bundles)
			out = append(out, evs...)
		case "HelmOp":
			err = h.bundlesOf(a.Namespace, fleet.HelmNameLabel, src.Name, bundles)
		case "Bundle":
			err = h.bundlesNamed(a.Namespace, src, bundles)
		}
		if err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(bundles))
	for n := range bundles {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if r, err := h.Rollouts.Cache().Get(a.Namespace, n); err == nil {
			out = append(out, notify.RolloutEvents(n, &r.Status)...)
		}
	}
	return out, nil
}

// gitRepoEvents are the events of the GitRepos src names (their own and their commits'), their
// Bundles added to bundles.
func (h *handler) gitRepoEvents(a *fleet.Alert, src fleet.AlertSource, bundles map[string]bool) ([]notify.Event, error) {
	repos, err := h.GitRepos.Cache().List(a.Namespace, selector(src))
	if err != nil {
		return nil, err
	}
	var out []notify.Event
	for _, gr := range repos {
		if !named(src, gr.Name) {
			continue
		}
		if e, ok := notify.OfGitRepo(gr.Name, &gr.Status, failedBefore(a, "GitRepo/"+gr.Name)); ok {
			out = append(out, e)
		}
		// Its Bundles' Rollouts, read once for its rollouts' events and its commit's check.
		rs, err := h.Rollouts.Cache().List(a.Namespace, labels.SelectorFromSet(labels.Set{fleet.RepoLabel: gr.Name}))
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			bundles[r.Name] = true
		}
		if gr.Status.Commit != "" {
			out = append(out, commitEvent(gr, rs))
		}
	}
	return out, nil
}

// failedBefore says whether the last message the Alert sent for source said it failed.
func failedBefore(a *fleet.Alert, source string) bool {
	for _, s := range a.Status.Sent {
		if s.Source == source && strings.Contains(s.Key, "/"+notify.Failed+"/") {
			return true
		}
	}
	return false
}

// bundlesNamed adds the Bundles src names.
func (h *handler) bundlesNamed(ns string, src fleet.AlertSource, into map[string]bool) error {
	if len(src.MatchLabels) == 0 && src.Name != "" && src.Name != "*" {
		into[src.Name] = true // its Rollout, whichever shard holds the Bundle
		return nil
	}
	bs, err := h.Bundles.Cache().List(ns, selector(src))
	for _, b := range bs {
		if named(src, b.Name) {
			into[b.Name] = true
		}
	}
	return err
}

// bundlesOf adds the names of the Bundles whose label names owner ("" or "*": every owner),
// as their Rollouts carry it (the Rollouts cache holds every shard's).
func (h *handler) bundlesOf(ns, label, owner string, into map[string]bool) error {
	sel := labels.Everything()
	if owner != "" && owner != "*" {
		sel = labels.SelectorFromSet(labels.Set{label: owner})
	}
	rs, err := h.Rollouts.Cache().List(ns, sel)
	for _, r := range rs {
		if r.Labels[label] != "" {
			into[r.Name] = true
		}
	}
	return err
}

// commitEvent is the commit check a GitRepo's commit earns now, given its Bundles' Rollouts (for
// the forges' providers).
func commitEvent(gr *fleet.GitRepo, rs []*fleet.Rollout) notify.Event {
	rollouts := make([]*fleet.RolloutStatus, 0, len(rs))
	for _, r := range rs {
		rollouts = append(rollouts, &r.Status)
	}
	state, desc := notify.CommitState(&gr.Status, rollouts)
	return notify.Event{Source: commitSource(gr.Name), Key: fmt.Sprintf("commit/%s/%s", gr.Status.Commit, state), Reason: "Commit",
		Severity: fleet.SeverityInfo, Summary: desc, Commit: gr.Status.Commit, Repo: gr.Spec.Repo, CommitState: state, Context: "fleet/" + gr.Name}
}

// commitSource names the commit checks of a GitRepo among an Alert's sources.
func commitSource(gitrepo string) string { return "GitRepo/" + gitrepo + "#commit" }

func selector(src fleet.AlertSource) labels.Selector {
	if len(src.MatchLabels) == 0 {
		return labels.Everything()
	}
	return labels.SelectorFromSet(src.MatchLabels)
}

func named(src fleet.AlertSource, name string) bool {
	return src.Name == "" || src.Name == "*" || src.Name == name
}

// sendTimeout bounds one delivery.
const sendTimeout = 10 * time.Second
