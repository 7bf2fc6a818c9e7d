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
	HelmOps   fleetcontrollers.HelmOpController
	Clusters  fleetcontrollers.ClusterController
	Rollouts  fleetcontrollers.RolloutController
	Secrets   corecontrollers.SecretCache
	// Guard refuses Secrets that are credentials of the manager or a cluster.
	Guard secretuse.Guard
}

type handler struct {
	Deps
	out   *deliveries
	folds *folds
}

// Register starts the notifier: Alerts are looked at again when their provider or any source of
// their namespace changes.
func Register(ctx context.Context, d Deps) {
	h := &handler{Deps: d, folds: newFolds()}
	h.out = newDeliveries(ctx, h)
	d.Alerts.OnChange(ctx, "notify", h.sync)
	again := func(namespace string, _ string, obj runtime.Object) ([]relatedresource.Key, error) {
		alerts, err := d.Alerts.Cache().List(namespace, labels.Everything())
		keys := make([]relatedresource.Key, 0, len(alerts))
		for _, a := range alerts {
			if looksAt(a, obj) {
				keys = append(keys, relatedresource.Key{Namespace: a.Namespace, Name: a.Name})
			}
		}
		return keys, err
	}
	relatedresource.Watch(ctx, "notify-sources", again, d.Alerts, d.Rollouts, d.GitRepos, d.Providers, d.HelmOps, d.Bundles, d.Clusters)
}

// looksAt says whether a change of obj may change what Alert a sends: a Cluster, Bundle or
// HelmOp only when a names that kind (those change often); anything else (a Rollout, a
// GitRepo, a provider, or what was deleted) always.
func looksAt(a *fleet.Alert, obj runtime.Object) bool {
	kind := ""
	switch obj.(type) {
	case *fleet.Cluster:
		kind = "Cluster"
	case *fleet.Bundle:
		kind = "Bundle"
	case *fleet.HelmOp:
		kind = "HelmOp"
	default:
		return true
	}
	return slices.ContainsFunc(a.Spec.Sources, func(s fleet.AlertSource) bool { return s.Kind == kind })
}

// sync hands each source event the Alert has not sent to the delivery workers. An Alert seen for
// the first time records what its sources show without sending it: it reports what happens
// from its creation on.
func (h *handler) sync(key string, a *fleet.Alert) (*fleet.Alert, error) {
	if a == nil || a.DeletionTimestamp != nil {
		h.out.forget(key)
		h.folds.forget(key)
		return a, nil
	}
	if a.Spec.Suspend {
		return a, nil
	}
	g, err := h.events(a)
	if err != nil {
		return a, err
	}
	if a.Status.Sent == nil && fleet.FindCondition(a.Status.Conditions, fleet.ConditionDelivered) == nil {
		return h.baseline(a, g.events)
	}
	if nonce := a.Annotations[fleet.NotifyTestAnnotation]; nonce != "" {
		g.events = append(g.events, notify.Test(a.Name, nonce))
	}
	forge := false
	if p, err := h.Providers.Cache().Get(a.Namespace, a.Spec.ProviderRef); err == nil {
		forge = p.Spec.Type == fleet.ProviderGitHub || p.Spec.Type == fleet.ProviderGitLab
	}
	wake := g.wake
	for source, evs := range unsent(a, g.events) {
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
		if cur := current(g.events, source); cur != nil && !forge {
			var again time.Duration
			wanted, again = h.folds.hold(a, source, *cur, wanted, g.now)
			wake = sooner(wake, again)
		}
		h.out.add(a, source, wanted)
	}
	if wake > 0 {
		h.Alerts.EnqueueAfter(a.Namespace, a.Name, wake)
	}
	return a, nil
}

// current is source's newest event, nil when it has none.
func current(events []notify.Event, source string) *notify.Event {
	var cur *notify.Event
	for i := range events {
		if events[i].Source == source {
			cur = &events[i]
		}
	}
	return cur
}

func sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
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
			if e.Key == notify.BaseKey(sent[source]) {
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
			setSent(&upd.Status, fleet.AlertSent{Source: e.Source, Key: e.Key, Reason: e.Reason}) // a source's last
		}
	}
	fleet.SetCondition(&upd.Status.Conditions, fleet.ConditionDelivered, corev1.ConditionUnknown, "Watching",
		"nothing sent yet: what the sources showed when the Alert came is not sent", time.Now())
	return h.Alerts.UpdateStatus(upd)
}

// gathered are an Alert's sources' current events, the Bundles whose rollouts it reports on,
// and how long until a source's NotReady is due (0: none is).
type gathered struct {
	a       *fleet.Alert
	now     time.Time
	events  []notify.Event
	bundles map[string]bool
	wake    time.Duration
}

// events are the current events of the Alert's sources: each GitRepo's own and its commit's
// state, each source's drift and readiness, its clusters' being offline, and each rollout of
// the Bundles it names or those of the GitRepos and HelmOps it names.
func (h *handler) events(a *fleet.Alert) (*gathered, error) {
	g := &gathered{a: a, now: time.Now(), bundles: map[string]bool{}}
	var clusters []*fleet.Cluster
	for _, src := range a.Spec.Sources {
		var err error
		switch src.Kind {
		case "GitRepo":
			err = h.gitRepoEvents(g, src)
		case "HelmOp":
			err = h.helmOpEvents(g, src)
		case "Bundle":
			err = h.bundlesNamed(g, src)
		case "Cluster":
			var cs []*fleet.Cluster
			cs, err = h.clustersOf(a.Namespace, src)
			clusters = append(clusters, cs...)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(clusters) > 0 {
		if e, ok := notify.OfClusters(dedup(clusters), sentKey(a, notify.ClustersSource)); ok {
			g.events = append(g.events, e)
		}
	}
	names := make([]string, 0, len(g.bundles))
	for n := range g.bundles {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if r, err := h.Rollouts.Cache().Get(a.Namespace, n); err == nil {
			g.events = append(g.events, notify.RolloutEvents(n, &r.Status)...)
		}
	}
	return g, nil
}

// gitRepoEvents gathers the events of the GitRepos src names (their own, their health's and
// their commits'), and their Bundles.
func (h *handler) gitRepoEvents(g *gathered, src fleet.AlertSource) error {
	repos, err := h.GitRepos.Cache().List(g.a.Namespace, selector(src))
	if err != nil {
		return err
	}
	for _, gr := range repos {
		if !named(src, gr.Name) {
			continue
		}
		if e, ok := notify.OfGitRepo(gr.Name, &gr.Status, failedBefore(g.a, "GitRepo/"+gr.Name)); ok {
			g.events = append(g.events, e)
		}
		g.health("GitRepo/"+gr.Name, gr.Status.Summary, gr.Status.Conditions)
		// Its Bundles' Rollouts, read once for its rollouts' events and its commit's check.
		rs, err := h.Rollouts.Cache().List(g.a.Namespace, labels.SelectorFromSet(labels.Set{fleet.RepoLabel: gr.Name}))
		if err != nil {
			return err
		}
		for _, r := range rs {
			g.bundles[r.Name] = true
		}
		if gr.Status.Commit != "" {
			g.events = append(g.events, commitEvent(gr, rs))
		}
	}
	return nil
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
