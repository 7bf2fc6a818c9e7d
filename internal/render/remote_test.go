package render

import (
	"strings"
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
