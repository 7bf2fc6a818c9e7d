package target

import (
	"fmt"
	"io"

	"github.com/fleetgo/fleet/internal/render"
)

// Test renders, for every planned BundleDeployment, the manifests the agent would deploy, and
// writes them under a header naming the bundle and the cluster.
func Test(w io.Writer, in Input, results []Result) error {
	bundles := map[string]int{}
	for i, b := range in.Bundles {
		bundles[b.Namespace+"/"+b.Name] = i
	}
	for _, r := range results {
		b := in.Bundles[bundles[r.Bundle]]
		if len(r.Deployments) == 0 {
			fmt.Fprintf(w, "# bundle %s targets no cluster\n", r.Bundle)
			continue
		}
		for _, bd := range r.Deployments {
			out, err := render.Manifests(b.Spec.Resources, &bd.Spec.Options, b.Name)
			if err != nil {
				return fmt.Errorf("bundle %s on cluster %s: %w", r.Bundle, bd.Labels["fleet.cattle.io/cluster"], err)
			}
			fmt.Fprintf(w, "# bundle %s on cluster %s/%s (release %s in namespace %s)\n%s\n", r.Bundle,
				bd.Labels["fleet.cattle.io/cluster-namespace"], bd.Labels["fleet.cattle.io/cluster"],
				render.ReleaseName(&bd.Spec.Options, b.Name), render.Namespace(&bd.Spec.Options), out)
		}
	}
	return nil
}
