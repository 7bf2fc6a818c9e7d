package chartrender

import (
	"testing"

	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/charts"
)

// The charts' pods run with a read-only root filesystem (a writable emptyDir at /tmp, their
// home) and request resources, also when the values set none.
func TestChartsPodsAreReadOnlyAndRequestResources(t *testing.T) {
	for _, tc := range []struct {
		chart  string
		values map[string]any
	}{
		{charts.Fleet, nil},
		{charts.Agent, map[string]any{"token": "t", "apiServerURL": "https://m"}},
	} {
		manifest, err := Render(tc.chart, tc.chart, "cattle-fleet-system", tc.values)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, doc := range releaseutil.SplitManifests(manifest) {
			var d appsv1.Deployment
			if err := yaml.Unmarshal([]byte(doc), &d); err != nil || d.Kind != "Deployment" {
				continue
			}
			seen++
			spec := d.Spec.Template.Spec
			tmp := ""
			for _, v := range spec.Volumes {
				if v.EmptyDir != nil {
					tmp = v.Name
				}
			}
			for _, c := range spec.Containers {
				if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
					t.Errorf("%s/%s: the root filesystem is writable", d.Name, c.Name)
				}
				mounted := false
				for _, m := range c.VolumeMounts {
					mounted = mounted || m.Name == tmp && m.MountPath == "/tmp"
				}
				home := false
				for _, e := range c.Env {
					home = home || e.Name == "HOME" && e.Value == "/tmp"
				}
				if tmp == "" || !mounted || !home {
					t.Errorf("%s/%s: no writable /tmp as home (volume %q, mounted %v, HOME %v)", d.Name, c.Name, tmp, mounted, home)
				}
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
					t.Errorf("%s/%s: requests %v", d.Name, c.Name, c.Resources.Requests)
				}
			}
		}
		if seen == 0 {
			t.Errorf("%s: no Deployment", tc.chart)
		}
	}
}
