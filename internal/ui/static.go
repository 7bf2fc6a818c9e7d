package ui

import (
	"html/template"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/lru"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// NewStatic is a Server over fixed objects, with no apiserver behind it: pages render from
// them, actions fail. For reading objects kept elsewhere (a support dump) and for measuring
// page times at sizes no test cluster holds (benchmarks/ui).
func NewStatic(objs []runtime.Object) (*Server, error) {
	tmpl, err := template.New("ui").Funcs(templateFuncs).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	s := &Server{tmpl: tmpl, subs: map[chan struct{}]struct{}{}, streams: []*slots{newSlots(maxStreams)}, diffs: lru.New(keptDiffs)}
	s.k = &kinds{
		gitRepos:    static("GitRepos", &fleet.GitRepo{}, objs, &fleet.GitRepoList{}),
		helmOps:     static("HelmOps", &fleet.HelmOp{}, objs, &fleet.HelmOpList{}),
		bundles:     static("Bundles", &fleet.Bundle{}, objs, &fleet.BundleList{}),
		deployments: static("BundleDeployments", &fleet.BundleDeployment{}, objs, &fleet.BundleDeploymentList{}),
		clusters:    static("Clusters", &fleet.Cluster{}, objs, &fleet.ClusterList{}),
		groups:      static("ClusterGroups", &fleet.ClusterGroup{}, objs, &fleet.ClusterGroupList{}),
		rollouts:    static("Rollouts", &fleet.Rollout{}, objs, &fleet.RolloutList{}),
		alerts:      static("Alerts", &fleet.Alert{}, objs, &fleet.AlertList{}),
	}
	return s, nil
}
