package render

import (
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync/atomic"
	"testing"
)

// A kustomization that names anything outside the bundle's files (a URL, a git repository) is
// refused before kustomize runs, unless remote resources are allowed; local paths pass.
func TestKustomizeFetchesNothingRemote(t *testing.T) {
	local := Files{
		"kustomization.yaml":      []byte("resources:\n- cm.yaml\n- base\nconfigMapGenerator:\n- name: g\n  files:\n  - key=data.txt\n"),
		"cm.yaml":                 []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"),
		"data.txt":                []byte("x"),
		"base/kustomization.yaml": []byte("resources:\n- b.yaml\n"),
		"base/b.yaml":             []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"),
	}
	if _, err := (&Kustomizer{Files: local}).Build(nil); err != nil {
		t.Fatalf("a local kustomization: %v", err)
	}
	for name, k := range map[string]string{
		"a URL resource":       "resources:\n- cm.yaml\n- http://169.254.169.254/latest/meta-data/\n",
		"a git base":           "resources:\n- github.com/example/repo//deploy?ref=v1\n",
		"a remote patch":       "resources:\n- cm.yaml\npatches:\n- path: https://example.com/patch.yaml\n",
		"a remote file source": "configMapGenerator:\n- name: g\n  files:\n  - k=https://example.com/secret\n",
	} {
		files := Files{"kustomization.yaml": []byte(k), "cm.yaml": local["cm.yaml"]}
		_, err := (&Kustomizer{Files: files}).Build(nil)
		if err == nil || !strings.Contains(err.Error(), "not files of the bundle") || !strings.Contains(err.Error(), "kustomization.yaml: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	RemoteKustomize = true
	defer func() { RemoteKustomize = false }()
	files := Files{"kustomization.yaml": []byte("resources:\n- cm.yaml\n- http://127.0.0.1:1/x.yaml\n"), "cm.yaml": local["cm.yaml"]}
	if _, err := (&Kustomizer{Files: files}).Build(nil); err == nil || strings.Contains(err.Error(), "not files of the bundle") {
		t.Errorf("allowed, kustomize itself tries the URL: %v", err)
	}
}

// A decoy file whose path equals a URL the kustomization names does not make the URL a file of
// the bundle: kustomize tests for a URL before it reads a file, and would fetch it. Nothing is
// fetched: the server counts every request.
func TestKustomizeDecoyFileFetchesNothing(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\n"))
	}))
	defer srv.Close()
	url := srv.URL + "/secret"
	decoy := path.Clean(url) // the file path.Join makes of the URL: "http:/127.0.0.1:port/secret"
	cm := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n")
	for name, k := range map[string]string{
		"a generator file source": "resources:\n- cm.yaml\nconfigMapGenerator:\n- name: g\n  files:\n  - k=" + url + "\n",
		"a generator env source":  "resources:\n- cm.yaml\nconfigMapGenerator:\n- name: g\n  envs:\n  - " + url + "\n",
		"a resource":              "resources:\n- cm.yaml\n- " + url + "\n",
		"an upper-case scheme":    "resources:\n- cm.yaml\n- " + strings.Replace(url, "http", "HTTP", 1) + "\n",
		"a case-folded key":       "Resources:\n- cm.yaml\n- " + url + "\n",
	} {
		files := Files{"kustomization.yaml": []byte(k), "cm.yaml": cm, decoy: cm, strings.Replace(decoy, "http", "HTTP", 1): cm}
		_, err := (&Kustomizer{Files: files}).Build(nil)
		if err == nil || !strings.Contains(err.Error(), "not files of the bundle") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the URL was fetched %d times", n)
	}
	// A git base with a decoy folder of its path is refused the same way.
	files := Files{"kustomization.yaml": []byte("resources:\n- github.com/example/repo/deploy\n"),
		"github.com/example/repo/deploy/kustomization.yaml": []byte("resources:\n- cm.yaml\n"),
		"github.com/example/repo/deploy/cm.yaml":            cm}
	if _, err := (&Kustomizer{Files: files}).Build(nil); err == nil || !strings.Contains(err.Error(), `resources "github.com/example/repo/deploy"`) {
		t.Errorf("a git base behind a decoy folder: %v", err)
	}
	// A kustomization this cannot read is refused, not left to kustomize.
	files = Files{"kustomization.yaml": []byte("resources: [\n")}
	if _, err := (&Kustomizer{Files: files}).Build(nil); err == nil || !strings.Contains(err.Error(), "kustomization.yaml: ") {
		t.Errorf("an unreadable kustomization: %v", err)
	}
}
