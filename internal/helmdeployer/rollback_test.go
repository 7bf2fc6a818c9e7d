package helmdeployer

import (
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
)

func rel(version int, status release.Status) *release.Release {
	return &release.Release{Name: "web", Namespace: "ns", Version: version, Info: &release.Info{Status: status}}
}

// Without keepFailHistory a failed correction leaves no trace in the history: the failed
// revision goes, and the one rolled back to is deployed again.
func TestDropFailedRollback(t *testing.T) {
	store := storage.Init(driver.NewMemory())
	for _, r := range []*release.Release{rel(1, release.StatusSuperseded), rel(2, release.StatusSuperseded), rel(3, release.StatusFailed)} {
		if err := store.Create(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := dropFailedRollback(store, "web", 2); err != nil {
		t.Fatal(err)
	}
	hist, err := store.History("web")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 {
		t.Fatalf("%d revisions left, want 2", len(hist))
	}
	if v2, _ := store.Get("web", 2); v2.Info.Status != release.StatusDeployed {
		t.Fatalf("v2 is %s, want deployed", v2.Info.Status)
	}
	if _, err := store.Get("web", 3); err == nil {
		t.Fatal("the failed revision is still there")
	}

	// A successful newest revision is never touched.
	ok := storage.Init(driver.NewMemory())
	_ = ok.Create(rel(1, release.StatusSuperseded))
	_ = ok.Create(rel(2, release.StatusDeployed))
	if err := dropFailedRollback(ok, "web", 1); err != nil {
		t.Fatal(err)
	}
	if h, _ := ok.History("web"); len(h) != 2 {
		t.Fatalf("history changed: %d revisions", len(h))
	}
}
