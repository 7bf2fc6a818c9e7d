// Package localserver_test proves the servers Fleet's tests depend on are real: git over smart
// HTTP, a Helm chart repository and an OCI registry, each enforcing basic auth.
package localserver_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/harness/localserver"
)

var auth = localserver.BasicAuth{Username: "fleet", Password: "s3cret"}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGitServer(t *testing.T) {
	ctx := context.Background()
	g, err := localserver.StartGitServer(t.TempDir(), auth)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	src := t.TempDir()
	writeFiles(t, src, map[string]string{"app/cm.yaml": "kind: ConfigMap\n"})
	first, err := g.Publish(ctx, "examples", "main", src, "first")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, src, map[string]string{"app/cm.yaml": "kind: ConfigMap\nmetadata: {name: v2}\n"})
	second, err := g.Publish(ctx, "examples", "main", src, "second")
	if err != nil {
		t.Fatal(err)
	}
	if first == second {
		t.Fatal("a new publish must make a new commit")
	}

	authed := strings.Replace(g.RepoURL("examples"), "http://", "http://fleet:s3cret@", 1)
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "-q", "--branch", "main", authed, clone).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v: %s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(clone, "app", "cm.yaml"))
	if err != nil || !strings.Contains(string(data), "v2") {
		t.Fatalf("clone has %q, %v", data, err)
	}
	out, err := exec.Command("git", "-C", clone, "log", "--format=%H").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out)); len(got) != 2 || got[0] != second || got[1] != first {
		t.Fatalf("history %v, want [%s %s]", got, second, first)
	}

	wrong := strings.Replace(g.RepoURL("examples"), "http://", "http://fleet:wrong@", 1)
	cmd := exec.Command("git", "ls-remote", wrong)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "401") && !strings.Contains(string(out), "Authentication failed") {
		t.Fatalf("wrong password must fail: %v %s", err, out)
	}
}

func testChart(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "hello")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: hello\nversion: 1.2.3\n",
		"values.yaml":              "greeting: hi\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\ndata:\n  greeting: {{ .Values.greeting }}\n",
	})
	return dir
}

func TestChartRepo(t *testing.T) {
	r, err := localserver.StartChartRepo(t.TempDir(), auth)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pkg, err := r.AddChart(testChart(t))
	if err != nil {
		t.Fatal(err)
	}
	if pkg != "hello-1.2.3.tgz" {
		t.Fatalf("package %s", pkg)
	}

	get := func(path string, withAuth bool) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, r.URL+path, nil)
		if withAuth {
			req.SetBasicAuth(auth.Username, auth.Password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp, []byte(b.String())
	}
	if resp, _ := get("/index.yaml", false); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without credentials: %d", resp.StatusCode)
	}
	resp, body := get("/index.yaml", true)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("index: %d", resp.StatusCode)
	}
	var idx repo.IndexFile
	if err := yaml.Unmarshal(body, &idx); err != nil {
		t.Fatal(err)
	}
	cv, err := idx.Get("hello", "^1.0.0")
	if err != nil {
		t.Fatalf("semver lookup in index: %v", err)
	}
	if cv.Version != "1.2.3" || len(cv.URLs) != 1 || cv.URLs[0] != r.URL+"/hello-1.2.3.tgz" {
		t.Fatalf("index entry %+v", cv.Metadata)
	}
	if resp, _ := get("/hello-1.2.3.tgz", true); resp.StatusCode != http.StatusOK {
		t.Fatalf("package: %d", resp.StatusCode)
	}
}

func TestOCIRegistry(t *testing.T) {
	ctx := context.Background()
	reg, err := localserver.StartOCIRegistry(ctx, t.TempDir(), auth)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	chartRepo, err := localserver.StartChartRepo(t.TempDir(), localserver.BasicAuth{})
	if err != nil {
		t.Fatal(err)
	}
	defer chartRepo.Close()
	pkg, err := chartRepo.AddChart(testChart(t))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(chartRepo.Dir, pkg))
	if err != nil {
		t.Fatal(err)
	}

	ref := reg.Host + "/charts/hello:1.2.3"
	bad, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptBasicAuth("fleet", "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Push(data, ref); err == nil {
		t.Fatal("a push with a wrong password must fail")
	}

	c, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptBasicAuth(auth.Username, auth.Password))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Push(data, ref); err != nil {
		t.Fatalf("push: %v (registry log %s)", err, reg.LogPath)
	}
	tags, err := c.Tags(reg.Host + "/charts/hello")
	if err != nil || len(tags) != 1 || tags[0] != "1.2.3" {
		t.Fatalf("tags %v, %v", tags, err)
	}
	res, err := c.Pull(ref)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Chart.Data) != string(data) {
		t.Fatal("pulled chart differs from pushed")
	}
}
