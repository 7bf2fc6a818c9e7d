// Package index holds the named cache indexers the manager's controllers share, so that hot
// paths look objects up by key instead of listing and filtering.
package index

import (
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Indexer names on the BundleDeployment cache.
const (
	// ByBundle indexes BundleDeployments by "bundleNamespace/bundleName".
	ByBundle = "fleet.cattle.io/by-bundle"
	// ByContent indexes BundleDeployments by the name of the Content they deploy.
	ByContent = "fleet.cattle.io/by-content"
	// ByRepo indexes BundleDeployments by "bundleNamespace/gitRepoName".
	ByRepo = "fleet.cattle.io/by-repo"
)

// RepoKey is the ByRepo value of a BundleDeployment, or "" when it comes from no GitRepo.
func RepoKey(bd *fleet.BundleDeployment) string {
	ns, repo := bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.RepoLabel]
	if ns == "" || repo == "" {
		return ""
	}
	return ns + "/" + repo
}

// BundleKey is the ByBundle value of a BundleDeployment, or "" when it is not labelled.
func BundleKey(bd *fleet.BundleDeployment) string {
	ns, name := bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.BundleLabel]
	if ns == "" || name == "" {
		return ""
	}
	return ns + "/" + name
}

// Register adds the indexers; call it before the caches start.
func Register(bds fleetcontrollers.BundleDeploymentController) {
	bds.Cache().AddIndexer(ByBundle, func(bd *fleet.BundleDeployment) ([]string, error) {
		if k := BundleKey(bd); k != "" {
			return []string{k}, nil
		}
		return nil, nil
	})
	bds.Cache().AddIndexer(ByRepo, func(bd *fleet.BundleDeployment) ([]string, error) {
		if k := RepoKey(bd); k != "" {
			return []string{k}, nil
		}
		return nil, nil
	})
	bds.Cache().AddIndexer(ByContent, func(bd *fleet.BundleDeployment) ([]string, error) {
		var out []string
		if c := bd.Labels[fleet.ContentNameLabel]; c != "" {
			out = append(out, c)
		}
		// A rollback may need the Content of what the cluster had before.
		if c := bd.Labels[fleet.RolloutPreviousContentLabel]; c != "" && c != bd.Labels[fleet.ContentNameLabel] {
			out = append(out, c)
		}
		return out, nil
	})
}
