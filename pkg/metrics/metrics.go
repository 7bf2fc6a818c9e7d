// Package metrics exports the manager's Prometheus metrics under Fleet's names, so dashboards
// and alerts written for Fleet keep working: fleet_bundle_*, fleet_bundledeployment_state,
// fleet_cluster_*, fleet_cluster_group_*, fleet_gitrepo_* from the objects' status, and the
// GitOps counters and histograms (fleet_gitjobs_created_*, fleet_gitjob_duration_seconds,
// fleet_gitrepo_fetch_latest_commit_*).
//
// The status families are read from the controllers' informer caches when /metrics is scraped:
// no list call, nothing kept between scrapes, and a deleted object's series are gone from the
// next scrape. Their labels are bounded: Fleet's commit and generation labels, which make a new
// series for every commit, are left out. (manager)
package metrics

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/summary"
)

// Caches are where the status families come from.
type Caches struct {
	Bundles           fleetcontrollers.BundleCache
	BundleDeployments fleetcontrollers.BundleDeploymentCache
	Clusters          fleetcontrollers.ClusterCache
	ClusterGroups     fleetcontrollers.ClusterGroupCache
	// GitRepos is nil when the manager runs without GitOps.
	GitRepos fleetcontrollers.GitRepoCache
}

var (
	// exported are the caches of the controllers running in this process, the latest last:
	// /metrics serves the latest (a process runs one manager; tests may start more).
	mu           sync.Mutex
	exported     []*Caches
	registerOnce sync.Once
)

// Export serves the families from c on the default registry (the manager's /metrics) until ctx
// ends.
func Export(ctx context.Context, c *Caches) {
	Register()
	mu.Lock()
	exported = append(exported, c)
	mu.Unlock()
	go func() {
		<-ctx.Done()
		mu.Lock()
		defer mu.Unlock()
		exported = slices.DeleteFunc(exported, func(e *Caches) bool { return e == c })
	}()
}

func current() *Caches {
	mu.Lock()
	defer mu.Unlock()
	if len(exported) == 0 {
		return nil
	}
	return exported[len(exported)-1]
}

// Register puts the families on the default registry; later calls do nothing.
func Register() {
	registerOnce.Do(func() {
		prometheus.MustRegister(append(gitOpsCollectors, statusCollector{})...)
	})
}

// Rancher's labels on a Cluster it provisioned or imported.
const (
	rancherClusterName        = "management.cattle.io/cluster-name"
	rancherClusterDisplayName = "management.cattle.io/cluster-display-name"
)

// bundleStates are the states a state family enumerates for Bundles and BundleDeployments.
var bundleStates = []fleet.BundleState{fleet.Ready, fleet.NotReady, fleet.Pending, fleet.OutOfSync, fleet.Modified, fleet.WaitApplied, fleet.ErrApplied}

// gauge is one family of a kind: its description and how an object gives its value.
type gauge[T any] struct {
	desc  *prometheus.Desc
	value func(T) float64
}

func newGauge[T any](name, help string, labels []string, value func(T) float64) gauge[T] {
	return gauge[T]{desc: newDesc("fleet_"+name, help, labels), value: value}
}

// families are the names of every family the manager and the agent export.
var families []string

func newDesc(name, help string, labels []string) *prometheus.Desc {
	families = append(families, name)
	return prometheus.NewDesc(name, help, labels, nil)
}

// Families are the names of every family the manager and the agent export (for the chart's
// dashboard to be checked against).
func Families() []string {
	out := append([]string{}, families...)
	for _, c := range append(gitOpsCollectors, deployDuration, driftDetected, driftCorrected) {
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		d := <-ch
		// (a Desc tells its name only in its string form)
		if _, rest, ok := strings.Cut(d.String(), `fqName: "`); ok {
			name, _, _ := strings.Cut(rest, `"`)
			out = append(out, name)
		}
	}
	return append(out, checkinAgeName)
}

// kind is the status families of one kind: gauges labelled with labels(obj) (whose last value
// is the object's state), and a state family with a series per state, 1 for the object's.
type kind[T any] struct {
	gauges []gauge[T]
	state  *prometheus.Desc
	states []string
	labels func(T) []string
}

func (k *kind[T]) describe(ch chan<- *prometheus.Desc) {
	for _, g := range k.gauges {
		ch <- g.desc
	}
	ch <- k.state
}

func (k *kind[T]) collect(ch chan<- prometheus.Metric, objs []T) {
	for _, o := range objs {
		l := k.labels(o)
		for _, g := range k.gauges {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value(o), l...)
		}
		if k.state == nil {
			continue
		}
		current := l[len(l)-1]
		for _, st := range k.states {
			v := 0.0
			if st == current {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(k.state, prometheus.GaugeValue, v, append(l[:len(l)-1:len(l)-1], st)...)
		}
	}
}

// stateOf is the worst state of a summary, Ready when there is none.
func stateOf(s fleet.BundleSummary) string {
	if st := summary.WorstState(s); st != "" {
		return string(st)
	}
	return string(fleet.Ready)
}

// countNames are how a kind's resource-count families spell desiredReady, notReady and
// waitApplied: Fleet spells them differently for Clusters, ClusterGroups and GitRepos.
type countNames struct{ desiredReady, notReady, waitApplied string }

var (
	clusterCounts = countNames{"desiredready", "notready", "waitapplied"}
	groupCounts   = countNames{"desired_ready", "notready", "waitapplied"}
	gitRepoCounts = countNames{"desired_ready", "not_ready", "wait_applied"}
)

func resourceCountGauges[T any](prefix string, n countNames, labels []string, counts func(T) fleet.ResourceCounts) []gauge[T] {
	type rc struct {
		name, help string
		v          func(fleet.ResourceCounts) int
	}
	table := []rc{
		{n.desiredReady, "resources desired to be ready", func(c fleet.ResourceCounts) int { return c.DesiredReady }},
		{"missing", "resources missing", func(c fleet.ResourceCounts) int { return c.Missing }},
		{"modified", "resources modified (drifted)", func(c fleet.ResourceCounts) int { return c.Modified }},
		{n.notReady, "resources not ready", func(c fleet.ResourceCounts) int { return c.NotReady }},
		{"orphaned", "resources orphaned", func(c fleet.ResourceCounts) int { return c.Orphaned }},
		{"ready", "resources ready", func(c fleet.ResourceCounts) int { return c.Ready }},
		{"unknown", "resources in an unknown state", func(c fleet.ResourceCounts) int { return c.Unknown }},
		{n.waitApplied, "resources waiting to be applied", func(c fleet.ResourceCounts) int { return c.WaitApplied }},
	}
	out := make([]gauge[T], 0, len(table))
	for _, r := range table {
		r := r
		out = append(out, newGauge(prefix+r.name, "The count of "+r.help+".", labels, func(o T) float64 { return float64(r.v(counts(o))) }))
	}
	return out
}

func summaryGauges[T any](prefix string, labels []string, s func(T) fleet.BundleSummary) []gauge[T] {
	type sg struct {
		name string
		v    func(fleet.BundleSummary) int
	}
	table := []sg{
		{"not_ready", func(s fleet.BundleSummary) int { return s.NotReady }},
		{"wait_applied", func(s fleet.BundleSummary) int { return s.WaitApplied }},
		{"err_applied", func(s fleet.BundleSummary) int { return s.ErrApplied }},
		{"out_of_sync", func(s fleet.BundleSummary) int { return s.OutOfSync }},
		{"modified", func(s fleet.BundleSummary) int { return s.Modified }},
		{"ready", func(s fleet.BundleSummary) int { return s.Ready }},
		{"pending", func(s fleet.BundleSummary) int { return s.Pending }},
		{"desired_ready", func(s fleet.BundleSummary) int { return s.DesiredReady }},
	}
	out := make([]gauge[T], 0, len(table))
	for _, g := range table {
		g := g
		out = append(out, newGauge(prefix+g.name, "The number of BundleDeployments in state "+g.name+".", labels,
			func(o T) float64 { return float64(g.v(s(o))) }))
	}
	return out
}

var (
	bundleLabels = []string{"name", "namespace", "repo", "state"}
	bundles      = &kind[*fleet.Bundle]{
		gauges: summaryGauges("bundle_", bundleLabels, func(b *fleet.Bundle) fleet.BundleSummary { return b.Status.Summary }),
		state:  newDesc("fleet_bundle_state", "1 for the Bundle's state, 0 for the others.", bundleLabels),
		states: names(bundleStates),
		labels: func(b *fleet.Bundle) []string {
			return []string{b.Name, b.Namespace, b.Labels[fleet.RepoLabel], stateOf(b.Status.Summary)}
		},
	}

	deploymentLabels = []string{"name", "namespace", "cluster_name", "cluster_namespace", "repo", "bundle", "bundle_namespace", "state"}
	deployments      = &kind[*fleet.BundleDeployment]{
		state:  newDesc("fleet_bundledeployment_state", "1 for the BundleDeployment's state, 0 for the others.", deploymentLabels),
		states: names(bundleStates),
		labels: func(bd *fleet.BundleDeployment) []string {
			l := bd.Labels
			return []string{bd.Name, bd.Namespace, l[fleet.ClusterLabel], l[fleet.ClusterNamespaceLabel], l[fleet.RepoLabel],
				l[fleet.BundleLabel], l[fleet.BundleNamespaceLabel], string(summary.State(bd))}
		},
	}

	clusterLabels = []string{"name", "namespace", "cluster_name", "cluster_display_name", "state"}
	clusters      = &kind[*fleet.Cluster]{
		gauges: append([]gauge[*fleet.Cluster]{
			newGauge("cluster_desired_ready_git_repos", "The number of GitRepos that should be ready on the cluster.", clusterLabels,
				func(c *fleet.Cluster) float64 { return float64(c.Status.DesiredReadyGitRepos) }),
			newGauge("cluster_ready_git_repos", "The number of GitRepos ready on the cluster.", clusterLabels,
				func(c *fleet.Cluster) float64 { return float64(c.Status.ReadyGitRepos) }),
		}, resourceCountGauges("cluster_resources_count_", clusterCounts, clusterLabels, func(c *fleet.Cluster) fleet.ResourceCounts { return c.Status.ResourceCounts })...),
		state:  newDesc("fleet_cluster_state", "1 for the Cluster's state, 0 for the others.", clusterLabels),
		states: []string{string(fleet.NotReady), string(fleet.Ready), "WaitCheckIn"},
		labels: func(c *fleet.Cluster) []string {
			st := "WaitCheckIn"
			if !c.Status.Agent.LastSeen.IsZero() {
				st = readyOrNot(c.Status.Summary)
			}
			return []string{c.Name, c.Namespace, c.Labels[rancherClusterName], c.Labels[rancherClusterDisplayName], st}
		},
	}

	groupLabels = []string{"name", "namespace", "state"}
	groups      = &kind[*fleet.ClusterGroup]{
		gauges: append([]gauge[*fleet.ClusterGroup]{
			newGauge("cluster_group_cluster_count", "The count of clusters in this cluster group.", groupLabels,
				func(g *fleet.ClusterGroup) float64 { return float64(g.Status.ClusterCount) }),
			newGauge("cluster_group_non_ready_cluster_count", "The count of non ready clusters in this cluster group.", groupLabels,
				func(g *fleet.ClusterGroup) float64 { return float64(g.Status.NonReadyClusterCount) }),
			newGauge("cluster_group_bundle_desired_ready", "The number of BundleDeployments of the group's clusters that should be ready.", groupLabels,
				func(g *fleet.ClusterGroup) float64 { return float64(g.Status.Summary.DesiredReady) }),
			newGauge("cluster_group_bundle_ready", "The number of BundleDeployments of the group's clusters that are ready.", groupLabels,
				func(g *fleet.ClusterGroup) float64 { return float64(g.Status.Summary.Ready) }),
		}, resourceCountGauges("cluster_group_resource_count_", groupCounts, groupLabels,
			func(g *fleet.ClusterGroup) fleet.ResourceCounts { return g.Status.ResourceCounts })...),
		state:  newDesc("fleet_cluster_group_state", "1 for the ClusterGroup's state, 0 for the others.", groupLabels),
		states: []string{string(fleet.NotReady), string(fleet.Ready)},
		labels: func(g *fleet.ClusterGroup) []string {
			return []string{g.Name, g.Namespace, readyOrNot(g.Status.Summary)}
		},
	}

	gitRepoLabels = []string{"name", "namespace", "repo", "branch", "paths"}
	gitRepos      = &kind[*fleet.GitRepo]{
		gauges: append(resourceCountGauges("gitrepo_resources_", gitRepoCounts, gitRepoLabels, func(g *fleet.GitRepo) fleet.ResourceCounts { return g.Status.ResourceCounts }),
			newGauge("gitrepo_desired_ready_clusters", "The number of clusters the GitRepo should be ready on.", gitRepoLabels,
				func(g *fleet.GitRepo) float64 { return float64(g.Status.DesiredReadyClusters) }),
			newGauge("gitrepo_ready_clusters", "The number of clusters the GitRepo is ready on.", gitRepoLabels,
				func(g *fleet.GitRepo) float64 { return float64(g.Status.ReadyClusters) })),
		labels: func(g *fleet.GitRepo) []string {
			return []string{g.Name, g.Namespace, g.Spec.Repo, g.Spec.Branch, strings.Join(g.Spec.Paths, ";")}
		},
	}
)

// readyOrNot is Ready when a summary has no non-ready BundleDeployment, else NotReady.
func readyOrNot(s fleet.BundleSummary) string {
	if summary.WorstState(s) == "" {
		return string(fleet.Ready)
	}
	return string(fleet.NotReady)
}

func names(states []fleet.BundleState) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// statusCollector reads the status families from the exported caches at each scrape.
type statusCollector struct{}

func (statusCollector) Describe(ch chan<- *prometheus.Desc) {
	bundles.describe(ch)
	deployments.describe(ch)
	clusters.describe(ch)
	groups.describe(ch)
	for _, g := range gitRepos.gauges {
		ch <- g.desc
	}
}

func (statusCollector) Collect(ch chan<- prometheus.Metric) {
	c := current()
	if c == nil {
		return
	}
	all := labels.Everything()
	if l, err := c.Bundles.List("", all); err == nil {
		bundles.collect(ch, l)
	}
	if l, err := c.BundleDeployments.List("", all); err == nil {
		deployments.collect(ch, l)
	}
	if l, err := c.Clusters.List("", all); err == nil {
		clusters.collect(ch, l)
	}
	if l, err := c.ClusterGroups.List("", all); err == nil {
		groups.collect(ch, l)
	}
	if c.GitRepos != nil {
		if l, err := c.GitRepos.List("", all); err == nil {
			gitRepos.collect(ch, l)
		}
	}
}
