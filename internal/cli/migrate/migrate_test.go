package migrate

import (
	"testing"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestPattern(t *testing.T) {
	b := func(repo, chart string, targets ...fleet.BundleTarget) fleet.Bundle {
		var out fleet.Bundle
		out.Spec.Helm = &fleet.HelmOptions{Repo: repo, Chart: chart}
		out.Spec.Targets = targets
		return out
	}
	if got := Pattern([]fleet.Bundle{b("", "./chart"), b("", "web")}); got != "" {
		t.Errorf("no repository: %q", got)
	}
	if got, want := Pattern([]fleet.Bundle{b("https://charts.example.com/stable", "web"), b("https://charts.example.com/other", "api")}), `^https://charts\.example\.com/`; got != want {
		t.Errorf("one host: %q, want %q", got, want)
	}
	got := Pattern([]fleet.Bundle{b("https://charts.example.com/stable", "web",
		fleet.BundleTarget{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "oci://registry.example:5000/charts/web"}}})})
	if want := `^(https://charts\.example\.com/|oci://registry\.example:5000/)`; got != want {
		t.Errorf("two hosts: %q, want %q", got, want)
	}
}
