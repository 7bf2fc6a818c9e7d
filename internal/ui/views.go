package ui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// maxRows bounds the clusters a bundle lists (non-ready ones first): no page ships 50,000 rows.
const maxRows = 50

// repoRow is a GitRepo or HelmOp on the overview.
type repoRow struct {
	Kind, Namespace, Name, Commit, Ready, State, Problem, Changed string
	Paused                                                        bool
}

func (r repoRow) Path() string {
	return "/" + strings.ToLower(r.Kind) + "s/" + r.Namespace + "/" + r.Name
}

type overviewView struct {
	Rows                              []repoRow
	Repos, Failing, Clusters, Offline int
}

// changed is when an object's Ready condition last changed ("" without one).
func changed(conds []genericcondition.GenericCondition) string {
	if c := fleet.FindCondition(conds, fleet.ConditionReady); c != nil {
		return c.LastUpdateTime
	}
	return ""
}

func (s *Server) overview() overviewView {
	var v overviewView
	for _, gr := range list[*fleet.GitRepo](s.k.gitRepos) {
		row := repoRow{Kind: "GitRepo", Namespace: gr.Namespace, Name: gr.Name, Commit: short(gr.Status.Commit), Paused: gr.Spec.Paused,
			Ready: fmt.Sprintf("%d/%d", gr.Status.ReadyClusters, gr.Status.DesiredReadyClusters), State: summary.GitRepoState(gr),
			Problem: summary.SourceProblem(gr.Status.Conditions)}
		row.Changed = changed(gr.Status.Conditions)
		v.Rows = append(v.Rows, row)
	}
	for _, op := range list[*fleet.HelmOp](s.k.helmOps) {
		row := repoRow{Kind: "HelmOp", Namespace: op.Namespace, Name: op.Name, Commit: op.Status.Version, Paused: op.Spec.Paused,
			Ready: fmt.Sprintf("%d/%d", op.Status.ReadyClusters, op.Status.DesiredReadyClusters), State: summary.HelmOpState(op),
			Problem: summary.SourceProblem(op.Status.Conditions)}
		row.Changed = changed(op.Status.Conditions)
		v.Rows = append(v.Rows, row)
	}
	slices.SortFunc(v.Rows, func(a, b repoRow) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	v.Repos = len(v.Rows)
	for _, r := range v.Rows {
		if r.Problem != "" || r.State != string(fleet.Ready) {
			v.Failing++
		}
	}
	for _, c := range list[*fleet.Cluster](s.k.clusters) {
		v.Clusters++
		if c.Status.Display.State == "Offline" {
			v.Offline++
		}
	}
	return v
}

func stateOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}

// bundleView is one bundle of a GitRepo or HelmOp page.
type bundleView struct {
	Namespace, Name, Ready, State, Message string
	Paused                                 bool
	Rollout                                *fleet.Rollout
	Clusters                               []clusterRow
	More                                   int
	// Secrets are the bundle's sealed SOPS files; Unsealed of Sealed clusters opened them.
	Secrets          []string
	Sealed, Unsealed int
	// Held says which clusters a rollback holds at an earlier revision (summary.Held).
	Held string
}

// clusterRow is a bundle's deployment to one cluster.
type clusterRow struct {
	Cluster, State, Message string
	// Sealed is where the bundle's sealed secrets stand on the cluster (summary.Sealed).
	Sealed string
	// HeldAt is the revision a rollback holds the cluster at (summary.HeldAt).
	HeldAt   string
	NonReady []string
	Modified []fleet.ModifiedStatus
}

type repoView struct {
	Kind, Namespace, Name, Commit, State, Problem string
	Paused, Found                                 bool
	Bundles                                       []bundleView
}

// repo is a GitRepo's (or HelmOp's) page: commit -> bundles -> clusters.
func (s *Server) repo(kind, ns, name string) repoView {
	v := repoView{Kind: kind, Namespace: ns, Name: name}
	label := fleet.RepoLabel
	switch kind {
	case "GitRepo":
		for _, gr := range list[*fleet.GitRepo](s.k.gitRepos) {
			if gr.Namespace == ns && gr.Name == name {
				v.Found, v.Commit, v.Paused, v.State = true, gr.Status.Commit, gr.Spec.Paused, summary.GitRepoState(gr)
				v.Problem = summary.SourceProblem(gr.Status.Conditions)
			}
		}
	default:
		label = fleet.HelmNameLabel
		for _, op := range list[*fleet.HelmOp](s.k.helmOps) {
			if op.Namespace == ns && op.Name == name {
				v.Found, v.Commit, v.Paused, v.State = true, op.Status.Version, op.Spec.Paused, summary.HelmOpState(op)
				v.Problem = summary.SourceProblem(op.Status.Conditions)
			}
		}
	}
	key := kind + "/" + ns + "/" + name
	byBundle := map[string][]*fleet.BundleDeployment{}
	for _, bd := range owned[*fleet.BundleDeployment](s.k.deployments, key) {
		byBundle[bd.Labels[fleet.BundleLabel]] = append(byBundle[bd.Labels[fleet.BundleLabel]], bd)
	}
	for _, b := range owned[*fleet.Bundle](s.k.bundles, key) {
		if b.Labels[label] != name {
			continue
		}
		bv := bundleView{Namespace: b.Namespace, Name: b.Name, Paused: b.Spec.Paused, Rollout: byKey[*fleet.Rollout](s.k.rollouts, b.Namespace, b.Name),
			Ready: fmt.Sprintf("%d/%d", b.Status.Summary.Ready, b.Status.Summary.DesiredReady), State: summary.BundleState(b),
			Message: summary.Problem(b.Status.Conditions, fleet.ConditionReady), Held: summary.Held(b)}
		bv.Clusters, bv.More = clusterRows(byBundle[b.Name])
		for _, bd := range byBundle[b.Name] {
			bv.Secrets = summary.SealedNames(bv.Secrets, bd)
			switch summary.Sealed(bd) {
			case summary.SealedUnsealed:
				bv.Sealed, bv.Unsealed = bv.Sealed+1, bv.Unsealed+1
			case summary.SealedWaiting:
				bv.Sealed++
			}
		}
		v.Bundles = append(v.Bundles, bv)
	}
	slices.SortFunc(v.Bundles, func(a, b bundleView) int { return strings.Compare(a.Name, b.Name) })
	return v
}

// clusterRows are a bundle's deployments, those not ready first, at most maxRows.
func clusterRows(bds []*fleet.BundleDeployment) ([]clusterRow, int) {
	var rows []clusterRow
	for _, bd := range bds {
		st := summary.State(bd)
		row := clusterRow{Cluster: bd.Labels[fleet.ClusterNamespaceLabel] + "/" + bd.Labels[fleet.ClusterLabel], State: stateOr(string(st), "Ready"),
			Modified: bd.Status.ModifiedStatus, Sealed: summary.Sealed(bd), HeldAt: summary.HeldAt(bd)}
		if st != fleet.Ready {
			row.Message = summary.Message(bd, st)
		}
		for _, nr := range bd.Status.NonReadyStatus {
			row.NonReady = append(row.NonReady, fmt.Sprintf("%s %s/%s: %s", nr.Kind, nr.Namespace, nr.Name, nr.Summary.State))
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b clusterRow) int {
		return cmp.Or(cmp.Compare(a.ready(), b.ready()), strings.Compare(a.Cluster, b.Cluster)) // not ready first
	})
	if len(rows) > maxRows {
		return rows[:maxRows], len(rows) - maxRows
	}
	return rows, 0
}

func (r clusterRow) ready() int {
	if r.State == "Ready" {
		return 1
	}
	return 0
}

// clusterView is a row of the clusters page.
type clusterView struct {
	Namespace, Name, Labels, Groups, LastSeen, Bundles, State string
	Offline                                                   bool
}

func (s *Server) clusters() []clusterView {
	groups := list[*fleet.ClusterGroup](s.k.groups)
	var out []clusterView
	for _, c := range list[*fleet.Cluster](s.k.clusters) {
		var ls, gs []string
		for k, val := range c.Labels {
			if !strings.HasPrefix(k, "fleet.cattle.io/") && !strings.HasPrefix(k, "management.cattle.io/") {
				ls = append(ls, k+"="+val)
			}
		}
		slices.Sort(ls)
		for _, g := range groups {
			if g.Namespace != c.Namespace || g.Spec.Selector == nil {
				continue
			}
			if sel, err := metav1.LabelSelectorAsSelector(g.Spec.Selector); err == nil && sel.Matches(labels.Set(c.Labels)) {
				gs = append(gs, g.Name)
			}
		}
		slices.Sort(gs)
		seen := "never"
		if !c.Status.Agent.LastSeen.IsZero() {
			seen = c.Status.Agent.LastSeen.UTC().Format(time.RFC3339)
		}
		out = append(out, clusterView{Namespace: c.Namespace, Name: c.Name, Labels: strings.Join(ls, ", "), Groups: strings.Join(gs, ", "),
			LastSeen: seen, Bundles: c.Status.Display.ReadyBundles, State: stateOr(c.Status.Display.State, "Active"),
			Offline: c.Status.Display.State == "Offline"})
	}
	slices.SortFunc(out, func(a, b clusterView) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// groupView is a row of the cluster groups page.
type groupView struct{ Namespace, Name, Selector, Clusters, Bundles string }

func (s *Server) groups() []groupView {
	var out []groupView
	for _, g := range list[*fleet.ClusterGroup](s.k.groups) {
		sel := "(none)"
		if g.Spec.Selector != nil {
			sel = metav1.FormatLabelSelector(g.Spec.Selector)
		}
		out = append(out, groupView{Namespace: g.Namespace, Name: g.Name, Selector: sel, Clusters: g.Status.Display.ReadyClusters,
			Bundles: g.Status.Display.ReadyBundles})
	}
	slices.SortFunc(out, func(a, b groupView) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// alertView is a row of the alerts page: what an Alert reports on, through which provider, and
// what it last delivered.
type alertView struct {
	Namespace, Name, Provider, Sources, State, LastSent, LastMessage, LastError string
}

// alertsPage is the alerts page: its rows, or why they cannot be read.
type alertsPage struct {
	Rows    []alertView
	Problem string
}

func (s *Server) alerts() alertsPage {
	p := alertsPage{Problem: s.k.alerts.problem()}
	for _, a := range list[*fleet.Alert](s.k.alerts) {
		var srcs []string
		for _, src := range a.Spec.Sources {
			srcs = append(srcs, src.Kind+" "+cmp.Or(src.Name, "*"))
		}
		v := alertView{Namespace: a.Namespace, Name: a.Name, Provider: a.Spec.ProviderRef, Sources: strings.Join(srcs, ", "),
			State: "Watching", LastMessage: a.Status.LastMessage, LastError: a.Status.LastError}
		if c := fleet.FindCondition(a.Status.Conditions, fleet.ConditionDelivered); c != nil {
			v.State = map[corev1.ConditionStatus]string{corev1.ConditionTrue: "Delivered", corev1.ConditionFalse: "Failing"}[c.Status]
		}
		if a.Spec.Suspend {
			v.State = "Suspended"
		}
		if v.State == "" {
			v.State = "Watching"
		}
		if a.Status.LastSent != nil {
			v.LastSent = a.Status.LastSent.UTC().Format(time.RFC3339)
		}
		p.Rows = append(p.Rows, v)
	}
	slices.SortFunc(p.Rows, func(a, b alertView) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return p
}

// pageSize is how many clusters the clusters page lists at once.
const pageSize = 200

// clusterPage is one page of the clusters list (from 0), offline clusters first.
type clusterPage struct {
	Rows                 []clusterView
	Page, Pages, Total   int
	Prev, Next, From, To int
	Offline              int
}

func (s *Server) clusterPage(page int) clusterPage {
	all := s.clusters()
	slices.SortStableFunc(all, func(a, b clusterView) int { return cmp.Compare(b2i(b.Offline), b2i(a.Offline)) })
	p := clusterPage{Total: len(all), Pages: max(1, (len(all)+pageSize-1)/pageSize)}
	for _, c := range all {
		p.Offline += b2i(c.Offline)
	}
	p.Page = min(max(page, 0), p.Pages-1)
	p.From, p.To = p.Page*pageSize, min((p.Page+1)*pageSize, len(all))
	p.Rows = all[p.From:p.To]
	p.Prev, p.Next = p.Page-1, p.Page+1
	if p.Next >= p.Pages {
		p.Next = -1
	}
	p.From++
	return p
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
