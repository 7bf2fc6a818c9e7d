package bundlebuild

import (
	"github.com/fleetgo/fleet/internal/bundlereader"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// GitRepoTargets are a GitRepo's targets; without any, Fleet's default: the ClusterGroup
// "default".
func GitRepoTargets(gr *fleet.GitRepo) []fleet.GitTarget {
	if len(gr.Spec.Targets) == 0 {
		return []fleet.GitTarget{{Name: "default", ClusterGroup: fleet.DefaultClusterGroup}}
	}
	return gr.Spec.Targets
}

// FromGitRepo are the options a GitRepo's run reads its checkout with at commit (the namespace's
// GitRepoRestrictions aside): the GitRepo controller's, and fleet plan's for a GitRepo.
func FromGitRepo(gr *fleet.GitRepo, commit string) Options {
	o := Options{Paths: gr.Spec.Paths}
	o.Name, o.Namespace, o.Commit = gr.Name, gr.Namespace, commit
	o.Targets, o.TargetRestrictions = bundlereader.FromGitTargets(GitRepoTargets(gr))
	o.ServiceAccount, o.TargetNamespace = gr.Spec.ServiceAccount, gr.Spec.TargetNamespace
	o.Paused, o.KeepResources, o.DeleteNamespace = gr.Spec.Paused, gr.Spec.KeepResources, gr.Spec.DeleteNamespace
	o.CorrectDrift = gr.Spec.CorrectDrift
	o.HelmRepoURLRegex = gr.Spec.HelmRepoURLRegex
	o.SyncGeneration = gr.Spec.ForceSyncGeneration
	if i := gr.Spec.ImageScanInterval; i != nil {
		o.ImageScanInterval = i.Duration
	}
	o.Labels = map[string]string{}
	for k, v := range gr.Labels {
		o.Labels[k] = v
	}
	if len(o.Paths) == 0 {
		o.Paths = []string{"/"}
	}
	// spec.bundles names each bundle folder (and its options file): those, and nothing found by
	// scanning, are the GitRepo's Bundles.
	if len(gr.Spec.Bundles) > 0 {
		o.Scan.Driven, o.Paths = true, nil
		for _, b := range gr.Spec.Bundles {
			p := b.Base
			if b.Options != "" {
				p += ":" + b.Options
			}
			o.Paths = append(o.Paths, p)
		}
	}
	return o
}
