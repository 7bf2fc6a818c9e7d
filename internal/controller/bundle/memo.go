package bundle

import (
	"crypto/sha256"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// renderMemo remembers, per Bundle and cluster, what rendering the cluster's BundleDeployment
// last showed: whether it rendered, and which BundleDeployment (UID and generation) was written
// or found equal for those inputs. A Bundle is reconciled many times while its deployments are
// created and report status; with the memo a pass renders only for clusters whose inputs or
// deployment changed. It holds no objects, so its size is a few words per target.
type renderMemo struct {
	mu      sync.Mutex
	bundles map[types.UID]*bundleMemo
	// contents names each Bundle generation's Content, so the manifest is hashed once.
	contents map[types.UID]contentMemo
}

type contentMemo struct {
	generation int64
	name       string
}

type bundleMemo struct {
	generation int64
	content    string
	labels     string
	// resourceVersion is the Bundle's last seen with these labels: for it they are not
	// printed again (a pass asks once per target).
	resourceVersion string
	byCluster       map[types.UID]memoEntry
}

type memoEntry struct {
	fingerprint [sha256.Size]byte
	// err is the rendering error for these inputs; nil when they render.
	err error
	// bdUID and bdGeneration identify the BundleDeployment as last written (or found equal)
	// for these inputs; zero until then.
	bdUID        types.UID
	bdGeneration int64
}

func newRenderMemo() *renderMemo {
	return &renderMemo{bundles: map[types.UID]*bundleMemo{}, contents: map[types.UID]contentMemo{}}
}

// contentName is the Content name recorded for b's generation.
func (r *renderMemo) contentName(b *fleet.Bundle) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.contents[b.UID]
	return c.name, ok && c.generation == b.Generation
}

func (r *renderMemo) setContentName(b *fleet.Bundle, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.contents[b.UID] = contentMemo{generation: b.Generation, name: name}
}

// bundle returns the memo of b for content, starting afresh when the Bundle's generation,
// content or labels (deployments copy some of them) changed. Callers hold r.mu.
func (r *renderMemo) bundle(b *fleet.Bundle, content string) *bundleMemo {
	bm := r.bundles[b.UID]
	if bm != nil && bm.generation == b.Generation && bm.content == content && b.ResourceVersion != "" && bm.resourceVersion == b.ResourceVersion {
		return bm
	}
	labels := fmt.Sprint(b.Labels)
	if bm == nil || bm.generation != b.Generation || bm.content != content || bm.labels != labels {
		bm = &bundleMemo{generation: b.Generation, content: content, labels: labels, byCluster: map[types.UID]memoEntry{}}
		r.bundles[b.UID] = bm
	}
	bm.resourceVersion = b.ResourceVersion
	return bm
}

// seen says whether rendering the cluster's BundleDeployment for these inputs was recorded,
// and the error it gave.
func (r *renderMemo) seen(b *fleet.Bundle, cluster types.UID, content string, fp [sha256.Size]byte) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.bundle(b, content).byCluster[cluster]
	if !ok || e.fingerprint != fp {
		return false, nil
	}
	return true, e.err
}

// rendered records what rendering the cluster's BundleDeployment for these inputs gave.
func (r *renderMemo) rendered(b *fleet.Bundle, cluster types.UID, content string, fp [sha256.Size]byte, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bundle(b, content).byCluster[cluster] = memoEntry{fingerprint: fp, err: err}
}

// current reports whether bd is the BundleDeployment written (or found equal) for these
// inputs, unchanged since: then it needs neither rendering nor writing.
func (r *renderMemo) current(b *fleet.Bundle, cluster types.UID, content string, fp [sha256.Size]byte, bd *fleet.BundleDeployment) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.bundle(b, content).byCluster[cluster]
	return ok && e.fingerprint == fp && e.err == nil && e.bdUID == bd.UID && e.bdGeneration == bd.Generation
}

// ahead reports whether a newer generation of bd than this one was written for these inputs:
// the cache has not shown that write yet, and writing from this copy would only conflict.
func (r *renderMemo) ahead(b *fleet.Bundle, cluster types.UID, content string, fp [sha256.Size]byte, bd *fleet.BundleDeployment) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.bundle(b, content).byCluster[cluster]
	return ok && e.fingerprint == fp && e.err == nil && e.bdUID == bd.UID && e.bdGeneration > bd.Generation
}

// written records bd as the BundleDeployment for these inputs.
func (r *renderMemo) written(b *fleet.Bundle, cluster types.UID, content string, fp [sha256.Size]byte, bd *fleet.BundleDeployment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bundle(b, content).byCluster[cluster] = memoEntry{fingerprint: fp, bdUID: bd.UID, bdGeneration: bd.Generation}
}

func (r *renderMemo) forget(b *fleet.Bundle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.bundles, b.UID)
	delete(r.contents, b.UID)
}
