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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fleetgo/fleet/internal/helmrelease"
)

func rev(v int, status release.Status, manifest string) *release.Release {
	return &release.Release{Name: "app", Namespace: "ns", Version: v, Manifest: manifest, Info: &release.Info{Status: status},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "app", Version: "1.0.0"}}}
}

// ledgerFixture is an agent whose ledger is in a fake cluster, a release store in memory (what
// anyone writes there bypasses the agent), and the agent's entry of release ns/app.
func ledgerFixture() (context.Context, *Deployer, *driver.Memory, *action.Configuration, entry) {
	store := driver.NewMemory()
	return context.Background(), &Deployer{kube: fake.NewSimpleClientset(), agentNamespace: "cattle-fleet-system"}, store,
		&action.Configuration{Releases: storage.Init(store)}, entry{Namespace: "ns", Name: "app", BundleID: "bd"}
}

// The ledger's rules on a release's history: the revision an interrupted action was writing is
// the agent's while it is what the agent recorded before writing it, a newer one someone else
// wrote (one of the pending number included) is removed, a changed recorded one stops it, and a
// release without an entry is not the agent's.
func TestLedgerVerifiesHistory(t *testing.T) {
	ctx, d, store, ac, mine := ledgerFixture()

	if _, _, err := d.verified(ctx, ac, "ns", "app"); !errors.Is(err, errNotRecorded) {
		t.Fatalf("no entry: %v", err)
	}
	// Killed while installing: revision 1 pending, written through the storage that records
	// its digest first.
	ac.Releases.Driver = d.vouch(ctx, store, mine, nil)
	if err := ac.Releases.Create(rev(1, release.StatusPendingInstall, "a")); err != nil {
		t.Fatal(err)
	}
	ac = &action.Configuration{Releases: storage.Init(store)}
	cur, err := d.recordedRevision(ctx, ac, rev(1, release.StatusPendingInstall, "a"))
	if err != nil || cur == nil || cur.Version != 1 {
		t.Fatalf("the interrupted install is the agent's: %+v %v", cur, err)
	}
	if _, recorded, err := d.verified(ctx, ac, "ns", "app"); err != nil || recorded == nil || recorded.Version != 1 {
		t.Fatalf("verified: %+v %v", recorded, err)
	}
	// Recorded now; someone adds revision 2.
	if err := d.writeLedger(ctx, ac, mine); err != nil {
		t.Fatal(err)
	}
	ac = &action.Configuration{Releases: storage.Init(store)}
	if err := store.Create("sh.helm.release.v1.app.v2", rev(2, release.StatusDeployed, "kube-system things")); err != nil {
		t.Fatal(err)
	}
	cur, err = d.recordedRevision(ctx, ac, rev(2, release.StatusDeployed, "kube-system things"))
	if err != nil || cur.Version != 1 {
		t.Fatalf("the recorded revision counts, not the forged one: %+v %v", cur, err)
	}
	if _, _, err := d.verified(ctx, ac, "ns", "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get("sh.helm.release.v1.app.v2"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("the forged revision is removed: %v", err)
	}
	// An action starts writing revision 2 and is killed; someone writes their own revision 2
	// in its place: the pending number alone does not make it the agent's.
	e, err := d.ledgerEntry(ctx, "ns", "app")
	if err != nil {
		t.Fatal(err)
	}
	one, _ := store.Get("sh.helm.release.v1.app.v1")
	ac.Releases.Driver = d.vouch(ctx, store, *e, one)
	if err := ac.Releases.Create(rev(2, release.StatusPendingUpgrade, "b")); err != nil {
		t.Fatal(err)
	}
	if err := store.Update("sh.helm.release.v1.app.v2", rev(2, release.StatusPendingUpgrade, "kube-system things")); err != nil {
		t.Fatal(err)
	}
	ac = &action.Configuration{Releases: storage.Init(store)}
	if _, recorded, err := d.verified(ctx, ac, "ns", "app"); err != nil || recorded.Version != 1 {
		t.Fatalf("a forged revision of the pending number: %+v %v", recorded, err)
	}
	if _, err := store.Get("sh.helm.release.v1.app.v2"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("the forged pending revision is removed: %v", err)
	}
	// The recorded revision itself rewritten.
	if err := store.Update("sh.helm.release.v1.app.v1", rev(1, release.StatusDeployed, "changed")); err != nil {
		t.Fatal(err)
	}
	ac = &action.Configuration{Releases: storage.Init(store)}
	if _, _, err := d.verified(ctx, ac, "ns", "app"); err == nil || !helmrelease.IsPermanent(err) {
		t.Fatalf("a changed recorded revision: %v", err)
	}
}

// Once verified, Helm reads what was verified: a revision someone writes between the agent's
// check and Helm's own read (a newer one, or the recorded one rewritten) is not what Helm sees,
// while what Helm itself writes is.
func TestHelmReadsOnlyWhatTheLedgerVouchesFor(t *testing.T) {
	ctx, d, store, ac, mine := ledgerFixture()
	ac.Releases.Driver = d.vouch(ctx, store, mine, nil)
	if err := ac.Releases.Create(rev(1, release.StatusDeployed, "a")); err != nil {
		t.Fatal(err)
	}
	if err := d.writeLedger(ctx, ac, mine); err != nil {
		t.Fatal(err)
	}
	ac = &action.Configuration{Releases: storage.Init(store)}
	if _, _, err := d.verified(ctx, ac, "ns", "app"); err != nil {
		t.Fatal(err)
	}
	// After the check: a newer revision, with hooks to run at uninstall.
	forged := rev(2, release.StatusDeployed, "kind: ClusterRoleBinding")
	forged.Hooks = []*release.Hook{{Path: "pre-delete", Manifest: "kind: Pod", Events: []release.HookEvent{release.HookPreDelete}}}
	if err := store.Create("sh.helm.release.v1.app.v2", forged); err != nil {
		t.Fatal(err)
	}
	last, err := ac.Releases.Last("app")
	if err != nil || last.Version != 1 || last.Manifest != "a" {
		t.Fatalf("Helm's newest revision is the verified one: %+v %v", last, err)
	}
	history, err := ac.Releases.History("app")
	if err != nil || len(history) != 1 {
		t.Fatalf("Helm's history holds the verified revision only: %d %v", len(history), err)
	}
	if _, err := ac.Releases.Get("app", 2); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("the forged revision by number: %v", err)
	}
	// The verified revision rewritten after the check.
	if err := store.Update("sh.helm.release.v1.app.v1", rev(1, release.StatusDeployed, "kind: ClusterRoleBinding")); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Releases.Last("app"); err == nil {
		t.Fatal("a rewritten revision is read")
	}
	// What Helm writes through it, it reads back; the ledger knows it as pending first.
	if err := ac.Releases.Create(rev(3, release.StatusPendingUpgrade, "c")); err != nil {
		t.Fatal(err)
	}
	if got, err := ac.Releases.Get("app", 3); err != nil || got.Manifest != "c" {
		t.Fatalf("Helm's own revision: %+v %v", got, err)
	}
	e, err := d.ledgerEntry(ctx, "ns", "app")
	if err != nil || e.Pending != 3 || e.PendingDigest != digest(rev(3, release.StatusPendingUpgrade, "c")) {
		t.Fatalf("the pending revision's digest is recorded before it is written: %+v %v", e, err)
	}
}

// Adoption is a migration: the first start that adopts leaves its marker, and a later start
// adopts nothing, whatever release Secrets say (it does not even read them).
func TestReleasesAreAdoptedOnce(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewSimpleClientset()
	// No rest config: a pass that reached Helm would fail.
	d := &Deployer{kube: kube, agentNamespace: "cattle-fleet-system"}
	if n, err := d.AdoptReleases(ctx, nil); err != nil || n != 0 {
		t.Fatalf("first start: %d %v", n, err)
	}
	if _, err := kube.CoreV1().ConfigMaps("cattle-fleet-system").Get(ctx, adoptedMarker, metav1.GetOptions{}); err != nil {
		t.Fatalf("the first start leaves its marker: %v", err)
	}
	later := []Expected{{Namespace: "app", Name: "forged", BundleID: "bd"}}
	if n, err := d.AdoptReleases(ctx, later); err != nil || n != 0 {
		t.Fatalf("a later start adopts nothing: %d %v", n, err)
	}
}
