package restriction

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestGitRepo(t *testing.T) {
	rs := []*fleet.GitRepoRestriction{
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, DefaultServiceAccount: "later", AllowedServiceAccounts: []string{"team"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, DefaultServiceAccount: "team", DefaultClientSecretName: "creds",
			AllowedRepoPatterns: []string{`^https://git\.example/team/`}, AllowedTargetNamespaces: []string{"team-apps"}},
	}
	ok := fleet.GitRepoSpec{Repo: "https://git.example/team/app", TargetNamespace: "team-apps"}
	got := ok
	if err := Combine(rs).GitRepo(&got); err != nil {
		t.Fatal(err)
	}
	if got.ServiceAccount != "team" || got.ClientSecretName != "creds" {
		t.Fatalf("defaults (from restriction a, first by name): %+v", got)
	}
	for _, c := range []struct {
		mutate func(*fleet.GitRepoSpec)
		want   string
	}{
		{func(s *fleet.GitRepoSpec) { s.ServiceAccount = "admin" }, `disallowed serviceAccount admin: `},
		{func(s *fleet.GitRepoSpec) { s.Repo = "https://evil.example/x" }, "matches none of the allowedRepoPatterns"},
		{func(s *fleet.GitRepoSpec) { s.TargetNamespace = "" }, "targetNamespace is empty"},
		{func(s *fleet.GitRepoSpec) { s.TargetNamespace = "kube-system" }, `disallowed targetNamespace kube-system: `},
	} {
		spec := ok
		c.mutate(&spec)
		if err := Combine(rs).GitRepo(&spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
	if got := (fleet.GitRepoSpec{Repo: "anything"}); Combine(nil).GitRepo(&got) != nil || got.Repo != "anything" {
		t.Fatalf("no restrictions: %v", got)
	}
}

// A Bundle, however written, is held to the restrictions: the default service account fills an
// empty one, the Bundle's and each target's service account and namespace must be allowed, and
// the allowed namespace selector replaces the Bundle's own.
func TestBundle(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	rs := []*fleet.GitRepoRestriction{{ObjectMeta: metav1.ObjectMeta{Name: "a"}, DefaultServiceAccount: "team",
		AllowedServiceAccounts: []string{"team"}, AllowedTargetNamespaces: []string{"team-apps"}, AllowedTargetNamespaceSelector: sel}}
	ok := func() fleet.BundleSpec {
		return fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{TargetNamespace: "team-apps"},
			Targets: []fleet.BundleTarget{{Name: "t", BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				AllowedTargetNamespaceSelector: &metav1.LabelSelector{}}}}}
	}
	got := ok()
	if err := Combine(rs).Bundle(&got); err != nil {
		t.Fatal(err)
	}
	if got.ServiceAccount != "team" || got.AllowedTargetNamespaceSelector.MatchLabels["team"] != "a" || got.Targets[0].AllowedTargetNamespaceSelector != nil {
		t.Fatalf("defaults and selector: %+v", got)
	}
	for _, c := range []struct {
		mutate func(*fleet.BundleSpec)
		want   string
	}{
		{func(s *fleet.BundleSpec) { s.ServiceAccount = "fleet-agent" }, `disallowed serviceAccount fleet-agent: `},
		{func(s *fleet.BundleSpec) { s.Targets[0].ServiceAccount = "admin" }, `disallowed targets[0].serviceAccount admin: `},
		{func(s *fleet.BundleSpec) { s.TargetNamespace = "" }, "namespace is empty"},
		{func(s *fleet.BundleSpec) { s.Targets[0].TargetNamespace = "kube-system" }, `disallowed targets[0].namespace kube-system: `},
	} {
		spec := ok()
		c.mutate(&spec)
		if err := Combine(rs).Bundle(&spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
	if got := ok(); Combine(nil).Bundle(&got) != nil || got.ServiceAccount != "" {
		t.Fatalf("no restrictions: %+v", got)
	}
}
