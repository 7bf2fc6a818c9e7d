package ui

import (
	"html/template"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// NewStatic is a Server over fixed objects, with no apiserver behind it: pages render from
// them, actions fail. For reading objects kept elsewhere (a support dump) and for measuring
// page times at sizes no test cluster holds (benchmarks/ui).
func NewStatic(objs []runtime.Object) (*Server, error) {
	tmpl, err := template.New("ui").Funcs(template.FuncMap{"lower": strings.ToLower}).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	by := map[string][]runtime.Object{}
	for _, o := range objs {
		switch o.(type) {
		case *fleet.GitRepo:
			by["g"] = append(by["g"], o)
		case *fleet.HelmOp:
			by["h"] = append(by["h"], o)
		case *fleet.Bundle:
			by["b"] = append(by["b"], o)
		case *fleet.BundleDeployment:
			by["d"] = append(by["d"], o)
		case *fleet.Cluster:
			by["c"] = append(by["c"], o)
		case *fleet.ClusterGroup:
			by["cg"] = append(by["cg"], o)
		case *fleet.Rollout:
			by["r"] = append(by["r"], o)
		}
	}
	s := &Server{tmpl: tmpl, subs: map[chan struct{}]struct{}{}}
	s.k = &kinds{
		gitRepos:    static("GitRepos", &fleet.GitRepo{}, by["g"], &fleet.GitRepoList{}),
		helmOps:     static("HelmOps", &fleet.HelmOp{}, by["h"], &fleet.HelmOpList{}),
		bundles:     static("Bundles", &fleet.Bundle{}, by["b"], &fleet.BundleList{}),
		deployments: static("BundleDeployments", &fleet.BundleDeployment{}, by["d"], &fleet.BundleDeploymentList{}),
		clusters:    static("Clusters", &fleet.Cluster{}, by["c"], &fleet.ClusterList{}),
		groups:      static("ClusterGroups", &fleet.ClusterGroup{}, by["cg"], &fleet.ClusterGroupList{}),
		rollouts:    static("Rollouts", &fleet.Rollout{}, by["r"], &fleet.RolloutList{}),
	}
	return s, nil
}
