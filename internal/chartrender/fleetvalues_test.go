package chartrender

import (
	"os"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/charts"
)

// renderWith renders a chart with a values file and returns its objects by kind/name.
func renderWith(t *testing.T, chart, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	out, err := Render(chart, chart, "cattle-fleet-system", values)
	if err != nil {
		t.Fatal(err)
	}
	return objectsOf(t, out)
}

// objectsOf splits a rendered manifest into its objects by kind/name.
func objectsOf(t *testing.T, out string) map[string]string {
	t.Helper()
	objs := map[string]string{}
	for _, doc := range releaseutil.SplitManifests(out) {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		objs[o.Kind+"/"+o.Metadata.Name] = doc
	}
	return objs
}

// podOf returns the pod template of a rendered Deployment.
func podOf(t *testing.T, doc string) corev1.PodSpec {
	t.Helper()
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec
}

// A values file written for Fleet's fleet chart installs ours with the same effect.
func TestFleetValuesFile(t *testing.T) {
	objs := renderWith(t, charts.Fleet, "testdata/fleet-values.yaml")
	pod := podOf(t, objs["Deployment/fleet-controller"])
	c := pod.Containers[0]
	if pod.NodeSelector["node-role.kubernetes.io/control-plane"] != "true" || len(pod.Tolerations) != 1 ||
		pod.Tolerations[0].Effect != corev1.TaintEffectNoSchedule || pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("scheduling values not applied: %+v", pod)
	}
	if !strings.HasPrefix(c.Image, "registry.example:5000/ghcr.io/fleetgo/fleet:") {
		t.Errorf("systemDefaultRegistry not applied: %s", c.Image)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--debug", "--leader-election-lease-duration=60s", "--leader-election-renew-deadline=40s",
		"--leader-election-retry-period=5s", "--workers=80", "--gitops=false", "--metrics-addr=",
		"--agent-image=registry.example:5000/ghcr.io/fleetgo/fleet:"} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q: %s", want, args)
		}
	}
	if strings.Contains(args, "--git-job-image") {
		t.Errorf("gitops disabled, yet a gitjob image: %s", args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["HTTP_PROXY"] != "http://proxy.example:3128" || env["HTTPS_PROXY"] != "http://proxy.example:3128" ||
		env["NO_PROXY"] != "127.0.0.0/8,.svc" || env["EXPERIMENTAL_OCI_STORAGE"] != "true" {
		t.Errorf("env: %v", env)
	}
	if _, ok := objs["Service/fleet-controller"]; ok {
		t.Error("metrics disabled, yet the metrics Service is rendered")
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal([]byte(objs["ConfigMap/fleet-controller"]), &cm); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"agentCheckinInterval":"1m"`, `"garbageCollectionInterval":"30m"`, `"agentTLSMode":"strict"`,
		`"gitClientTimeout":"45s"`, `"clusterEnqueueDelay":"120s"`, `"apiServerURL":"https://rancher.example:6443"`} {
		if !strings.Contains(cm.Data["config"], want) {
			t.Errorf("config lacks %s: %s", want, cm.Data["config"])
		}
	}
}

// The values schema names a key of the wrong type, and refuses unknown keys.
func TestFleetValuesSchema(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"leaderElection": true}, "/leaderElection"},
		{map[string]any{"agentCheckinInterval": "soon"}, "/agentCheckinInterval"},
		{map[string]any{"nodeSelectr": map[string]any{}}, "nodeSelectr"},
	} {
		_, err := Render(charts.Fleet, "fleet", "cattle-fleet-system", tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %v: error %v, want one naming %s", tc.values, err, tc.want)
		}
	}
	// An interval of "0" (the default) is accepted, as on Fleet.
	for _, key := range []string{"agentCheckinInterval", "garbageCollectionInterval", "gitClientTimeout", "clusterEnqueueDelay"} {
		if _, err := Render(charts.Fleet, "fleet", "cattle-fleet-system", map[string]any{key: "0"}); err != nil {
			t.Errorf("%s: \"0\": %v", key, err)
		}
	}
	if _, err := Render(charts.Agent, "fleet-agent", "cattle-fleet-system", map[string]any{"token": "t", "apiServerURL": "https://m",
		"garbageCollectionInterval": "0"}); err != nil {
		t.Errorf("fleet-agent garbageCollectionInterval \"0\": %v", err)
	}
}

// A values file written for Fleet's fleet-agent chart installs ours with the same effect.
func TestFleetAgentValuesFile(t *testing.T) {
	objs := renderWith(t, charts.Agent, "testdata/fleet-agent-values.yaml")
	pod := podOf(t, objs["Deployment/fleet-agent"])
	c := pod.Containers[0]
	if pod.NodeSelector["kubernetes.io/os"] != "linux" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "dedicated" || !pod.HostNetwork {
		t.Errorf("fleetAgent values not applied: %+v", pod)
	}
	if !strings.HasPrefix(c.Image, "registry.example:5000/ghcr.io/fleetgo/fleet:") {
		t.Errorf("systemDefaultRegistry not applied: %s", c.Image)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--debug", "--workers=20", "--gc-interval=1h", "--leader-election-lease-duration=60s",
		"--leader-election-renew-deadline=40s", "--leader-election-retry-period=5s"} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q: %s", want, args)
		}
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal([]byte(objs["ConfigMap/fleet-agent"]), &cm); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["config"], `"env":"prod"`) {
		t.Errorf("labels: %s", cm.Data["config"])
	}
	if _, ok := objs["Secret/fleet-agent-bootstrap"]; !ok {
		t.Error("no bootstrap Secret for the token")
	}
	_, err := Render(charts.Agent, "fleet-agent", "cattle-fleet-system", map[string]any{"leaderElection": false})
	if err == nil || !strings.Contains(err.Error(), "/leaderElection") {
		t.Errorf("a boolean leaderElection: %v, want an error naming it", err)
	}
}
