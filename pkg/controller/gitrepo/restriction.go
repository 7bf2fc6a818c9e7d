package gitrepo

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// restrict applies the GitRepoRestrictions of the GitRepo's namespace to a copy of its spec:
// defaults fill an empty serviceAccount and clientSecretName, and the allow-lists must admit
// the service account, client secret, repository and target namespace. Several restrictions
// in one namespace are taken together: their allow-lists joined, the first default (by name)
// used. The error names the rule broken.
func restrict(spec fleet.GitRepoSpec, rs []*fleet.GitRepoRestriction) (fleet.GitRepoSpec, error) {
	if len(rs) == 0 {
		return spec, nil
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
	var sas, secrets, patterns, namespaces []string
	defSA, defSecret := "", ""
	for _, r := range rs {
		sas = append(sas, r.AllowedServiceAccounts...)
		secrets = append(secrets, r.AllowedClientSecretNames...)
		patterns = append(patterns, r.AllowedRepoPatterns...)
		namespaces = append(namespaces, r.AllowedTargetNamespaces...)
		if defSA == "" {
			defSA = r.DefaultServiceAccount
		}
		if defSecret == "" {
			defSecret = r.DefaultClientSecretName
		}
	}
	if spec.ServiceAccount == "" {
		spec.ServiceAccount = defSA
	}
	if spec.ClientSecretName == "" {
		spec.ClientSecretName = defSecret
	}
	if len(sas) > 0 && !slices.Contains(sas, spec.ServiceAccount) {
		return spec, fmt.Errorf("serviceAccount %q is not allowed by the GitRepoRestrictions of namespace (allowedServiceAccounts %v)", spec.ServiceAccount, sas)
	}
	if len(secrets) > 0 && !slices.Contains(secrets, spec.ClientSecretName) {
		return spec, fmt.Errorf("clientSecretName %q is not allowed by the GitRepoRestrictions of namespace (allowedClientSecretNames %v)", spec.ClientSecretName, secrets)
	}
	if len(patterns) > 0 {
		ok := false
		for _, p := range patterns {
			re, err := regexp.Compile(p)
			if err != nil {
				return spec, fmt.Errorf("GitRepoRestriction allowedRepoPatterns %q: %w", p, err)
			}
			if re.MatchString(spec.Repo) {
				ok = true
				break
			}
		}
		if !ok {
			return spec, fmt.Errorf("repo %q matches none of the allowedRepoPatterns %v of the namespace's GitRepoRestrictions", spec.Repo, patterns)
		}
	}
	if len(namespaces) > 0 {
		if spec.TargetNamespace == "" {
			return spec, fmt.Errorf("targetNamespace is empty, but the namespace's GitRepoRestrictions allow only %v", namespaces)
		}
		if !slices.Contains(namespaces, spec.TargetNamespace) {
			return spec, fmt.Errorf("targetNamespace %q is not allowed by the GitRepoRestrictions of namespace (allowedTargetNamespaces %v)", spec.TargetNamespace, namespaces)
		}
	}
	return spec, nil
}

// namespaceSelector is the allowedTargetNamespaceSelector of the namespace's GitRepoRestrictions
// (the first by name that sets one): every Bundle of the GitRepo carries it, and agents deploy
// only into downstream namespaces whose labels match it.
func namespaceSelector(rs []*fleet.GitRepoRestriction) *metav1.LabelSelector {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b *fleet.GitRepoRestriction) int { return strings.Compare(a.Name, b.Name) })
	for _, r := range rs {
		if r.AllowedTargetNamespaceSelector != nil {
			return r.AllowedTargetNamespaceSelector
		}
	}
	return nil
}
