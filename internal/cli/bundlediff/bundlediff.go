// Package bundlediff is `fleet bundlediff`: where what a Bundle deploys differs from what its
// clusters hold, as their agents report it (drift: resources changed, missing or extra), one
// line per resource and cluster. (CLI)
package bundlediff

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/cli/termtext"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Options of a diff.
type Options struct {
	// Namespace of the Bundles; Bundle, when set, names one.
	Namespace, Bundle string
	// JSON prints the differences as a JSON array.
	JSON bool
}

// Difference is one resource of one cluster that differs from its Bundle.
type Difference struct {
	Bundle   string `json:"bundle"`
	Cluster  string `json:"cluster"`
	Resource string `json:"resource"`
	// Change is "modified", "missing" (would be created) or "extra" (would be deleted).
	Change string `json:"change"`
	Patch  string `json:"patch,omitempty"`
}

// Run prints the differences and returns how many there are.
func Run(api fleetcontrollers.Interface, o Options, out io.Writer) (int, error) {
	sel := labels.Set{fleet.BundleNamespaceLabel: o.Namespace}
	if o.Bundle != "" {
		sel[fleet.BundleLabel] = o.Bundle
	}
	bds, err := api.BundleDeployment().List(metav1.NamespaceAll, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return 0, fmt.Errorf("listing bundledeployments: %w", err)
	}
	var diffs []Difference
	for _, bd := range bds.Items {
		cluster := bd.Labels[fleet.ClusterNamespaceLabel] + "/" + bd.Labels[fleet.ClusterLabel]
		for _, m := range bd.Status.ModifiedStatus {
			d := Difference{Bundle: bd.Labels[fleet.BundleLabel], Cluster: cluster, Change: "modified", Patch: m.Patch,
				Resource: strings.TrimPrefix(m.Kind+" "+strings.TrimPrefix(m.Namespace+"/"+m.Name, "/"), " ")}
			switch {
			case m.Create:
				d.Change = "missing"
			case m.Delete:
				d.Change = "extra"
			}
			diffs = append(diffs, d)
		}
	}
	sort.Slice(diffs, func(i, j int) bool {
		a, b := diffs[i], diffs[j]
		return a.Bundle+a.Cluster+a.Resource < b.Bundle+b.Cluster+b.Resource
	})
	if o.JSON {
		if diffs == nil {
			diffs = []Difference{}
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return len(diffs), enc.Encode(diffs)
	}
	// Patches and names are what downstream objects and tenants wrote.
	out = termtext.Writer(out)
	for _, d := range diffs {
		fmt.Fprintf(out, "%s  %s  %s  %s", d.Bundle, d.Cluster, d.Resource, termtext.Printable(d.Change))
		if d.Patch != "" {
			fmt.Fprintf(out, "  %s", termtext.Printable(d.Patch))
		}
		fmt.Fprintln(out)
	}
	if len(diffs) == 0 {
		fmt.Fprintln(out, "no differences: every cluster holds what its Bundles deploy")
	}
	return len(diffs), nil
}
