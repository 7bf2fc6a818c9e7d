// Package target is `fleet target`: it shows which clusters Bundles match and the
// BundleDeployments (and Contents) the manager would create for them, against Clusters and
// ClusterGroups read from the manager or from a file.
package target

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/target"
	"github.com/fleetgo/fleet/internal/yamldoc"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Input is everything targeting needs.
type Input struct {
	Bundles  []*fleet.Bundle
	Clusters []*fleet.Cluster
	Groups   []*fleet.ClusterGroup
	// Mappings open other namespaces' Clusters to Bundles, as on the manager; Namespaces are
	// those namespaces' labels, by name.
	Mappings   []*fleet.BundleNamespaceMapping
	Namespaces map[string]map[string]string
}

// reach is the set of namespaces whose Clusters Bundle b may target (target.Reach, the
// manager's rule), from the namespaces' labels the input holds.
func (in Input) reach(b *fleet.Bundle) (map[string]bool, error) {
	nss, err := target.Reach(b, in.Mappings, func(sel labels.Selector) ([]string, error) {
		var names []string
		for name, l := range in.Namespaces {
			if sel.Matches(labels.Set(l)) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		return names, nil
	})
	set := map[string]bool{}
	for _, ns := range nss {
		set[ns] = true
	}
	return set, err
}

// ReadObjects reads a multi-document YAML file of Bundles, Clusters and ClusterGroups (other
// kinds are skipped), such as the output of `fleet apply -o` and `kubectl get -o yaml`; List
// documents are unpacked.
func ReadObjects(path string, in *Input) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var raw map[string]any
		if err := dec.Decode(&raw); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if err := addObject(raw, in); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
	}
}

func addObject(raw map[string]any, in *Input) error {
	if raw == nil {
		return nil
	}
	if items, ok := raw["items"].([]any); ok {
		for _, it := range items {
			m, _ := it.(map[string]any)
			if err := addObject(m, in); err != nil {
				return err
			}
		}
		return nil
	}
	data, err := sigsyaml.Marshal(raw)
	if err != nil {
		return err
	}
	switch raw["kind"] {
	case "Bundle":
		b := &fleet.Bundle{}
		err = sigsyaml.UnmarshalStrict(data, b)
		in.Bundles = append(in.Bundles, b)
	case "Cluster":
		c := &fleet.Cluster{}
		err = sigsyaml.UnmarshalStrict(data, c)
		in.Clusters = append(in.Clusters, c)
	case "ClusterGroup":
		g := &fleet.ClusterGroup{}
		err = sigsyaml.UnmarshalStrict(data, g)
		in.Groups = append(in.Groups, g)
	case "BundleNamespaceMapping":
		m := &fleet.BundleNamespaceMapping{}
		err = sigsyaml.UnmarshalStrict(data, m)
		in.Mappings = append(in.Mappings, m)
	case "Namespace":
		ns := &corev1.Namespace{}
		err = sigsyaml.Unmarshal(data, ns)
		if in.Namespaces == nil {
			in.Namespaces = map[string]map[string]string{}
		}
		in.Namespaces[ns.Name] = ns.Labels
	}
	return err
}

// Result is the plan for one Bundle.
type Result struct {
	Bundle      string                    `json:"bundle"`
	Content     string                    `json:"content"`
	Deployments []*fleet.BundleDeployment `json:"deployments"`
}

// Plan computes, for every Bundle, the BundleDeployments targeting would produce. Clusters are
// those of the Bundle's namespace and of those its namespace's BundleNamespaceMappings open.
func Plan(in Input) ([]Result, error) {
	var out []Result
	for _, b := range in.Bundles {
		manifest, err := target.Manifest(b.Spec.Resources)
		if err != nil {
			return nil, err
		}
		content := target.ContentName(manifest)
		r := Result{Bundle: b.Namespace + "/" + b.Name, Content: content}
		reach, err := in.reach(b)
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", r.Bundle, err)
		}
		for _, c := range in.Clusters {
			if !reach[c.Namespace] {
				continue
			}
			groups, err := target.Groups(c, in.Groups)
			if err != nil {
				return nil, err
			}
			ci := target.ClusterInfo{Cluster: c, Groups: groups}
			m, err := target.MatchCluster(b, ci)
			if err != nil {
				return nil, fmt.Errorf("bundle %s: %w", r.Bundle, err)
			}
			if m == nil {
				continue
			}
			bd, err := target.Deployment(b, ci, m, content)
			if err != nil {
				return nil, fmt.Errorf("bundle %s, cluster %s: %w", r.Bundle, c.Name, err)
			}
			r.Deployments = append(r.Deployments, bd)
		}
		sort.Slice(r.Deployments, func(i, j int) bool { return r.Deployments[i].Namespace < r.Deployments[j].Namespace })
		out = append(out, r)
	}
	return out, nil
}

// Print writes a summary line per bundle and, with full, the BundleDeployments as YAML.
func Print(w io.Writer, results []Result, full bool) error {
	for _, r := range results {
		var clusters []string
		for _, bd := range r.Deployments {
			clusters = append(clusters, bd.Labels[fleet.ClusterNamespaceLabel]+"/"+bd.Labels[fleet.ClusterLabel])
		}
		fmt.Fprintf(w, "# bundle %s (content %s) targets %d cluster(s): %v\n", r.Bundle, r.Content, len(clusters), clusters)
		if !full {
			continue
		}
		for _, bd := range r.Deployments {
			if err := yamldoc.WriteYAML(w, bd); err != nil {
				return err
			}
		}
	}
	return nil
}
