package cmd

import (
	"bytes"
	"strings"
	"testing"
)

func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := New()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestFleetTestRendersPerCluster(t *testing.T) {
	const repo = "../bundlereader/testdata/apply"
	prod, err := runRoot(t, "test", "--root", repo, "--cluster-label", "env=prod", "simple", "overlays-app")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prod, "env: prod") || strings.Contains(prod, "env: base") {
		t.Errorf("a prod cluster gets the prod overlay:\n%s", prod)
	}
	dev, err := runRoot(t, "test", "--root", repo, "--cluster-label", "env=dev", "simple", "overlays-app")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dev, "env: base") {
		t.Errorf("other clusters get the base:\n%s", dev)
	}
	if _, err := runRoot(t, "test", "--root", repo, "simple", "no-such-folder"); err == nil {
		t.Error("a missing path is an error")
	}
}

func TestFleetApplyOutput(t *testing.T) {
	out, err := runRoot(t, "apply", "-o", "-", "--root", "../bundlereader/testdata/apply", "-l", "team=a", "simple", "named")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: custom-name", "team: a", "fleet.cattle.io/repo-name: simple", "keepResources: true"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
