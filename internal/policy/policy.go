// Package policy applies the Policies of a namespace to the GitRepos, HelmOps and Bundles in it:
// defaults fill what an object leaves empty, and allow-lists must admit what it names. The
// Policies of one namespace are taken together, as in Fleet: an object passes a rule when any
// Policy allows it (allow-lists are joined), a default is the first set (by Policy name), a
// ServiceAccount is required when any Policy requires one, and namespace creation is refused
// only when some Policy refuses it and none allows it. Errors name the rule broken.
package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Set is the Policies of one namespace, taken together.
type Set struct {
	// Any: the namespace has a Policy (without one nothing is checked).
	Any                    bool
	RequireServiceAccount  bool
	AllowedServiceAccounts []string
	// NoNamespaceCreation: deployments may not create their target namespace.
	NoNamespaceCreation bool

	GitRepoServiceAccount, GitRepoClientSecret string
	RepoPatterns, ClientSecrets                []string

	HelmOpServiceAccount, HelmOpSecret string
	HelmRepoPatterns, ChartPatterns    []string
	HelmSecrets                        []string
}

// Combine takes the namespace's Policies together.
func Combine(ps []*fleet.Policy) Set {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b *fleet.Policy) int { return strings.Compare(a.Name, b.Name) })
	s := Set{Any: len(ps) > 0}
	allowCreate, denyCreate := false, false
	first := func(cur *string, v string) {
		if *cur == "" {
			*cur = v
		}
	}
	for _, p := range ps {
		s.RequireServiceAccount = s.RequireServiceAccount || p.RequireServiceAccount
		s.AllowedServiceAccounts = append(s.AllowedServiceAccounts, p.AllowedServiceAccounts...)
		if p.AllowNamespaceCreation != nil {
			allowCreate = allowCreate || *p.AllowNamespaceCreation
			denyCreate = denyCreate || !*p.AllowNamespaceCreation
		}
		if g := p.GitRepo; g != nil {
			first(&s.GitRepoServiceAccount, g.DefaultServiceAccount)
			first(&s.GitRepoClientSecret, g.DefaultClientSecretName)
			s.RepoPatterns = append(s.RepoPatterns, g.AllowedRepoPatterns...)
			s.ClientSecrets = append(s.ClientSecrets, g.AllowedClientSecretNames...)
		}
		if h := p.HelmOp; h != nil {
			first(&s.HelmOpServiceAccount, h.DefaultServiceAccount)
			first(&s.HelmOpSecret, h.DefaultHelmSecretName)
			s.HelmRepoPatterns = append(s.HelmRepoPatterns, h.AllowedHelmRepoPatterns...)
			s.ChartPatterns = append(s.ChartPatterns, h.AllowedChartPatterns...)
			s.HelmSecrets = append(s.HelmSecrets, h.AllowedHelmSecretNames...)
		}
	}
	s.NoNamespaceCreation = denyCreate && !allowCreate
	return s
}

// GitRepo fills the spec's defaults and checks it.
func (s Set) GitRepo(spec *fleet.GitRepoSpec) error {
	if !s.Any {
		return nil
	}
	if spec.ServiceAccount == "" {
		spec.ServiceAccount = s.GitRepoServiceAccount
	}
	if spec.ClientSecretName == "" {
		spec.ClientSecretName = s.GitRepoClientSecret
	}
	if err := s.serviceAccount("serviceAccount", spec.ServiceAccount); err != nil {
		return err
	}
	if err := allowed("clientSecretName", spec.ClientSecretName, s.ClientSecrets, "gitRepo.allowedClientSecretNames"); err != nil {
		return err
	}
	return matches("repo", spec.Repo, s.RepoPatterns, "gitRepo.allowedRepoPatterns")
}

// HelmOp fills the spec's defaults and checks it.
func (s Set) HelmOp(spec *fleet.HelmOpSpec) error {
	if !s.Any {
		return nil
	}
	if spec.ServiceAccount == "" {
		spec.ServiceAccount = s.HelmOpServiceAccount
	}
	if spec.HelmSecretName == "" {
		spec.HelmSecretName = s.HelmOpSecret
	}
	if err := s.serviceAccount("serviceAccount", spec.ServiceAccount); err != nil {
		return err
	}
	if err := allowed("helmSecretName", spec.HelmSecretName, s.HelmSecrets, "helmOp.allowedHelmSecretNames"); err != nil {
		return err
	}
	if err := s.charts(&spec.BundleSpec); err != nil {
		return err
	}
	return s.Bundle(&spec.BundleSpec)
}

// charts holds the chart sources of a Bundle the agent downloads itself (a HelmOp's) to the
// HelmOp allow-lists: its helm options and each target's, which replace them per cluster.
func (s Set) charts(spec *fleet.BundleSpec) error {
	if err := s.chartSource("helm", spec.Helm, true); err != nil {
		return err
	}
	for i, t := range spec.Targets {
		if err := s.chartSource(fmt.Sprintf("targets[%d].helm", i), t.Helm, false); err != nil {
			return err
		}
	}
	return nil
}

// chartSource checks helm.repo and helm.chart against the HelmOp allow-lists; for a target
// (top false) an empty chart is the HelmOp's own, checked already.
func (s Set) chartSource(field string, h *fleet.HelmOptions, top bool) error {
	if h == nil {
		return nil
	}
	if h.Repo != "" {
		if err := matches(field+".repo", h.Repo, s.HelmRepoPatterns, "helmOp.allowedHelmRepoPatterns"); err != nil {
			return err
		}
	}
	if h.Chart == "" && !top {
		return nil
	}
	return matches(field+".chart", h.Chart, s.ChartPatterns, "helmOp.allowedChartPatterns")
}

// Bundle checks the ServiceAccount of the Bundle and of each target, and turns namespace
// creation off where the Policies refuse it. A Bundle with helmOpOptions (the agent downloads
// its chart, with helmOpSecretName's credentials) is held to the HelmOp allow-lists whoever
// wrote it, a HelmOp or a tenant directly.
func (s Set) Bundle(spec *fleet.BundleSpec) error {
	if !s.Any {
		return nil
	}
	if o := spec.HelmOpOptions; o != nil {
		if err := allowed("helmOpOptions.helmOpSecretName", o.SecretName, s.HelmSecrets, "helmOp.allowedHelmSecretNames"); err != nil {
			return err
		}
		if err := s.charts(spec); err != nil {
			return err
		}
	}
	if err := s.serviceAccount("serviceAccount", spec.ServiceAccount); err != nil {
		return err
	}
	for i := range spec.Targets {
		if sa := spec.Targets[i].ServiceAccount; sa != "" {
			if err := s.serviceAccount(fmt.Sprintf("targets[%d].serviceAccount", i), sa); err != nil {
				return err
			}
		}
	}
	if s.NoNamespaceCreation {
		off := false
		spec.CreateNamespace = &off
		for i := range spec.Targets {
			spec.Targets[i].CreateNamespace = nil
		}
	}
	return nil
}

func (s Set) serviceAccount(field, sa string) error {
	if s.RequireServiceAccount && sa == "" {
		return fmt.Errorf("%s is empty, but a Policy of the namespace has requireServiceAccount", field)
	}
	if sa == "" {
		return nil
	}
	return allowed(field, sa, s.AllowedServiceAccounts, "allowedServiceAccounts")
}

// allowed: an empty list allows anything; otherwise the value must be in it.
func allowed(field, value string, list []string, rule string) error {
	if len(list) == 0 || slices.Contains(list, value) {
		return nil
	}
	// "disallowed FIELD VALUE: " is Fleet's start of the message, which scripts match on.
	return fmt.Errorf("disallowed %s %s: not in %s %v of the namespace's Policies", field, value, rule, list)
}

// matches: no patterns allow anything; otherwise the value must match one (a pattern that is no
// regular expression is an error naming it).
func matches(field, value string, patterns []string, rule string) error {
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return fmt.Errorf("a Policy's %s %q: %w", rule, p, err)
		}
		if re.MatchString(value) {
			return nil
		}
	}
	if len(patterns) == 0 {
		return nil
	}
	return fmt.Errorf("disallowed %s %s: matches none of the namespace's Policies' %s %v", field, value, rule, patterns)
}
