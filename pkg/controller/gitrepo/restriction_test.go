package gitrepo

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestRestrict(t *testing.T) {
	rs := []*fleet.GitRepoRestriction{
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, DefaultServiceAccount: "later", AllowedServiceAccounts: []string{"team"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, DefaultServiceAccount: "team", DefaultClientSecretName: "creds",
			AllowedRepoPatterns: []string{`^https://git\.example/team/`}, AllowedTargetNamespaces: []string{"team-apps"}},
	}
	ok := fleet.GitRepoSpec{Repo: "https://git.example/team/app", TargetNamespace: "team-apps"}
	got, err := restrict(ok, rs)
	if err != nil {
		t.Fatal(err)
	}
	if got.ServiceAccount != "team" || got.ClientSecretName != "creds" {
		t.Fatalf("defaults (from restriction a, first by name): %+v", got)
	}
	for _, c := range []struct {
		mutate func(*fleet.GitRepoSpec)
		want   string
	}{
		{func(s *fleet.GitRepoSpec) { s.ServiceAccount = "admin" }, `serviceAccount "admin" is not allowed`},
		{func(s *fleet.GitRepoSpec) { s.Repo = "https://evil.example/x" }, "matches none of the allowedRepoPatterns"},
		{func(s *fleet.GitRepoSpec) { s.TargetNamespace = "" }, "targetNamespace is empty"},
		{func(s *fleet.GitRepoSpec) { s.TargetNamespace = "kube-system" }, `targetNamespace "kube-system" is not allowed`},
	} {
		spec := ok
		c.mutate(&spec)
		if _, err := restrict(spec, rs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
	if got, err := restrict(fleet.GitRepoSpec{Repo: "anything"}, nil); err != nil || got.Repo != "anything" {
		t.Fatalf("no restrictions: %v %v", got, err)
	}
}
