package bundlereader

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A repository whose index places the archive on another host gets the chart downloaded, and
// that other host none of the repository's credentials.
func TestRepositoryCredentialsStayWithTheRepository(t *testing.T) {
	c, err := loader.LoadDir(writeChart(t, t.TempDir(), "web", "1.0.0", ""))
	if err != nil {
		t.Fatal(err)
	}
	archive, err := chartutil.Save(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sent []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write(data)
	}))
	defer other.Close()
	repoSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "p" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("apiVersion: v1\nentries:\n  web:\n  - apiVersion: v2\n    name: web\n    version: 1.0.0\n    urls:\n    - " +
			other.URL + "/web-1.0.0.tgz\n"))
	}))
	defer repoSrv.Close()

	got, err := fetchChart(context.Background(), &fleet.HelmOptions{Repo: repoSrv.URL, Chart: "web"}, ChartAuth{Username: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != "1.0.0" {
		t.Fatalf("version %s", got.Version)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) == 0 {
		t.Fatal("the archive host was not asked")
	}
	for _, a := range sent {
		if a != "" {
			t.Errorf("the archive's host got credentials: %q", a)
		}
	}
}
