package bundle

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// clusterFacts remembers, per Cluster and for one resourceVersion of it, what every Bundle's plan
// derives from it: the name of its cluster namespace and the hash of what rendering reads. A
// plan visits every Cluster its Bundle may target, and a Bundle is planned again whenever one of
// its deployments reports; at 10,000 clusters deriving these each time (a SHA-256 and a sorted
// print of its labels and annotations, per cluster and plan) was a quarter of the plans' CPU.
// Between two check-ins of a cluster every plan reads the same resourceVersion. The targeting
// watch derives them first, on the Cluster's event, and re-plans only when the hash changes.
type clusterFacts struct {
	mu sync.Mutex
	m  map[clusterKey]clusterFact
}

type clusterKey struct{ namespace, name string }

type clusterFact struct {
	uid             types.UID
	resourceVersion string
	// namespace is the cluster namespace (target.ClusterNamespace).
	namespace string
	// hash covers what rendering reads of the Cluster itself (clusterHash).
	hash [sha256.Size]byte
}

func newClusterFacts() *clusterFacts {
	return &clusterFacts{m: map[clusterKey]clusterFact{}}
}

// of returns c's facts, derived afresh unless c is the object (UID and resourceVersion) they were
// derived from. An object without a resourceVersion (not from the apiserver) is never remembered.
func (f *clusterFacts) of(c *fleet.Cluster) clusterFact {
	k := clusterKey{c.Namespace, c.Name}
	f.mu.Lock()
	e, ok := f.m[k]
	f.mu.Unlock()
	if ok && c.ResourceVersion != "" && e.uid == c.UID && e.resourceVersion == c.ResourceVersion {
		return e
	}
	e = clusterFact{uid: c.UID, resourceVersion: c.ResourceVersion, namespace: target.ClusterNamespace(c), hash: clusterHash(c)}
	if c.ResourceVersion != "" {
		f.mu.Lock()
		f.m[k] = e
		f.mu.Unlock()
	}
	return e
}

// forget drops the facts of the Cluster of key ("namespace/name"), which is gone.
func (f *clusterFacts) forget(key string) {
	ns, name, _ := strings.Cut(key, "/")
	f.mu.Lock()
	delete(f.m, clusterKey{ns, name})
	f.mu.Unlock()
}

// clusterHash hashes everything of the Cluster itself that rendering reads (the agent's sealing
// key too: a bundle's SOPS files are sealed to it).
func clusterHash(c *fleet.Cluster) [sha256.Size]byte {
	return sha256.Sum256(fmt.Append(nil, c.Name, c.Namespace, c.Labels, c.Annotations, c.Spec.TemplateValues,
		c.Spec.Paused, c.Status.Namespace, c.Status.Scheduled, c.Status.ActiveSchedule, c.Status.Agent.SealingKey))
}

// clusterFingerprint hashes everything rendering reads for one cluster and Bundle: the Cluster
// (its clusterHash), the groups it is in and the Bundle's targets it matched.
func clusterFingerprint(cluster [sha256.Size]byte, ci target.ClusterInfo, m *target.Match) [sha256.Size]byte {
	buf := make([]byte, 0, 128)
	buf = append(buf, cluster[:]...)
	for _, g := range ci.Groups {
		// Kubernetes names hold no NUL: the names cannot run into each other.
		buf = append(append(buf, g.Name...), 0)
	}
	buf = append(buf, 0)
	for _, t := range m.Targets {
		buf = append(strconv.AppendInt(buf, int64(t), 10), ',')
	}
	return sha256.Sum256(buf)
}
