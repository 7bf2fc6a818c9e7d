// Package restriction applies the GitRepoRestrictions of a namespace to what is deployed from
// it: GitRepos (service account, client secret, repository, target namespace) and every Bundle,
// whether a GitRepo, a HelmOp or a person wrote it, so that a tenant bound by a restriction
// cannot step around it by writing a Bundle directly. Several restrictions of one namespace are
// taken together: their allow-lists joined, the first default (by name) used. Errors name the
// rule broken. The manager's controllers use it.
package restriction

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Set is the GitRepoRestrictions of one namespace, taken together.
type Set struct {
	// Any: the namespace has a restriction (without one nothing is checked).
	Any bool
	// Names are the restrictions', for messages.
	Names                                      []string
	DefaultServiceAccount, DefaultClientSecret string
	ServiceAccounts, ClientSecrets             []string
	RepoPatterns, TargetNamespaces             []string
	// Selector is the first allowedTargetNamespaceSelector (by name).
	Selector *metav1.LabelSelector
}

// Combine takes the namespace's restrictions together.
func Combine(rs []*fleet.GitRepoRestriction) Set {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b *fleet.GitRepoRestriction) int { return strings.Compare(a.Name, b.Name) })
	s := Set{Any: len(rs) > 0}
	for _, r := range rs {
		s.Names = append(s.Names, r.Name)
		s.ServiceAccounts = append(s.ServiceAccounts, r.AllowedServiceAccounts...)
		s.ClientSecrets = append(s.ClientSecrets, r.AllowedClientSecretNames...)
		s.RepoPatterns = append(s.RepoPatterns, r.AllowedRepoPatterns...)
		s.TargetNamespaces = append(s.TargetNamespaces, r.AllowedTargetNamespaces...)
		if s.DefaultServiceAccount == "" {
			s.DefaultServiceAccount = r.DefaultServiceAccount
		}
		if s.DefaultClientSecret == "" {
			s.DefaultClientSecret = r.DefaultClientSecretName
		}
		if s.Selector == nil && r.AllowedTargetNamespaceSelector != nil {
			s.Selector = r.AllowedTargetNamespaceSelector
		}
	}
	return s
}

// GitRepo fills an empty serviceAccount and clientSecretName with the defaults, and checks the
// service account, client secret, repository and target namespace.
func (s Set) GitRepo(spec *fleet.GitRepoSpec) error {
	if !s.Any {
		return nil
	}
	if spec.ServiceAccount == "" {
		spec.ServiceAccount = s.DefaultServiceAccount
	}
	if spec.ClientSecretName == "" {
		spec.ClientSecretName = s.DefaultClientSecret
	}
	if err := s.allowed("serviceAccount", spec.ServiceAccount, s.ServiceAccounts, "allowedServiceAccounts"); err != nil {
		return err
	}
	if err := s.allowed("clientSecretName", spec.ClientSecretName, s.ClientSecrets, "allowedClientSecretNames"); err != nil {
		return err
	}
	if len(s.RepoPatterns) > 0 {
		ok := false
		for _, p := range s.RepoPatterns {
			re, err := regexp.Compile(p)
			if err != nil {
				return fmt.Errorf("GitRepoRestriction allowedRepoPatterns %q: %w", p, err)
			}
			if re.MatchString(spec.Repo) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("disallowed repo %s: matches none of the allowedRepoPatterns %v of the namespace's GitRepoRestrictions", spec.Repo, s.RepoPatterns)
		}
	}
	return s.targetNamespace("targetNamespace", spec.TargetNamespace, true)
}

// Bundle fills an empty serviceAccount with the default and checks the Bundle's service
// account and target namespace and each target's, and gives it the allowed namespace selector
// (which the agent checks downstream), overriding what the Bundle or its targets say.
func (s Set) Bundle(spec *fleet.BundleSpec) error {
	if !s.Any {
		return nil
	}
	if spec.ServiceAccount == "" {
		spec.ServiceAccount = s.DefaultServiceAccount
	}
	if err := s.allowed("serviceAccount", spec.ServiceAccount, s.ServiceAccounts, "allowedServiceAccounts"); err != nil {
		return err
	}
	if err := s.targetNamespace("namespace", spec.TargetNamespace, true); err != nil {
		return err
	}
	for i, t := range spec.Targets {
		if t.ServiceAccount != "" {
			if err := s.allowed(fmt.Sprintf("targets[%d].serviceAccount", i), t.ServiceAccount, s.ServiceAccounts, "allowedServiceAccounts"); err != nil {
				return err
			}
		}
		if err := s.targetNamespace(fmt.Sprintf("targets[%d].namespace", i), t.TargetNamespace, false); err != nil {
			return err
		}
	}
	if s.Selector != nil {
		spec.AllowedTargetNamespaceSelector = s.Selector.DeepCopy()
		for i := range spec.Targets {
			spec.Targets[i].AllowedTargetNamespaceSelector = nil
		}
	}
	return nil
}

// allowed: an empty list allows anything; otherwise the value must be in it.
func (s Set) allowed(field, value string, list []string, rule string) error {
	if len(list) == 0 || slices.Contains(list, value) {
		return nil
	}
	// "disallowed FIELD VALUE: " is Fleet's start of the message, which scripts match on.
	return fmt.Errorf("disallowed %s %s: not in %s %v of the namespace's GitRepoRestrictions", field, value, rule, list)
}

// targetNamespace checks a target namespace against allowedTargetNamespaces; required says an
// empty one is refused (an empty target's namespace is the Bundle's own, checked already).
func (s Set) targetNamespace(field, ns string, required bool) error {
	if len(s.TargetNamespaces) == 0 || ns == "" && !required {
		return nil
	}
	if ns == "" {
		return fmt.Errorf("%s is empty, but the namespace's GitRepoRestrictions allow only %v", field, s.TargetNamespaces)
	}
	return s.allowed(field, ns, s.TargetNamespaces, "allowedTargetNamespaces")
}
