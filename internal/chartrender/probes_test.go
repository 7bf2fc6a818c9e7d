package chartrender

import (
	"testing"

	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/charts"
)

// Both Deployments are probed on their health ports: liveness on /healthz, readiness on /readyz.
func TestChartsProbeHealthAndReadiness(t *testing.T) {
	for _, tc := range []struct {
		chart, deployment string
		values            map[string]any
		port              int32
	}{
		{charts.Fleet, "fleet-controller", nil, 8081},
		{charts.Agent, "fleet-agent", map[string]any{"token": "t", "apiServerURL": "https://m"}, 8082},
	} {
		manifest, err := Render(tc.chart, tc.chart, "cattle-fleet-system", tc.values)
		if err != nil {
			t.Fatal(err)
		}
		var d *appsv1.Deployment
		for _, doc := range releaseutil.SplitManifests(manifest) {
			var obj appsv1.Deployment
			if err := yaml.Unmarshal([]byte(doc), &obj); err == nil && obj.Kind == "Deployment" && obj.Name == tc.deployment {
				d = &obj
			}
		}
		if d == nil {
			t.Fatalf("%s: no Deployment %s", tc.chart, tc.deployment)
		}
		c := d.Spec.Template.Spec.Containers[0]
		var health int32
		for _, p := range c.Ports {
			if p.Name == "health" {
				health = p.ContainerPort
			}
		}
		if health != tc.port {
			t.Errorf("%s: health port %d, want %d", tc.chart, health, tc.port)
		}
		if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "health" {
			t.Errorf("%s: livenessProbe %+v", tc.chart, p)
		}
		if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "health" {
			t.Errorf("%s: readinessProbe %+v", tc.chart, p)
		}
	}
}
