package deployer

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// waitingFor returns what a BundleDeployment still waits for among its dependsOn, or "" when
// every dependency on this cluster is in one of its accepted states (Ready by default).
func (h *handler) waitingFor(bd *fleet.BundleDeployment) string {
	var waiting []string
	cache := h.bds.Cache()
	for _, dep := range bd.Spec.DependsOn {
		accepted := dep.AcceptedStates
		if len(accepted) == 0 {
			accepted = []fleet.BundleState{fleet.Ready}
		}
		var deps []*fleet.BundleDeployment
		what := dep.Name
		switch {
		case dep.Name != "":
			if d, err := cache.Get(bd.Namespace, dep.Name); err == nil {
				deps = append(deps, d)
			}
		case dep.Selector != nil:
			sel, err := metav1.LabelSelectorAsSelector(dep.Selector)
			if err != nil {
				waiting = append(waiting, fmt.Sprintf("dependsOn selector: %v", err))
				continue
			}
			what = "selector " + sel.String()
			all, _ := cache.List(bd.Namespace, labels.Everything())
			for _, d := range all {
				if d.Name != bd.Name && sel.Matches(labels.Set(d.Labels)) {
					deps = append(deps, d)
				}
			}
		default:
			continue
		}
		if len(deps) == 0 {
			waiting = append(waiting, fmt.Sprintf("bundle %s not deployed to this cluster yet", what))
			continue
		}
		for _, d := range deps {
			if st := summary.State(d); !slices.Contains(accepted, st) {
				waiting = append(waiting, fmt.Sprintf("bundle %s is %s", d.Name, st))
			}
		}
	}
	if len(waiting) == 0 {
		return ""
	}
	return "waiting for dependencies: " + strings.Join(waiting, "; ")
}
