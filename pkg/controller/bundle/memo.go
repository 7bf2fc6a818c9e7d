package bundle

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/target"
)

// renderMemo remembers each Bundle's rendered BundleDeployment per cluster. A pass over many
// clusters (and a Bundle is reconciled many times while its deployments are created and report
// status) then renders values and hashes options only for clusters whose inputs changed.
type renderMemo struct {
	mu      sync.Mutex
	bundles map[types.UID]*bundleMemo
}

type bundleMemo struct {
	generation int64
	content    string
	labels     string
	byCluster  map[types.UID]memoEntry
}

type memoEntry struct {
	fingerprint string
	bd          *fleet.BundleDeployment
}

func newRenderMemo() *renderMemo { return &renderMemo{bundles: map[types.UID]*bundleMemo{}} }

// clusterFingerprint is everything of a cluster that rendering reads.
func clusterFingerprint(ci target.ClusterInfo, m *target.Match) string {
	c := ci.Cluster
	groups := make([]string, 0, len(ci.Groups))
	for _, g := range ci.Groups {
		groups = append(groups, g.Name)
	}
	return fmt.Sprint(c.Name, c.Namespace, c.Labels, c.Annotations, c.Spec.TemplateValues, c.Spec.Paused,
		c.Status.Namespace, groups, m.Targets)
}

// deployment returns the rendered BundleDeployment, from the memo when nothing it depends on
// changed. Callers must not modify the result.
func (r *renderMemo) deployment(b *fleet.Bundle, ci target.ClusterInfo, m *target.Match, content string) (*fleet.BundleDeployment, error) {
	fp := clusterFingerprint(ci, m)
	// Labels are not part of the generation, but deployments copy some of them.
	labels := fmt.Sprint(b.Labels)
	r.mu.Lock()
	bm := r.bundles[b.UID]
	if bm == nil || bm.generation != b.Generation || bm.content != content || bm.labels != labels {
		bm = &bundleMemo{generation: b.Generation, content: content, labels: labels, byCluster: map[types.UID]memoEntry{}}
		r.bundles[b.UID] = bm
	}
	if e, ok := bm.byCluster[ci.Cluster.UID]; ok && e.fingerprint == fp {
		r.mu.Unlock()
		return e.bd, nil
	}
	r.mu.Unlock()

	bd, err := target.Deployment(b, ci, m, content)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	bm.byCluster[ci.Cluster.UID] = memoEntry{fingerprint: fp, bd: bd}
	r.mu.Unlock()
	return bd, nil
}

func (r *renderMemo) forget(b *fleet.Bundle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.bundles, b.UID)
}
