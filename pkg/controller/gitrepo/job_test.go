package gitrepo

import (
	"slices"
	"strings"
	"testing"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A GitRepo's helmRepoURLRegex, forceSyncGeneration and correctDrift reach the Job's fleet apply
// under Fleet's flag names.
func TestJobApplyArgsCarryGitRepoOptions(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace = "repo", "fleet-default"
	gr.Spec.HelmRepoURLRegex = "^https://charts\\.example\\.com/"
	gr.Spec.ForceSyncGeneration = 4
	gr.Spec.CorrectDrift = &fleet.CorrectDrift{Enabled: true, Force: true, KeepFailHistory: true}
	h := &handler{}
	args := jobApplyArgs(gr, h.applyOptions(gr, "c1"), gr.Namespace, "c1")
	joined := strings.Join(args, " ")
	for _, want := range []string{"--helm-repo-url-regex ^https://charts\\.example\\.com/", "--sync-generation 4",
		"--correct-drift", "--correct-drift-force", "--correct-drift-keep-fail-history"} {
		if !strings.Contains(joined, want) {
			t.Errorf("args %q lack %q", joined, want)
		}
	}
	if slices.Contains(args, "--correct-drift-keep-failed-history") {
		t.Errorf("old flag name used: %q", joined)
	}
}

// A shard's GitRepo Jobs run on its nodes (--shard-node-selector); without one, anywhere.
func TestJobPodNodeSelector(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace, gr.Spec.Repo = "repo", "fleet-default", "https://git.example/repo"
	cm, err := jobConfigMap(gr, "repo-abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sel := range []map[string]string{{"zone": "east"}, nil} {
		h := &handler{Deps: Deps{JobRunner: &JobRunner{Image: "fleet:dev", NodeSelector: sel}}}
		p, err := h.jobPod(gr, "c1", cm)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.NodeSelector) != len(sel) || p.NodeSelector["zone"] != sel["zone"] {
			t.Errorf("nodeSelector %v, want %v", p.NodeSelector, sel)
		}
	}
}

// spec.bundles reaches the Job's fleet apply as a driven scan of exactly the listed folders.
func TestJobApplyArgsListedBundles(t *testing.T) {
	gr := &fleet.GitRepo{}
	gr.Name, gr.Namespace = "repo", "fleet-default"
	gr.Spec.Bundles = []fleet.BundlePath{{Base: "a"}, {Base: "b", Options: "prod.yaml"}}
	h := &handler{}
	o := h.applyOptions(gr, "c1")
	args := jobApplyArgs(gr, o, gr.Namespace, "c1")
	if !slices.Contains(args, "--driven-scan") || !slices.Equal(o.Paths, []string{"a", "b:prod.yaml"}) {
		t.Errorf("args %q, paths %q", strings.Join(args, " "), o.Paths)
	}
}
