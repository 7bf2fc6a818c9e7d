// Package example publishes the example repository of dev/example/repo on a local git server,
// with the chart of dev/example/charts in a local chart repository, and writes the GitRepos that
// deploy it. The quickstart and the e2e suite both use it, so the suite proves what the
// quickstart shows.
package example

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fleetgo/fleet/internal/harness/localserver"
)

// RepoName is the repository's name on the git server; Branch its branch.
const (
	RepoName = "example"
	Branch   = "main"
)

// chartRepoPlaceholder stands in fleet.yaml files for the chart repository's URL.
const chartRepoPlaceholder = "CHART_REPO_URL"

// Labels of the two downstream clusters of the walkthrough.
var (
	DevLabels  = map[string]string{"env": "dev", "type": "edge"}
	ProdLabels = map[string]string{"env": "prod", "type": "alpha"}
)

// Dir is dev/example under the module root.
func Dir(root string) string { return filepath.Join(root, "dev", "example") }

// AddCharts packages every chart of dev/example/charts into the chart repository.
func AddCharts(root string, charts *localserver.ChartRepo) error {
	dirs, err := os.ReadDir(filepath.Join(Dir(root), "charts"))
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if d.IsDir() {
			if _, err := charts.AddChart(filepath.Join(Dir(root), "charts", d.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// Publish copies dev/example/repo, with edit applied to each file's content when edit is set
// and the chart repository's URL put in, to a new commit of RepoName on Branch. It returns the
// commit.
func Publish(ctx context.Context, root string, git *localserver.GitServer, chartRepoURL, message string, edit func(path, content string) string) (string, error) {
	src := filepath.Join(Dir(root), "repo")
	tmp, err := os.MkdirTemp("", "fleet-example-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(tmp, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		content := strings.ReplaceAll(string(data), chartRepoPlaceholder, chartRepoURL)
		if edit != nil {
			content = edit(filepath.ToSlash(rel), content)
		}
		return os.WriteFile(dst, []byte(content), 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("copying the example repository: %w", err)
	}
	return git.Publish(ctx, RepoName, Branch, tmp, message)
}

// GitRepos is the manifest a user applies to the manager: the namespace bundle for the
// management cluster's own agent (fleet-local) and the workloads for every downstream cluster
// (fleet-default).
// HelmOp is the example's HelmOp: the example-web chart straight from the chart repository (no
// git), at the newest 0.x version, on every cluster of fleet-default.
func HelmOp(chartRepoURL string) string {
	return fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: HelmOp
metadata:
  name: example-helmop
  namespace: fleet-default
spec:
  helm:
    repo: %s
    chart: example-web
    version: "0.x"
    releaseName: example-helmop
  namespace: example-helmop
  pollingInterval: 30s
  targets:
  - name: all
    clusterSelector: {}
`, chartRepoURL)
}

func GitRepos(repoURL string) string {
	return fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata:
  name: example-local
  namespace: fleet-local
spec:
  repo: %[1]s
  branch: %[2]s
  pollingInterval: 5s
  paths:
  - namespace
---
apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata:
  name: example
  namespace: fleet-default
spec:
  repo: %[1]s
  branch: %[2]s
  pollingInterval: 5s
  paths:
  - app
  - helm
  - helm-external
  - kustomize
  targets:
  - name: all
    clusterSelector: {}
`, repoURL, Branch)
}
