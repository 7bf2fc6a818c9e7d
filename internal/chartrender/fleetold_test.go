package chartrender

import (
	"strings"
	"testing"

	"github.com/fleetgo/fleet/charts"
)

// Values files holding every key of older Fleet releases' charts (0.10.0, 0.11.0, 0.12.13; the
// fleet-agent's of 0.10.0, 0.11.1 and 0.12.13) install ours: none is refused, and the keys only
// those releases had take effect or are documented as accepted without effect.
func TestOlderFleetValuesFiles(t *testing.T) {
	for _, file := range []string{"fleet-0.10-values.yaml", "fleet-0.11-values.yaml", "fleet-0.12-values.yaml"} {
		objs := renderWith(t, charts.Fleet, "testdata/"+file)
		pod := podOf(t, objs["Deployment/fleet-controller"])
		if len(pod.Containers) != 1 || !strings.HasPrefix(pod.Containers[0].Image, "rancher/fleet:") {
			t.Errorf("%s: controller %+v", file, pod.Containers)
		}
		if _, ok := objs["Deployment/fleet-controller-shard-shard0"]; !ok {
			t.Errorf("%s: shards: no shard Deployment", file)
		}
	}

	// cpuPprof (0.10): the controller records CPU profiles into the volume it describes.
	pod := podOf(t, renderWith(t, charts.Fleet, "testdata/fleet-0.10-values.yaml")["Deployment/fleet-controller"])
	args := strings.Join(pod.Containers[0].Args, " ")
	if !strings.Contains(args, "--cpu-profile-dir=/tmp/pprof") || !strings.Contains(args, "--cpu-profile-period=60s") {
		t.Errorf("cpuPprof: args %s", args)
	}
	mounted := false
	for _, m := range pod.Containers[0].VolumeMounts {
		mounted = mounted || m.Name == "pprof" && m.MountPath == "/tmp/pprof"
	}
	hostPath := false
	for _, v := range pod.Volumes {
		hostPath = hostPath || v.Name == "pprof" && v.HostPath != nil && v.HostPath.Path == "/tmp/pprof"
	}
	if !mounted || !hostPath {
		t.Errorf("cpuPprof: mounted %v, hostPath volume %v", mounted, hostPath)
	}
	pod = podOf(t, renderWith(t, charts.Fleet, "testdata/fleet-0.11-values.yaml")["Deployment/fleet-controller"])
	if strings.Contains(strings.Join(pod.Containers[0].Args, " "), "cpu-profile") {
		t.Error("no cpuPprof: the controller records CPU profiles")
	}

	// Some releases shipped additionalKnownHosts as an empty object: no hosts.
	out, err := Render(charts.Fleet, "fleet", "cattle-fleet-system", map[string]any{"additionalKnownHosts": map[string]any{}})
	if err != nil {
		t.Fatalf("additionalKnownHosts {}: %v", err)
	}
	if _, ok := objectsOf(t, out)["ConfigMap/known-hosts"]; !ok {
		t.Error("additionalKnownHosts {}: no ConfigMap known-hosts")
	}
	if _, err := Render(charts.Fleet, "fleet", "cattle-fleet-system", map[string]any{"additionalKnownHosts": map[string]any{"a": "b"}}); err == nil {
		t.Error("additionalKnownHosts as a non-empty object is taken")
	}

	for _, file := range []string{"fleet-agent-0.10-values.yaml", "fleet-agent-0.12-values.yaml"} {
		pod := podOf(t, renderWith(t, charts.Agent, "testdata/"+file)["Deployment/fleet-agent"])
		if !strings.HasPrefix(pod.Containers[0].Image, "rancher/fleet-agent:") {
			t.Errorf("%s: agent image %s", file, pod.Containers[0].Image)
		}
	}
}
