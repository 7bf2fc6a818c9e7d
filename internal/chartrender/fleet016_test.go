package chartrender

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/charts"
)

// Values files holding every key of Fleet 0.16.1's fleet and fleet-agent charts (its defaults,
// and examples of the keys its values document in comments) install ours, and the keys that
// apply to us take effect.
func TestFleet016ValuesFiles(t *testing.T) {
	objs := renderWith(t, charts.Fleet, "testdata/fleet-0.16-values.yaml")
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(objs["Deployment/fleet-controller"]), &d); err != nil {
		t.Fatal(err)
	}
	meta := d.Spec.Template.ObjectMeta
	if meta.Labels["team"] != "platform" || meta.Labels["app"] != "fleet-controller" || meta.Annotations["example.com/owner"] != "platform" {
		t.Errorf("extraLabels/extraAnnotations.fleetController: %v %v", meta.Labels, meta.Annotations)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Resources.Requests.Cpu().String() != "150m" || c.Resources.Requests.Memory().String() != "200Mi" {
		t.Errorf("resources.fleetController: %v", c.Resources)
	}
	if strings.Contains(strings.Join(c.Args, " "), "--helmops") {
		t.Errorf("helmops.enabled true runs HelmOps: %v", c.Args)
	}
	if _, ok := objs["Deployment/fleet-controller-shard-north"]; !ok {
		t.Error("shards: no shard Deployment")
	}
	// proxyCACert: a ConfigMap the controller mounts, and trusts besides its image's bundle.
	if !strings.Contains(objs["ConfigMap/fleet-proxy-ca"], "BEGIN CERTIFICATE") {
		t.Error("proxyCACert: no ConfigMap fleet-proxy-ca")
	}
	trusted, handedOn := false, false
	for _, e := range c.Env {
		trusted = trusted || e.Name == "SSL_CERT_DIR" && e.Value == "/etc/fleet/proxy-ca"
		handedOn = handedOn || e.Name == "FLEET_PROXY_CA_FILE" && e.Value == "/etc/fleet/proxy-ca/proxy-ca.crt"
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.MountPath == "/etc/fleet/proxy-ca"
	}
	if !trusted || !mounted || !handedOn {
		t.Errorf("proxyCACert: SSL_CERT_DIR %v, mounted %v, FLEET_PROXY_CA_FILE %v", trusted, mounted, handedOn)
	}

	off, err := Render(charts.Fleet, "fleet", "cattle-fleet-system", map[string]any{"helmops": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(off, "- --helmops=false") {
		t.Error("helmops.enabled false: the controller runs HelmOps")
	}

	objs = renderWith(t, charts.Agent, "testdata/fleet-agent-0.16-values.yaml")
	if err := yaml.Unmarshal([]byte(objs["Deployment/fleet-agent"]), &d); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["NO_PROXY"] != "127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,.svc,.cluster.local" {
		t.Errorf("noProxy: %v", env)
	}
	two, err := Render(charts.Agent, "fleet-agent", "cattle-fleet-system", map[string]any{"token": "t", "apiServerURL": "https://m",
		"agent": map[string]any{"replicas": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(objectsOf(t, two)["Deployment/fleet-agent"]), &d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("agent.replicas: %v", d.Spec.Replicas)
	}
}

// dryRunFleet installs the fleet chart with values as `helm install --dry-run` does: the release
// with its hooks and NOTES.
func dryRunFleet(t *testing.T, values map[string]any) *release.Release {
	t.Helper()
	c, err := charts.Load(charts.Fleet)
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(&action.Configuration{Capabilities: chartutil.DefaultCapabilities})
	in.DryRun, in.ClientOnly, in.ReleaseName, in.Namespace = true, true, "fleet", "cattle-fleet-system"
	rel, err := in.Run(c, values)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// The install NOTES name the values of Fleet's that were set and have no effect here.
func TestFleetNotesNameUnappliedValues(t *testing.T) {
	notes := func(values map[string]any) string {
		t.Helper()
		return dryRunFleet(t, values).Info.Notes
	}
	if n := notes(nil); strings.Contains(n, "no effect") {
		t.Errorf("defaults name nothing:\n%s", n)
	}
	n := notes(map[string]any{"gitjob": map[string]any{"replicas": 2},
		"extraAnnotations": map[string]any{"gitjob": map[string]any{"a": "b"}},
		"extraLabels":      map[string]any{"helmops": map[string]any{"a": "b"}}})
	for _, want := range []string{"- gitjob.replicas", "- extraAnnotations.gitjob", "- extraLabels.helmops"} {
		if !strings.Contains(n, want) {
			t.Errorf("notes lack %q:\n%s", want, n)
		}
	}
}

// bootstrap.localAgentDisabled, clusterLabels and agentNamespace reach the controller.
func TestFleetBootstrapValues(t *testing.T) {
	out, err := Render(charts.Fleet, "fleet", "cattle-fleet-system", map[string]any{"bootstrap": map[string]any{
		"localAgentDisabled": true, "clusterLabels": map[string]any{"env": "mgmt", "tier": "a"}, "agentNamespace": "mgmt-agent"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- --bootstrap-local-agent-disabled", "- --bootstrap-cluster-labels=env=mgmt,tier=a", "- --bootstrap-agent-namespace=mgmt-agent"} {
		if !strings.Contains(out, want) {
			t.Errorf("controller args lack %q", want)
		}
	}
}
