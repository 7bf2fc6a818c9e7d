package helmdeployer

import (
	"context"
	"errors"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/client-go/kubernetes/fake"
)

func rev(v int, status release.Status, manifest string) *release.Release {
	return &release.Release{Name: "app", Namespace: "ns", Version: v, Manifest: manifest, Info: &release.Info{Status: status},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "app", Version: "1.0.0"}}}
}

// The ledger's rules on a release's history: the revision an interrupted action was writing is
// the agent's, a newer one someone else wrote is removed, a changed recorded one stops it, and a
// release without an entry is not the agent's.
func TestLedgerVerifiesHistory(t *testing.T) {
	ctx := context.Background()
	d := &Deployer{kube: fake.NewSimpleClientset(), agentNamespace: "cattle-fleet-system"}
	ac := &action.Configuration{Releases: storage.Init(driver.NewMemory())}
	mine := entry{Namespace: "ns", Name: "app", BundleID: "bd"}

	if _, err := d.verified(ctx, ac, "ns", "app"); !errors.Is(err, errNotRecorded) {
		t.Fatalf("no entry: %v", err)
	}
	// Killed while installing: revision 1 pending, the entry saying it was being written.
	if err := d.intend(ctx, mine, nil); err != nil {
		t.Fatal(err)
	}
	if err := ac.Releases.Create(rev(1, release.StatusPendingInstall, "a")); err != nil {
		t.Fatal(err)
	}
	cur, err := d.recordedRevision(ctx, ac, rev(1, release.StatusPendingInstall, "a"))
	if err != nil || cur == nil || cur.Version != 1 {
		t.Fatalf("the interrupted install is the agent's: %+v %v", cur, err)
	}
	if _, err := d.verified(ctx, ac, "ns", "app"); err != nil {
		t.Fatalf("verified: %v", err)
	}
	// Recorded now; someone adds revision 2.
	if err := d.writeLedger(ctx, ac, mine); err != nil {
		t.Fatal(err)
	}
	if err := ac.Releases.Create(rev(2, release.StatusDeployed, "kube-system things")); err != nil {
		t.Fatal(err)
	}
	cur, err = d.recordedRevision(ctx, ac, rev(2, release.StatusDeployed, "kube-system things"))
	if err != nil || cur.Version != 1 {
		t.Fatalf("the recorded revision counts, not the forged one: %+v %v", cur, err)
	}
	if _, err := d.verified(ctx, ac, "ns", "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Releases.Get("app", 2); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("the forged revision is removed: %v", err)
	}
	// The recorded revision itself rewritten.
	if err := ac.Releases.Update(rev(1, release.StatusDeployed, "changed")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.verified(ctx, ac, "ns", "app"); err == nil || !IsPermanent(err) {
		t.Fatalf("a changed recorded revision: %v", err)
	}
}
