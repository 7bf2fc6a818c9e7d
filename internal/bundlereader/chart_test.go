package bundlereader

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/fleetgo/fleet/internal/harness/localserver"
	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func writeChart(t *testing.T, dir, name, version, extraChartYAML string) string {
	t.Helper()
	d := filepath.Join(dir, name+"-"+version)
	files := map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n" + extraChartYAML,
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n",
	}
	for n, c := range files {
		p := filepath.Join(d, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestFetchChartFromRepository(t *testing.T) {
	auth := localserver.BasicAuth{Username: "u", Password: "p"}
	r, err := localserver.StartChartRepo(t.TempDir(), auth)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	src := t.TempDir()
	for _, v := range []string{"1.0.0", "1.4.0", "2.0.0"} {
		if _, err := r.AddChart(writeChart(t, src, "web", v, "")); err != nil {
			t.Fatal(err)
		}
	}
	creds := ChartAuth{Username: "u", Password: "p"}

	tests := []struct {
		name    string
		h       fleet.HelmOptions
		auth    ChartAuth
		version string
		errPart string
	}{
		{"constraint picks the newest match", fleet.HelmOptions{Repo: r.URL, Chart: "web", Version: "~1"}, creds, "1.4.0", ""},
		{"exact version", fleet.HelmOptions{Repo: r.URL, Chart: "web", Version: "1.0.0"}, creds, "1.0.0", ""},
		{"no version is the newest", fleet.HelmOptions{Repo: r.URL, Chart: "web"}, creds, "2.0.0", ""},
		{"archive URL", fleet.HelmOptions{Chart: r.URL + "/web-1.0.0.tgz"}, creds, "1.0.0", ""},
		{"missing version", fleet.HelmOptions{Repo: r.URL, Chart: "web", Version: "9.9.9"}, creds, "", `helm.chart "web" version "9.9.9"`},
		{"missing chart", fleet.HelmOptions{Repo: r.URL, Chart: "nope"}, creds, "", `helm.chart "nope"`},
		{"wrong password", fleet.HelmOptions{Repo: r.URL, Chart: "web"}, ChartAuth{Username: "u", Password: "x"}, "", "401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := fetchChart(context.Background(), &tt.h, tt.auth)
			if tt.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("want error containing %q, got %v", tt.errPart, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Version != tt.version {
				t.Fatalf("version %s, want %s", c.Version, tt.version)
			}
			if !strings.HasPrefix(c.Name, EmbeddedChartDir+"/") || !strings.HasSuffix(c.Name, "/web-"+tt.version+".tgz") {
				t.Fatalf("name %s", c.Name)
			}
			if _, err := loader.LoadArchive(strings.NewReader(string(c.Data))); err != nil {
				t.Fatalf("embedded data is no chart: %v", err)
			}
		})
	}
}

// repoWithDep serves a chart repository holding chart dep 0.1.0 and returns it with a folder
// for more charts.
func repoWithDep(t *testing.T) (*localserver.ChartRepo, string) {
	t.Helper()
	r, err := localserver.StartChartRepo(t.TempDir(), localserver.BasicAuth{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	src := t.TempDir()
	if _, err := r.AddChart(writeChart(t, src, "dep", "0.1.0", "")); err != nil {
		t.Fatal(err)
	}
	return r, src
}

func TestPackageLocalChartBuildsDependencies(t *testing.T) {
	r, src := repoWithDep(t)
	parent := writeChart(t, src, "parent", "1.0.0", "dependencies:\n- name: dep\n  version: ^0.1.0\n  repository: "+r.URL+"\n")

	c, err := packageLocalChart(context.Background(), src, parent, true, ChartAuth{})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadArchive(strings.NewReader(string(c.Data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Dependencies()) != 1 || ch.Dependencies()[0].Name() != "dep" {
		t.Fatalf("dependencies %v", ch.Dependencies())
	}
	if _, err := os.Stat(filepath.Join(parent, "charts")); !os.IsNotExist(err) {
		t.Fatal("the user's chart folder must not be modified")
	}

	if _, err := packageLocalChart(context.Background(), src, parent, false, ChartAuth{}); err != nil {
		t.Fatalf("without updating dependencies the chart still packages: %v", err)
	}
}

func TestBundleFolderThatIsAChartGetsItsDependencies(t *testing.T) {
	r, src := repoWithDep(t)
	writeChart(t, src, "parent", "1.0.0", "dependencies:\n- name: dep\n  version: ^0.1.0\n  repository: "+r.URL+"\n")
	writeChart(t, src, "plain", "1.0.0", "")

	bs, err := Read(src, []string{"parent-1.0.0", "plain-1.0.0"}, Options{Name: "r", Namespace: "fleet-local"})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*fleet.Bundle{}
	for _, b := range bs {
		byName[b.Name] = b
	}
	parent := byName[names.BundleName("r", "parent-1.0.0")]
	if parent == nil || parent.Spec.Helm == nil || parent.Spec.Helm.Chart == "" || parent.Spec.Helm.Chart == "." {
		t.Fatalf("the chart with dependencies is packaged with them: %+v", byName)
	}
	var archive []byte
	for _, res := range parent.Spec.Resources {
		if res.Name == parent.Spec.Helm.Chart {
			if archive, err = Decode(res); err != nil {
				t.Fatal(err)
			}
		}
	}
	ch, err := loader.LoadArchive(strings.NewReader(string(archive)))
	if err != nil {
		t.Fatalf("embedded archive %q: %v", parent.Spec.Helm.Chart, err)
	}
	if len(ch.Dependencies()) != 1 {
		t.Fatalf("dependencies %v", ch.Dependencies())
	}
	if plain := byName[names.BundleName("r", "plain-1.0.0")]; plain == nil || plain.Spec.Helm != nil && plain.Spec.Helm.Chart != "" {
		t.Fatalf("a chart folder with nothing to fetch is deployed from its files: %+v", plain)
	}
}

// TestCredentialsOnlyToMatchingHosts: with helmRepoURLRegex set, chart credentials go only to
// repositories whose URL matches it; without it, to every repository (as in Fleet).
func TestCredentialsOnlyToMatchingHosts(t *testing.T) {
	r, _ := repoWithDep(t)
	var mu sync.Mutex
	var seen []string
	target, _ := url.Parse(r.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		seen = append(seen, req.Header.Get("Authorization"))
		mu.Unlock()
		proxy.ServeHTTP(w, req)
	}))
	defer front.Close()

	for _, tt := range []struct {
		name     string
		regex    string
		wantAuth bool
	}{
		{"no regex: every host", "", true},
		{"matching host", "^" + regexp.QuoteMeta(front.URL), true},
		{"other host", `^https://charts\.example\.com/`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			auth := ChartAuth{Username: "u", Password: "secret"}
			if tt.regex != "" {
				auth.URLRegex = regexp.MustCompile(tt.regex)
			}
			if _, err := fetchChart(context.Background(), &fleet.HelmOptions{Repo: front.URL, Chart: "dep"}, auth); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 {
				t.Fatal("the repository index was not fetched through the recording server")
			}
			for _, h := range seen {
				if (h != "") != tt.wantAuth {
					t.Fatalf("Authorization header %q; want credentials sent: %v", h, tt.wantAuth)
				}
			}
		})
	}
}
