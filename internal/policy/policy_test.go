package policy

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func pol(name string, mutate func(*fleet.Policy)) *fleet.Policy {
	p := &fleet.Policy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	mutate(p)
	return p
}

func boolPtr(b bool) *bool { return &b }

func TestNoPolicyChecksNothing(t *testing.T) {
	spec := fleet.GitRepoSpec{Repo: "https://anywhere"}
	if err := Combine(nil).GitRepo(&spec); err != nil || spec.ServiceAccount != "" {
		t.Fatalf("err %v, spec %+v", err, spec)
	}
}

func TestGitRepoDefaultsAndAllowLists(t *testing.T) {
	s := Combine([]*fleet.Policy{
		pol("b", func(p *fleet.Policy) {
			p.AllowedServiceAccounts = []string{"other"}
			p.GitRepo = &fleet.GitRepoPolicy{DefaultServiceAccount: "second", AllowedRepoPatterns: []string{`^https://git\.example\.com/`}}
		}),
		pol("a", func(p *fleet.Policy) {
			p.RequireServiceAccount = true
			p.AllowedServiceAccounts = []string{"deployer"}
			p.GitRepo = &fleet.GitRepoPolicy{DefaultServiceAccount: "deployer", DefaultClientSecretName: "git-auth",
				AllowedClientSecretNames: []string{"git-auth"}}
		}),
	})
	spec := fleet.GitRepoSpec{Repo: "https://git.example.com/team/app"}
	if err := s.GitRepo(&spec); err != nil {
		t.Fatal(err)
	}
	if spec.ServiceAccount != "deployer" || spec.ClientSecretName != "git-auth" {
		t.Fatalf("defaults of the first Policy by name: %+v", spec)
	}
	// Either Policy's list admits: "other" comes from b.
	spec = fleet.GitRepoSpec{Repo: "https://git.example.com/x", ServiceAccount: "other"}
	if err := s.GitRepo(&spec); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec fleet.GitRepoSpec
		want string
	}{
		{fleet.GitRepoSpec{Repo: "https://elsewhere/x"}, "gitRepo.allowedRepoPatterns"},
		{fleet.GitRepoSpec{Repo: "https://git.example.com/x", ServiceAccount: "root"}, "disallowed serviceAccount root: not in allowedServiceAccounts"},
		{fleet.GitRepoSpec{Repo: "https://git.example.com/x", ClientSecretName: "stolen"}, "gitRepo.allowedClientSecretNames"},
	} {
		spec := tc.spec
		if err := s.GitRepo(&spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want it to name %s", tc.spec, err, tc.want)
		}
	}
}

func TestRequireServiceAccount(t *testing.T) {
	s := Combine([]*fleet.Policy{pol("a", func(p *fleet.Policy) { p.RequireServiceAccount = true })})
	err := s.Bundle(&fleet.BundleSpec{})
	if err == nil || !strings.Contains(err.Error(), "requireServiceAccount") {
		t.Fatalf("error %v", err)
	}
	spec := fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{ServiceAccount: "deployer"}}
	if err := s.Bundle(&spec); err != nil {
		t.Fatal(err)
	}
}

func TestHelmOpPatternsAndSecrets(t *testing.T) {
	s := Combine([]*fleet.Policy{pol("a", func(p *fleet.Policy) {
		p.HelmOp = &fleet.HelmOpPolicy{DefaultHelmSecretName: "charts", AllowedHelmSecretNames: []string{"charts"},
			AllowedHelmRepoPatterns: []string{`^https://charts\.example\.com/`}, AllowedChartPatterns: []string{`^web$`, `^oci://registry\.example\.com/`}}
	})})
	ok := fleet.HelmOpSpec{BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
		Helm: &fleet.HelmOptions{Repo: "https://charts.example.com/stable", Chart: "web"}}}}
	if err := s.HelmOp(&ok); err != nil || ok.HelmSecretName != "charts" {
		t.Fatalf("err %v, secret %q", err, ok.HelmSecretName)
	}
	stolen := fleet.HelmOpSpec{HelmSecretName: "stolen", BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
		Helm: &fleet.HelmOptions{Repo: "https://charts.example.com/stable", Chart: "web"}}}}
	if err := s.HelmOp(&stolen); err == nil || !strings.HasPrefix(err.Error(), "disallowed helmSecretName stolen: ") {
		t.Errorf("error %v, want Fleet's words: disallowed helmSecretName stolen: ...", err)
	}
	oci := fleet.HelmOpSpec{BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
		Helm: &fleet.HelmOptions{Chart: "oci://registry.example.com/charts/web"}}}}
	if err := s.HelmOp(&oci); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		h    fleet.HelmOptions
		want string
	}{
		{fleet.HelmOptions{Repo: "https://evil.example.org/", Chart: "web"}, "helmOp.allowedHelmRepoPatterns"},
		{fleet.HelmOptions{Repo: "https://charts.example.com/stable", Chart: "miner"}, "helmOp.allowedChartPatterns"},
	} {
		spec := fleet.HelmOpSpec{BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &tc.h}}}
		if err := s.HelmOp(&spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %s", tc.h, err, tc.want)
		}
	}
	// A target's helm options are held to the same lists: they replace the HelmOp's per cluster.
	for _, tc := range []struct {
		h    fleet.HelmOptions
		want string
	}{
		{fleet.HelmOptions{Repo: "https://evil.example.org/"}, "targets[0].helm.repo"},
		{fleet.HelmOptions{Chart: "oci://evil.example.org/miner"}, "targets[0].helm.chart"},
	} {
		spec := ok
		spec.Targets = []fleet.BundleTarget{{Name: "t", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &tc.h}}}
		if err := s.HelmOp(&spec); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "helmOp.allowed") {
			t.Errorf("target %+v: error %v, want %s", tc.h, err, tc.want)
		}
	}
	withTarget := ok
	withTarget.Targets = []fleet.BundleTarget{{Name: "t", BundleDeploymentOptions: fleet.BundleDeploymentOptions{
		Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"a": 1}}}}}}
	if err := s.HelmOp(&withTarget); err != nil {
		t.Errorf("a target that only sets values: %v", err)
	}
	bad := Combine([]*fleet.Policy{pol("a", func(p *fleet.Policy) { p.HelmOp = &fleet.HelmOpPolicy{AllowedChartPatterns: []string{"("}} })})
	if err := bad.HelmOp(&ok); err == nil || !strings.Contains(err.Error(), "allowedChartPatterns") {
		t.Fatalf("a broken pattern: %v", err)
	}
}

// A Bundle written directly with helmOpOptions (its agent downloads the chart with the
// credentials of helmOpSecretName) is held to the HelmOp lists as a HelmOp's Bundle is.
func TestBundleWithHelmOpOptionsMeetsTheHelmOpLists(t *testing.T) {
	s := Combine([]*fleet.Policy{pol("a", func(p *fleet.Policy) {
		p.HelmOp = &fleet.HelmOpPolicy{AllowedHelmSecretNames: []string{"charts"},
			AllowedHelmRepoPatterns: []string{`^https://charts\.example\.com/`}, AllowedChartPatterns: []string{`^web$`}}
	})})
	bundle := func(secret string, h fleet.HelmOptions, targets ...fleet.HelmOptions) *fleet.BundleSpec {
		spec := &fleet.BundleSpec{HelmOpOptions: &fleet.BundleHelmOptions{SecretName: secret},
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &h}}
		for i := range targets {
			spec.Targets = append(spec.Targets, fleet.BundleTarget{Name: "t", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &targets[i]}})
		}
		return spec
	}
	good := fleet.HelmOptions{Repo: "https://charts.example.com/stable", Chart: "web"}
	if err := s.Bundle(bundle("charts", good)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec *fleet.BundleSpec
		want string
	}{
		{bundle("team-b-git", good), "disallowed helmOpOptions.helmOpSecretName team-b-git: "},
		{bundle("charts", fleet.HelmOptions{Repo: "https://evil.example.org/", Chart: "web"}), "helm.repo"},
		{bundle("charts", fleet.HelmOptions{Repo: "https://charts.example.com/stable", Chart: "miner"}), "helm.chart"},
		{bundle("charts", good, fleet.HelmOptions{Repo: "https://evil.example.org/"}), "targets[0].helm.repo"},
	} {
		if err := s.Bundle(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %s", tc.spec.Helm, err, tc.want)
		}
	}
	// A Bundle of resources (no helmOpOptions) has no chart the agent downloads: not held.
	plain := &fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Repo: "https://elsewhere.example.org/"}}}
	if err := s.Bundle(plain); err != nil {
		t.Fatal(err)
	}
}

func TestNamespaceCreation(t *testing.T) {
	deny := pol("a", func(p *fleet.Policy) { p.AllowNamespaceCreation = boolPtr(false) })
	allow := pol("b", func(p *fleet.Policy) { p.AllowNamespaceCreation = boolPtr(true) })
	spec := fleet.BundleSpec{Targets: []fleet.BundleTarget{{BundleDeploymentOptions: fleet.BundleDeploymentOptions{CreateNamespace: boolPtr(true)}}}}
	if err := Combine([]*fleet.Policy{deny}).Bundle(&spec); err != nil {
		t.Fatal(err)
	}
	if spec.CreateNamespace == nil || *spec.CreateNamespace || spec.Targets[0].CreateNamespace != nil {
		t.Fatalf("namespace creation not turned off: %+v", spec)
	}
	spec = fleet.BundleSpec{}
	if err := Combine([]*fleet.Policy{deny, allow}).Bundle(&spec); err != nil || spec.CreateNamespace != nil {
		t.Fatalf("another Policy allows it: %v %+v", err, spec)
	}
}
