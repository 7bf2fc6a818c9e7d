package metrics

import (
	"slices"
	"testing"
)

func TestFamiliesNamesEveryFamily(t *testing.T) {
	got := Families()
	for _, want := range []string{"fleet_bundle_ready", "fleet_bundle_state", "fleet_bundledeployment_state",
		"fleet_cluster_resources_count_desiredready", "fleet_cluster_group_resource_count_desired_ready", "fleet_cluster_group_resource_count_notready",
		"fleet_cluster_group_resource_count_waitapplied", "fleet_cluster_group_state", "fleet_cluster_resources_count_waitapplied",
		"fleet_gitrepo_resources_not_ready", "fleet_gitrepo_resources_wait_applied", "fleet_gitrepo_ready_clusters", "fleet_gitjobs_created_success_total",
		"fleet_gitjob_duration_seconds", "fleet_gitrepo_fetch_latest_commit_duration_seconds", "fleet_agent_drift_detected_total",
		"fleet_agent_checkin_age_seconds"} {
		if !slices.Contains(got, want) {
			t.Errorf("Families() lacks %s", want)
		}
	}
}
