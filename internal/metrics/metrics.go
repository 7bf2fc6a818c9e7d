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
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Caches are where the status families come from.
type Caches struct {
	Bundles           fleetcontrollers.BundleCache
	BundleDeployments fleetcontrollers.BundleDeploymentCache
	Clusters          fleetcontrollers.ClusterCache
	ClusterGroups     fleetcontrollers.ClusterGroupCache
	// GitRepos is nil when the manager runs without GitOps; Clusters and ClusterGroups are nil
	// in a shard (they are the unsharded controller's).
	GitRepos fleetcontrollers.GitRepoCache
	// Shard selects the Bundles, BundleDeployments and GitRepos this controller handles (nil:
	// all of them).
	Shard labels.Selector
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
		prometheus.MustRegister(gitOpsCollectors...)
		prometheus.MustRegister(rolloutCollectors...)
	})
}

// Rancher's labels on a Cluster it provisioned or imported.
const (
	rancherClusterName        = "management.cattle.io/cluster-name"
	rancherClusterDisplayName = "management.cattle.io/cluster-display-name"
)

// bundleStates are the states a state family enumerates for Bundles and BundleDeployments.
var bundleStates = []fleet.BundleState{fleet.Ready, fleet.NotReady, fleet.Pending, fleet.OutOfSync, fleet.Modified, fleet.WaitApplied, fleet.ErrApplied}

// gauge is one family of a kind: its name, help and how an object gives its value.
type gauge[T any] struct {
	name, help string
	value      func(T) float64
}

func newGauge[T any](name, help string, value func(T) float64) gauge[T] {
	return gauge[T]{name: "fleet_" + name, help: help, value: value}
}

// kind is the status families of one kind: gauges labelled labelNames with labels(obj) (whose
// last value is the object's state), and, when stateName is set, a state family with a series
// per state, 1 for the object's.
type kind[T any] struct {
	labelNames           []string
	gauges               []gauge[T]
	stateName, stateHelp string
	states               []string
	labels               func(T) []string
}

func (k *kind[T]) names() []string {
	var out []string
	for _, g := range k.gauges {
		out = append(out, g.name)
	}
	if k.stateName != "" {
		out = append(out, k.stateName)
	}
	return out
}

// wanted is the set of families a scrape asks for by name (`name[]`, as the registry's own
// handler takes it); nil asks for every family.
type wanted map[string]bool

func wantedOf(names []string) wanted {
	if len(names) == 0 {
		return nil
	}
	w := wanted{}
	for _, n := range names {
		w[n] = true
	}
	return w
}

func (w wanted) any(names []string) bool {
	return w == nil || slices.ContainsFunc(names, w.has)
}

// has says whether the family name is asked for (every family is when none is named).
func (w wanted) has(name string) bool { return w == nil || w[name] }

// write streams the kind's families asked for in want for objs in Prometheus' text format,
// family by family.
func (k *kind[T]) write(w *bufio.Writer, objs []T, want wanted) {
	for _, g := range k.gauges {
		if !want.has(g.name) {
			continue
		}
		header(w, g.name, g.help)
		for _, o := range objs {
			sample(w, g.name, k.labelNames, k.labels(o), g.value(o))
		}
	}
	if k.stateName == "" || !want.has(k.stateName) {
		return
	}
	header(w, k.stateName, k.stateHelp)
	for _, o := range objs {
		l := k.labels(o)
		current := l[len(l)-1]
		for _, st := range k.states {
			v := 0.0
			if st == current {
				v = 1
			}
			l[len(l)-1] = st
			sample(w, k.stateName, k.labelNames, l, v)
		}
	}
}

func header(w *bufio.Writer, name, help string) {
	w.WriteString("# HELP " + name + " ")
	w.WriteString(strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help))
	w.WriteString("\n# TYPE " + name + " gauge\n")
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func sample(w *bufio.Writer, name string, names, values []string, v float64) {
	w.WriteString(name)
	w.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteString(n)
		w.WriteString(`="`)
		labelEscaper.WriteString(w, values[i])
		w.WriteByte('"')
	}
	w.WriteString("} ")
	w.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	w.WriteByte('\n')
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

func resourceCountGauges[T any](prefix string, n countNames, counts func(T) fleet.ResourceCounts) []gauge[T] {
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
		out = append(out, newGauge(prefix+r.name, "The count of "+r.help+".", func(o T) float64 { return float64(r.v(counts(o))) }))
	}
	return out
}

func summaryGauges[T any](prefix string, s func(T) fleet.BundleSummary) []gauge[T] {
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
		out = append(out, newGauge(prefix+g.name, "The number of BundleDeployments in state "+g.name+".",
			func(o T) float64 { return float64(g.v(s(o))) }))
	}
	return out
}

var (
	bundles = &kind[*fleet.Bundle]{
		labelNames: []string{"name", "namespace", "repo", "state"},
		gauges:     summaryGauges("bundle_", func(b *fleet.Bundle) fleet.BundleSummary { return b.Status.Summary }),
		stateName:  "fleet_bundle_state", stateHelp: "1 for the Bundle's state, 0 for the others.",
		states: names(bundleStates),
		labels: func(b *fleet.Bundle) []string {
			return []string{b.Name, b.Namespace, b.Labels[fleet.RepoLabel], stateOf(b.Status.Summary)}
		},
	}

	deployments = &kind[*fleet.BundleDeployment]{
		labelNames: []string{"name", "namespace", "cluster_name", "cluster_namespace", "repo", "bundle", "bundle_namespace", "state"},
		stateName:  "fleet_bundledeployment_state", stateHelp: "1 for the BundleDeployment's state, 0 for the others.",
		states: names(bundleStates),
		labels: func(bd *fleet.BundleDeployment) []string {
			l := bd.Labels
			return []string{bd.Name, bd.Namespace, l[fleet.ClusterLabel], l[fleet.ClusterNamespaceLabel], l[fleet.RepoLabel],
				l[fleet.BundleLabel], l[fleet.BundleNamespaceLabel], string(summary.State(bd))}
		},
	}

	clusters = &kind[*fleet.Cluster]{
		labelNames: []string{"name", "namespace", "cluster_name", "cluster_display_name", "state"},
		gauges: append([]gauge[*fleet.Cluster]{
			newGauge("cluster_desired_ready_git_repos", "The number of GitRepos that should be ready on the cluster.",
				func(c *fleet.Cluster) float64 { return float64(c.Status.DesiredReadyGitRepos) }),
			newGauge("cluster_ready_git_repos", "The number of GitRepos ready on the cluster.",
				func(c *fleet.Cluster) float64 { return float64(c.Status.ReadyGitRepos) }),
		}, resourceCountGauges("cluster_resources_count_", clusterCounts, func(c *fleet.Cluster) fleet.ResourceCounts { return c.Status.ResourceCounts })...),
		stateName: "fleet_cluster_state", stateHelp: "1 for the Cluster's state, 0 for the others.",
		states: []string{string(fleet.NotReady), string(fleet.Ready), "WaitCheckIn"},
		labels: func(c *fleet.Cluster) []string {
			st := "WaitCheckIn"
			if !c.Status.Agent.LastSeen.IsZero() {
				st = readyOrNot(c.Status.Summary)
			}
			return []string{c.Name, c.Namespace, c.Labels[rancherClusterName], c.Labels[rancherClusterDisplayName], st}
		},
	}

	groups = &kind[*fleet.ClusterGroup]{
		labelNames: []string{"name", "namespace", "state"},
		gauges: append([]gauge[*fleet.ClusterGroup]{
			newGauge("cluster_group_cluster_count", "The count of clusters in this cluster group.",
				func(g *fleet.ClusterGroup) float64 { return float64(g.Status.ClusterCount) }),
			newGauge("cluster_group_non_ready_cluster_count", "The count of non ready clusters in this cluster group.",
				func(g *fleet.ClusterGroup) float64 { return float64(g.Status.NonReadyClusterCount) }),
			newGauge("cluster_group_bundle_desired_ready", "The number of BundleDeployments of the group's clusters that should be ready.",
				func(g *fleet.ClusterGroup) float64 { return float64(g.Status.Summary.DesiredReady) }),
			newGauge("cluster_group_bundle_ready", "The number of BundleDeployments of the group's clusters that are ready.",
				func(g *fleet.ClusterGroup) float64 { return float64(g.Status.Summary.Ready) }),
		}, resourceCountGauges("cluster_group_resource_count_", groupCounts,
			func(g *fleet.ClusterGroup) fleet.ResourceCounts { return g.Status.ResourceCounts })...),
		stateName: "fleet_cluster_group_state", stateHelp: "1 for the ClusterGroup's state, 0 for the others.",
		states: []string{string(fleet.NotReady), string(fleet.Ready)},
		labels: func(g *fleet.ClusterGroup) []string {
			return []string{g.Name, g.Namespace, readyOrNot(g.Status.Summary)}
		},
	}

	gitRepos = &kind[*fleet.GitRepo]{
		labelNames: []string{"name", "namespace", "repo", "branch", "paths"},
		gauges: append(resourceCountGauges("gitrepo_resources_", gitRepoCounts, func(g *fleet.GitRepo) fleet.ResourceCounts { return g.Status.ResourceCounts }),
			newGauge("gitrepo_desired_ready_clusters", "The number of clusters the GitRepo should be ready on.",
				func(g *fleet.GitRepo) float64 { return float64(g.Status.DesiredReadyClusters) }),
			newGauge("gitrepo_ready_clusters", "The number of clusters the GitRepo is ready on.",
				func(g *fleet.GitRepo) float64 { return float64(g.Status.ReadyClusters) })),
		labels: func(g *fleet.GitRepo) []string {
			return []string{g.Name, g.Namespace, gitsource.Redact(g.Spec.Repo), g.Spec.Branch, strings.Join(g.Spec.Paths, ";")}
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

// writeStatus streams the status families of c that want asks for (a kind none of whose
// families is asked for is not listed). Nothing is gathered in memory first: at 50,000
// BundleDeployments the state family alone is 350,000 series.
func writeStatus(w *bufio.Writer, c *Caches, want wanted) {
	all, mine := labels.Everything(), c.Shard
	if mine == nil {
		mine = all
	}
	writeKind(w, bundles, want, func() ([]*fleet.Bundle, error) { return c.Bundles.List("", mine) })
	writeKind(w, deployments, want, func() ([]*fleet.BundleDeployment, error) { return c.BundleDeployments.List("", mine) })
	if c.Clusters != nil {
		writeKind(w, clusters, want, func() ([]*fleet.Cluster, error) { return c.Clusters.List("", all) })
	}
	if c.ClusterGroups != nil {
		writeKind(w, groups, want, func() ([]*fleet.ClusterGroup, error) { return c.ClusterGroups.List("", all) })
	}
	if c.GitRepos != nil {
		writeKind(w, gitRepos, want, func() ([]*fleet.GitRepo, error) { return c.GitRepos.List("", mine) })
	}
}

func writeKind[T any](w *bufio.Writer, k *kind[T], want wanted, list func() ([]T, error)) {
	if !want.any(k.names()) {
		return
	}
	if l, err := list(); err == nil {
		k.write(w, l, want)
	}
}

// Handler serves /metrics in Prometheus' text format: the default registry's families (the
// work queues', Go's, the GitOps and agent families), then the status families, streamed. As
// the registry's own handler, it serves only the families named by `name[]` parameters when a
// scrape gives any (`/metrics?name[]=workqueue_depth`): a probe of one figure does not render
// 350,000 series.
func Handler() http.Handler {
	registry := promhttp.HandlerFor(prometheus.DefaultGatherer, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The text format, uncompressed, whatever the scraper prefers: the status families
		// follow in the same format.
		r = r.Clone(r.Context())
		r.Header.Del("Accept")
		r.Header.Del("Accept-Encoding")
		registry.ServeHTTP(w, r)
		if c := current(); c != nil {
			bw := bufio.NewWriterSize(w, 64<<10)
			writeStatus(bw, c, wantedOf(r.URL.Query()["name[]"]))
			_ = bw.Flush()
		}
	})
}

// Families are the names of every family the manager and the agent export (for the chart's
// dashboard to be checked against).
func Families() []string {
	var out []string
	out = append(out, bundles.names()...)
	out = append(out, deployments.names()...)
	out = append(out, clusters.names()...)
	out = append(out, groups.names()...)
	out = append(out, gitRepos.names()...)
	out = append(out, gitOpsNames...)
	out = append(out, rolloutNames...)
	out = append(out, agentNames...)
	return append(out, checkinAgeName, standbyFilledName)
}
