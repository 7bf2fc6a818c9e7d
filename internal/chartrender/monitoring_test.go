package chartrender

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/charts"
	"github.com/fleetgo/fleet/internal/metrics"
)

func renderObjects(t *testing.T, values map[string]any) map[string]string {
	t.Helper()
	out, err := Render(charts.Fleet, "fleet", "cattle-fleet-system", values)
	if err != nil {
		t.Fatal(err)
	}
	return objectsOf(t, out)
}

func TestMonitoringIsOffByDefault(t *testing.T) {
	objs := renderObjects(t, nil)
	if _, ok := objs["ServiceMonitor/fleet-controller"]; ok {
		t.Error("a ServiceMonitor by default")
	}
	if _, ok := objs["ConfigMap/fleet-dashboard"]; ok {
		t.Error("a dashboard ConfigMap by default")
	}
}

// The ServiceMonitor scrapes the metrics Service; every series the dashboard queries is one the
// manager exports.
func TestServiceMonitorAndDashboard(t *testing.T) {
	objs := renderObjects(t, map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"dashboard":      map[string]any{"enabled": true}}})
	sm := objs["ServiceMonitor/fleet-controller"]
	for _, want := range []string{"release: prom", "port: metrics", "app: fleet-controller"} {
		if !strings.Contains(sm, want) {
			t.Errorf("ServiceMonitor lacks %q:\n%s", want, sm)
		}
	}
	if !strings.Contains(objs["Service/fleet-controller"], "name: metrics") {
		t.Error("no metrics port on the Service the ServiceMonitor selects")
	}

	var cm corev1.ConfigMap
	if err := yaml.Unmarshal([]byte(objs["ConfigMap/fleet-dashboard"]), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard labels %v, want grafana_dashboard=1", cm.Labels)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["fleet.json"]), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	exported := metrics.Families()
	series := regexp.MustCompile(`fleet_[a-z_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			names := series.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q queries no fleet_ series: %s", p.Title, tg.Expr)
			}
			for _, n := range names {
				histogram := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
				if !slices.Contains(exported, n) && !slices.Contains(exported, histogram) {
					t.Errorf("panel %q queries %s, which nothing exports", p.Title, n)
				}
			}
		}
	}
}
