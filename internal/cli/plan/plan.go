// Package plan is `fleet plan`: what a change of a repository would do to each cluster. It
// reads two revisions as a GitRepo reads them (internal/bundlereader), targets both at the
// clusters (internal/target, as the manager does), renders every cluster's manifests as its
// agent would (internal/render), and reports per bundle the clusters that change, are added or
// removed, with the unified diff of their manifests; clusters whose diff is the same make one
// group. Rendering is shared by the clusters that get identical inputs, so 10,000 clusters cost
// about as many renders as they have distinct option sets. Secrets' values never appear: each is
// replaced by a marker that changes when the value does.
package plan

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	clitarget "github.com/fleetgo/fleet/internal/cli/target"
	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/manifestdiff"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Change kinds.
const (
	Changed = "changed"
	Added   = "added"
	Removed = "removed"
	// Drifted: with --live, the cluster runs something other than the base revision renders.
	Drifted = "drifted"
)

// Side is one revision read: its Bundles and the folders that failed.
type Side struct {
	Commit  string
	Bundles []*fleet.Bundle
	// Failed maps a folder to why it could not be read.
	Failed map[string]string
}

// Input is what a plan compares.
type Input struct {
	Base, Head Side
	// Targeting holds the Clusters, ClusterGroups, BundleNamespaceMappings and namespaces the
	// Bundles are targeted at (its Bundles are ignored).
	Targeting clitarget.Input
	// Live, when set, is what each cluster runs now, by bundle name and cluster key
	// ("namespace/name"): the manifests its BundleDeployment renders to (Rendered). Head is
	// compared with it, and clusters where it differs from the base revision are flagged as
	// drifted.
	Live map[string]map[string]string
	// Redact marks Secrets' values (NewRedactor); nil leaves them (tests only).
	Redact *manifestdiff.Redactor
}

// Report is a plan's outcome.
type Report struct {
	Base     string         `json:"base,omitempty"`
	Head     string         `json:"head,omitempty"`
	Clusters int            `json:"clusters"`
	Bundles  []BundleReport `json:"bundles"`
	// heads are head's manifests by bundle and cluster (WriteManifests).
	heads map[string]map[string]rendered
	red   *manifestdiff.Redactor
}

// BundleReport is one bundle's changes.
type BundleReport struct {
	Name string `json:"name"`
	// Error is why head's folder could not be read or rendered (the other bundles still plan).
	Error  string  `json:"error,omitempty"`
	Groups []Group `json:"groups,omitempty"`
	// Unchanged counts the clusters whose manifests stay the same.
	Unchanged int `json:"unchanged"`
}

// Group is clusters with the same change.
type Group struct {
	Change   string   `json:"change"`
	Clusters []string `json:"clusters"`
	Diff     string   `json:"diff"`
}

// Changes counts the clusters of a report that change.
func (r *Report) Changes() int {
	n := 0
	for _, b := range r.Bundles {
		for _, g := range b.Groups {
			n += len(g.Clusters)
		}
	}
	return n
}

// Errors counts the bundles of a report that could not be planned.
func (r *Report) Errors() int {
	n := 0
	for _, b := range r.Bundles {
		if b.Error != "" {
			n++
		}
	}
	return n
}

// Run plans head against base (or against what runs, with Live).
func Run(in Input) (*Report, error) {
	r := &Report{Base: in.Base.Commit, Head: in.Head.Commit, Clusters: len(in.Targeting.Clusters)}
	rd := &renderer{memo: map[[32]byte]rendered{}}
	base, baseFailed := rd.side(in, in.Base)
	head, headFailed := rd.side(in, in.Head)
	r.heads, r.red = head, in.Redact
	names := map[string]bool{}
	for n := range base {
		names[n] = true
	}
	for n := range head {
		names[n] = true
	}
	for f, msg := range in.Head.Failed {
		r.Bundles = append(r.Bundles, BundleReport{Name: f, Error: msg})
	}
	// A bundle that cannot be targeted on either side is reported, not compared.
	for name, msg := range baseFailed {
		if _, failed := headFailed[name]; !failed {
			headFailed[name] = "base: " + msg
		}
	}
	for name, msg := range headFailed {
		delete(names, name)
		r.Bundles = append(r.Bundles, BundleReport{Name: name, Error: msg})
	}
	live := map[string]map[string]rendered{}
	for b, byCluster := range in.Live {
		names[b] = true
		live[b] = map[string]rendered{}
		for c, out := range byCluster {
			live[b][c] = rendered{key: sha256.Sum256([]byte("live\x00" + out)), out: out}
		}
	}
	d := &differ{red: in.Redact, memo: map[[64]byte]string{}}
	for _, name := range slices.Sorted(mapsKeys(names)) {
		br := d.compare(name, base[name], head[name], live[name], in.Live != nil)
		if br.Error != "" || len(br.Groups) > 0 || br.Unchanged > 0 {
			r.Bundles = append(r.Bundles, br)
		}
	}
	slices.SortStableFunc(r.Bundles, func(a, b BundleReport) int { return strings.Compare(a.Name, b.Name) })
	return r, nil
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// rendered is one cluster's manifests of a bundle, or why they could not be rendered.
type rendered struct {
	key [32]byte
	out string
	err string
}

// renderer renders bundles for clusters, once per distinct input.
type renderer struct {
	mu   sync.Mutex
	memo map[[32]byte]rendered
}

// side renders every bundle of a revision for every cluster it targets: bundle name -> cluster
// key -> manifests. Bundles are targeted one at a time, so only one bundle's BundleDeployments
// are held at once (at 10,000 clusters and 50 bundles, all of them would take gigabytes).
// A bundle that cannot be targeted (a selector of its own or of a BundleNamespaceMapping that
// does not parse, as the manager reports it) is in failed, by name, with why.
func (rd *renderer) side(in Input, s Side) (out map[string]map[string]rendered, failed map[string]string) {
	out, failed = map[string]map[string]rendered{}, map[string]string{}
	ti := in.Targeting
	for _, b := range s.Bundles {
		ti.Bundles = []*fleet.Bundle{b}
		results, err := clitarget.Plan(ti)
		if err != nil {
			failed[b.Name] = err.Error()
			continue
		}
		byCluster := map[string]rendered{}
		for _, res := range results {
			for _, bd := range res.Deployments {
				key := bd.Labels[fleet.ClusterNamespaceLabel] + "/" + bd.Labels[fleet.ClusterLabel]
				byCluster[key] = rd.render(b, res.Content, bd.Spec.DeploymentID, &bd.Spec.Options)
			}
		}
		out[b.Name] = byCluster
	}
	return out, failed
}

// render renders b with opts, or returns the render of an identical input. deploymentID, the
// hash of the content and of every option but diff and correctDrift (which no render reads),
// keys it; without one the options' JSON does.
func (rd *renderer) render(b *fleet.Bundle, content, deploymentID string, opts *fleet.BundleDeploymentOptions) rendered {
	var key [32]byte
	if deploymentID != "" {
		key = sha256.Sum256([]byte("id\x00" + b.Name + "\x00" + deploymentID))
	} else {
		data, _ := json.Marshal(opts)
		key = sha256.Sum256(append([]byte(content+"\x00"+b.Name+"\x00"), data...))
	}
	rd.mu.Lock()
	r, ok := rd.memo[key]
	rd.mu.Unlock()
	if ok {
		return r
	}
	out, err := helmdeployer.Predict(b.Spec.Resources, opts, b.Name)
	r = rendered{key: key, out: out}
	if err != nil {
		r = rendered{key: key, err: fmt.Sprintf("rendering for the cluster: %v", err)}
	}
	rd.mu.Lock()
	rd.memo[key] = r
	rd.mu.Unlock()
	return r
}

// differ diffs manifests, once per distinct pair: at 10,000 clusters most share both sides.
type differ struct {
	red  *manifestdiff.Redactor
	memo map[[64]byte]string
}

func (d *differ) diff(a, b rendered, from, to string) string {
	var k [64]byte
	copy(k[:32], a.key[:])
	copy(k[32:], b.key[:])
	if s, ok := d.memo[k]; ok {
		return s
	}
	s := manifestdiff.Diff(d.red, a.out, b.out, from, to)
	d.memo[k] = s
	return s
}

// compare groups the clusters of one bundle by their change.
func (d *differ) compare(name string, base, head map[string]rendered, live map[string]rendered, withLive bool) BundleReport {
	br := BundleReport{Name: name}
	gs := grouping{}
	add := gs.add
	clusters := map[string]bool{}
	for c := range base {
		clusters[c] = true
	}
	for c := range head {
		clusters[c] = true
	}
	for c := range live {
		clusters[c] = true
	}
	none := rendered{}
	for _, c := range slices.Sorted(mapsKeys(clusters)) {
		h, inHead := head[c]
		if h.err != "" {
			add("error", c, h.err)
			continue
		}
		from, had := base[c]
		if withLive {
			l, running := live[c]
			if had && running {
				if drift := d.diff(from, l, "base", "running"); drift != "" {
					add(Drifted, c, drift)
				}
			}
			from, had = l, running
		}
		switch {
		case !inHead && had:
			add(Removed, c, d.diff(from, none, "before", "after"))
		case !inHead:
		case !had:
			add(Added, c, d.diff(none, h, "before", "after"))
		default:
			if diff := d.diff(from, h, "before", "after"); diff != "" {
				add(Changed, c, diff)
			} else {
				br.Unchanged++
			}
		}
	}
	br.Groups = gs.sorted()
	return br
}

// grouping gathers clusters by their change and diff.
type grouping map[string]*Group

func (gs grouping) add(change, cluster, diff string) {
	k := change + "\x00" + diff
	g := gs[k]
	if g == nil {
		g = &Group{Change: change, Diff: diff}
		gs[k] = g
	}
	g.Clusters = append(g.Clusters, cluster)
}

// sorted are the groups, the largest first.
func (gs grouping) sorted() []Group {
	var out []Group
	for _, g := range gs {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b Group) int {
		return cmp.Or(cmp.Compare(len(b.Clusters), len(a.Clusters)), strings.Compare(a.Change, b.Change), strings.Compare(a.Clusters[0], b.Clusters[0]))
	})
	return out
}

// WriteManifests writes head's manifests, as each cluster's agent would deploy them (Secrets'
// values redacted), to dir/<bundle>/<cluster namespace>_<cluster>.yaml.
func (r *Report) WriteManifests(dir string) error {
	for b, byCluster := range r.heads {
		if err := os.MkdirAll(filepath.Join(dir, b), 0o755); err != nil {
			return err
		}
		for c, m := range byCluster {
			out := r.red.Apply(m.out)
			if m.err != "" {
				out = "# " + m.err + "\n"
			}
			if err := os.WriteFile(filepath.Join(dir, b, strings.ReplaceAll(c, "/", "_")+".yaml"), []byte(out), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
