package content

import (
	"slices"
	"testing"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A Rollout's Contents are counted again only when what it keeps changes, not on every write of
// its stage counts.
func TestOnlyAChangeOfKeptContentsCountsAgain(t *testing.T) {
	roll := func(current, passed string, updated int) *fleet.Rollout {
		r := &fleet.Rollout{Status: fleet.RolloutStatus{Current: &fleet.RolloutRevision{Content: current},
			Stages: []fleet.RolloutStageStatus{{Name: "canary", Updated: updated}}}}
		if passed != "" {
			r.Status.Passed = &fleet.RolloutRevision{Content: passed}
		}
		return r
	}
	kept := keptByOf(rolloutContents)
	keptChanged := func(old, cur *fleet.Rollout) bool { return !slices.Equal(kept(old), kept(cur)) }
	if keptChanged(roll("s-2", "s-1", 0), roll("s-2", "s-1", 1)) {
		t.Error("a stage count's change counts Contents again")
	}
	for name, tc := range map[string][2]*fleet.Rollout{
		"a new revision":        {roll("s-2", "s-1", 1), roll("s-3", "s-2", 0)},
		"passed kept from now":  {roll("s-2", "", 1), roll("s-2", "s-1", 1)},
		"passed no longer kept": {roll("s-2", "s-1", 1), roll("s-2", "", 1)},
	} {
		if !keptChanged(tc[0], tc[1]) {
			t.Errorf("%s: not counted again", name)
		}
	}
}
