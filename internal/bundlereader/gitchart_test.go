package bundlereader

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetgo/fleet/internal/harness/localserver"
)

func TestParseGitChart(t *testing.T) {
	tests := []struct{ in, url, sub, ref string }{
		{"git::https://example.com/org/charts.git//charts/web?ref=v1.2.0", "https://example.com/org/charts.git", "charts/web", "v1.2.0"},
		{"git::http://127.0.0.1:8080/x.git//web", "http://127.0.0.1:8080/x.git", "web", ""},
		{"git::github.com/org/repo//deploy/chart?ref=main", "https://github.com/org/repo", "deploy/chart", "main"},
		{"git::https://example.com/chart.git", "https://example.com/chart.git", "", ""},
		{"git::git@example.com:org/charts.git//web?ref=v2", "git@example.com:org/charts.git", "web", "v2"},
		{"git::ssh://git@example.com/org/charts.git//web", "ssh://git@example.com/org/charts.git", "web", ""},
	}
	for _, tt := range tests {
		got, err := parseGitChart(tt.in)
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if got.repoURL != tt.url || got.subdir != tt.sub || got.ref != tt.ref {
			t.Errorf("%s: got %+v", tt.in, got)
		}
	}
}

func TestFetchGitChart(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git command for the test server")
	}
	srv, err := localserver.StartGitServer(t.TempDir(), localserver.BasicAuth{Username: "g", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	src := t.TempDir()
	writeChart(t, filepath.Join(src, "charts"), "web", "0.1.0", "")
	ctx := context.Background()
	first, err := srv.Publish(ctx, "charts", "main", src, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(src, "charts")); err != nil {
		t.Fatal(err)
	}
	writeChart(t, filepath.Join(src, "charts"), "web", "0.2.0", "")
	if _, err := srv.Publish(ctx, "charts", "main", src, "v0.2.0"); err != nil {
		t.Fatal(err)
	}
	auth := ChartAuth{Username: "g", Password: "p"}
	base := "git::" + srv.RepoURL("charts") + "//charts/web-"
	for ref, want := range map[string]string{"main": "0.2.0", first: "0.1.0"} {
		version := want
		c, err := fetchGitChart(context.Background(), base+version+"?ref="+ref, true, auth)
		if err != nil {
			t.Fatalf("ref %s: %v", ref, err)
		}
		if c.Version != want {
			t.Errorf("ref %s: version %s, want %s", ref, c.Version, want)
		}
	}
	if _, err := fetchGitChart(context.Background(), base+"0.2.0?ref=main", true, ChartAuth{Username: "g", Password: "x"}); err == nil || !strings.Contains(err.Error(), "cloning") {
		t.Errorf("wrong credentials: %v", err)
	}
}
