package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// rollouts folds revs rollouts of a bundle over n clusters into a record: each revision reaches
// the clusters batch clusters per pass (a pass every 10 s), each batch applied at the next pass
// and ready at the one after.
func rollouts(t testing.TB, n, revs, batch int) *Record {
	names := make([]string, n)
	for i := range names {
		sum := sha256.Sum256(fmt.Appendf(nil, "client-%d", i))
		names[i] = "cluster-" + hex.EncodeToString(sum[:])[:12]
	}
	seen := make([]Seen, n)
	for i := range seen {
		seen[i] = Seen{Cluster: names[i], Revision: "r0", Applied: true, Ready: true}
	}
	r := &Record{}
	now := t0
	pass := func() {
		now = now.Add(10 * time.Second)
		if err := r.Observe(seen, now); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	for rev := 1; rev < revs; rev++ {
		name := fmt.Sprintf("%012x", rev)
		for lo := 0; lo < n+2*batch; lo += batch {
			for i := lo; i < min(lo+batch, n); i++ {
				seen[i] = Seen{Cluster: names[i], Revision: name, Commit: name + name, Applied: false}
			}
			for i := max(lo-batch, 0); i < min(lo, n); i++ {
				seen[i].Applied = true
			}
			for i := max(lo-2*batch, 0); i < min(lo-batch, n); i++ {
				seen[i].Ready = true
			}
			pass()
		}
	}
	return r
}

// The record of a bundle rolled out 100 times to 10,000 clusters, in batches of clusters
// scattered over the cluster table (as a label selects them), stays small: each revision's
// spans take a few KiB, far below what an object may hold in etcd (1.5 MiB), and the whole
// record of a bundle (stored as one object per revision and one cluster table) a few MiB, so
// that 50 such bundles stay within 256 MiB.
func TestARecordOf10000ClustersStaysSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("folds 1,200 passes over 10,000 clusters")
	}
	r := rollouts(t, 10000, 100, 1000)
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	largest := 0
	for _, rev := range r.Revisions {
		b, _ := json.Marshal(rev)
		largest = max(largest, len(b))
	}
	table, _ := json.Marshal(r.Clusters)
	t.Logf("10,000 clusters x 100 revisions: %d bytes (cluster table %d, largest revision %d)", len(data), len(table), largest)
	if largest > 32<<10 || len(data) > 4<<20 {
		t.Fatalf("the record takes %d bytes, its largest revision %d", len(data), largest)
	}
	if got, _ := r.At(r.Clusters[4321], t0.Add(time.Hour)); got.Revision == "" {
		t.Fatal("no answer from the record")
	}
}
