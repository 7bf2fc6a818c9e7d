package rollout

import (
	"fmt"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Unstaged names the stage of the clusters no stage of the policy selects: they come last.
const Unstaged = "unstaged"

// stage is a policy stage with the targets (indexes) it holds.
type stage struct {
	spec    fleet.RolloutStage
	members []int
	// message notes a stage that selects no cluster.
	message string
}

// assign puts every target into the first stage that takes it: a stage with selectors takes the
// targets they match (two selecting stages matching one cluster is an error: stages must not
// overlap), a percentage that share of the candidates left, a stage with neither all that is
// left. Targets no stage takes make a last stage, Unstaged.
func assign(p *fleet.RolloutPolicySpec, targets []target.ClusterInfo) ([]*stage, error) {
	taken := make([]int, len(targets)) // stage index + 1 that took the target; 0: none yet
	selectedBy := make([]int, len(targets))
	var out []*stage
	for k := range p.Stages {
		s := &stage{spec: p.Stages[k]}
		match, selects, err := target.StageMatcher(&s.spec)
		if err != nil {
			return nil, fmt.Errorf("stages[%d].%w", k, err)
		}
		var candidates []int
		for i, ci := range targets {
			if selects && match(ci) {
				if j := selectedBy[i]; j > 0 {
					return nil, fmt.Errorf("stages[%d] (%s) selects cluster %s, which stages[%d] (%s) selects too: stages must not overlap",
						k, s.spec.Name, ci.Cluster.Name, j-1, p.Stages[j-1].Name)
				}
				selectedBy[i] = k + 1
			}
			if taken[i] == 0 && (!selects || match(ci)) {
				candidates = append(candidates, i)
			}
		}
		if s.spec.Percent != nil {
			n := (len(candidates)*int(*s.spec.Percent) + 99) / 100
			candidates = candidates[:n]
		}
		for _, i := range candidates {
			taken[i] = k + 1
		}
		s.members = candidates
		if len(candidates) == 0 {
			s.message = "selects no clusters"
		}
		out = append(out, s)
	}
	rest := &stage{spec: fleet.RolloutStage{Name: Unstaged}}
	for i := range targets {
		if taken[i] == 0 {
			rest.members = append(rest.members, i)
		}
	}
	if len(rest.members) > 0 {
		out = append(out, rest)
	}
	return out, nil
}
