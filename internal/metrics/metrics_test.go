package metrics

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
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

func TestScrapeServesOnlyTheFamiliesNamed(t *testing.T) {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet-default"}}
	var all, one bytes.Buffer
	w := bufio.NewWriter(&all)
	bundles.write(w, []*fleet.Bundle{b}, nil)
	_ = w.Flush()
	w = bufio.NewWriter(&one)
	bundles.write(w, []*fleet.Bundle{b}, wantedOf([]string{"fleet_bundle_state"}))
	_ = w.Flush()
	if !strings.Contains(all.String(), "fleet_bundle_ready{") || !strings.Contains(all.String(), "fleet_bundle_state{") {
		t.Fatalf("an unfiltered scrape lacks a family:\n%s", all.String())
	}
	if strings.Contains(one.String(), "fleet_bundle_ready") || !strings.Contains(one.String(), "fleet_bundle_state{") {
		t.Errorf("name[]=fleet_bundle_state served:\n%s", one.String())
	}

	StandbyFilled(true)
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics?name[]=" + standbyFilledName)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), standbyFilledName+" 1") || strings.Contains(string(body), "go_goroutines") {
		t.Errorf("name[]=%s served:\n%s", standbyFilledName, body)
	}
}
