package bundlebuild

import (
	"bytes"
	"fmt"
	"path"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// maxOverwrites bounds the resources one Bundle lists as taken over: a Bundle's size is bounded.
const maxOverwrites = 500

// markOverwrites records, on each Bundle of read, the resources it takes over from the GitRepo's
// Bundles this run deletes (spec.overwrites), as Fleet's apply does: what those Bundles deployed
// (their status.resourceKey) and the read Bundle deploys too. Deleting a Bundle uninstalls its
// release, which deletes its resources even once another release holds them; an agent
// deploys a release again when a resource it lists as taken over is gone, so whichever happens
// first, the resource is there in the end. A chart's or kustomization's resources are known
// only once rendered: such a Bundle lists every resource of the deleted Bundles (the agent looks only at
// those its release holds).
func markOverwrites(client fleetcontrollers.BundleClient, namespace, repo string, read []*fleet.Bundle) error {
	list, err := client.List(namespace, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{fleet.RepoLabel: repo}).String()})
	if err != nil {
		return fmt.Errorf("listing bundles of %s: %w", repo, err)
	}
	kept := map[string]bool{}
	for _, b := range read {
		kept[b.Name] = true
	}
	var gone []fleet.ResourceKey
	for _, b := range list.Items {
		if !kept[b.Name] {
			gone = append(gone, b.Status.ResourceKey...)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	for _, b := range read {
		b.Spec.OverwrittenResources = overwrites(b, gone)
	}
	return nil
}

// overwrites are the keys of gone that b deploys too (by kind and name, and namespace where
// both say one), every one of them for a Bundle with a chart, with what b already lists.
func overwrites(b *fleet.Bundle, gone []fleet.ResourceKey) []fleet.OverwrittenResource {
	out := slices.Clone(b.Spec.OverwrittenResources)
	own := declared(b)
	chart := rendered(b)
	for _, k := range gone {
		if len(out) >= maxOverwrites {
			break
		}
		o := fleet.OverwrittenResource{Kind: k.Kind, Name: k.Name, Namespace: k.Namespace}
		if slices.Contains(out, o) {
			continue
		}
		if chart || slices.ContainsFunc(own, func(d fleet.OverwrittenResource) bool {
			return d.Kind == o.Kind && d.Name == o.Name && (d.Namespace == "" || o.Namespace == "" || d.Namespace == o.Namespace)
		}) {
			out = append(out, o)
		}
	}
	return out
}

// rendered says whether b's resources become objects only once rendered: a chart (helm.chart,
// or a Chart.yaml of its own) or a kustomization.
func rendered(b *fleet.Bundle) bool {
	if b.Spec.Helm != nil && b.Spec.Helm.Chart != "" {
		return true
	}
	return slices.ContainsFunc(b.Spec.Resources, func(r fleet.BundleResource) bool {
		switch path.Base(r.Name) {
		case "Chart.yaml", "kustomization.yaml", "kustomization.yml", "Kustomization":
			return true
		}
		return false
	})
}

// declared are the objects b's resources hold as plain manifests (kind, name and namespace as
// written); what does not parse (a chart's templates) is skipped.
func declared(b *fleet.Bundle) []fleet.OverwrittenResource {
	var out []fleet.OverwrittenResource
	for _, r := range b.Spec.Resources {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(r.Content), 4096)
		for {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := dec.Decode(&obj); err != nil {
				break
			}
			if obj.Kind != "" && obj.Metadata.Name != "" {
				out = append(out, fleet.OverwrittenResource{Kind: obj.Kind, Name: obj.Metadata.Name, Namespace: obj.Metadata.Namespace})
			}
		}
	}
	return out
}
