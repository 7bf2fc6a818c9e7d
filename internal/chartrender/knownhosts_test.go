package chartrender

import (
	"bufio"
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/charts"
)

// The fleet chart's ConfigMap known-hosts holds the providers' host keys and
// additionalKnownHosts, every line a valid known_hosts entry; insecureSkipHostKeyChecks reaches
// the controller (default false, as on Fleet).
func TestKnownHostsConfigMap(t *testing.T) {
	extra := "[git.internal]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	for _, insecure := range []bool{false, true} {
		values := map[string]any{"additionalKnownHosts": []any{extra}}
		if insecure {
			values["insecureSkipHostKeyChecks"] = true
		}
		out, err := Render(charts.Fleet, "fleet", "cattle-fleet-system", values)
		if err != nil {
			t.Fatal(err)
		}
		objs := objectsOf(t, out)
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(objs["ConfigMap/known-hosts"]), &cm); err != nil {
			t.Fatal(err)
		}
		hosts := map[string]int{}
		sc := bufio.NewScanner(strings.NewReader(cm.Data["known_hosts"]))
		for sc.Scan() {
			_, names, _, _, _, err := ssh.ParseKnownHosts(sc.Bytes())
			if err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			for _, n := range names {
				hosts[n]++
			}
		}
		for _, want := range []string{"github.com", "gitlab.com", "bitbucket.org", "ssh.dev.azure.com", "vs-ssh.visualstudio.com", "[git.internal]:2222"} {
			if hosts[want] == 0 {
				t.Errorf("no key for %s: %v", want, hosts)
			}
		}
		if !bytes.HasPrefix([]byte(cm.Data["known_hosts"]), bytes.TrimSpace(charts.KnownHosts())[:20]) {
			t.Error("the ConfigMap does not start with the chart's known_hosts file")
		}
		args := strings.Join(podOf(t, objs["Deployment/fleet-controller"]).Containers[0].Args, " ")
		if got := strings.Contains(args, "--insecure-skip-host-key-checks"); got != insecure {
			t.Errorf("insecureSkipHostKeyChecks %v: args %s", insecure, args)
		}
	}
}

// A top-level values key no release of the chart has is refused, naming the closest known key;
// the known keys (file known-keys) are the schema's top-level properties.
func TestUnknownValuesKeyNamesTheClosest(t *testing.T) {
	for key, closest := range map[string]string{"nodeSelectr": "nodeSelector", "agentChekinInterval": "agentCheckinInterval",
		"tolerationz": "tolerations", "priorityClasName": "priorityClassName", "debugLevle": "debugLevel"} {
		_, err := Render(charts.Fleet, "fleet", "cattle-fleet-system", map[string]any{key: "x"})
		if err == nil || !strings.Contains(err.Error(), key+" is not a key of Fleet's fleet chart (did you mean "+closest+"?)") {
			t.Errorf("%s: error %v, want one naming %s", key, err, closest)
		}
	}
	_, err := Render(charts.Agent, "fleet-agent", "cattle-fleet-system", map[string]any{"noProxi": "x"})
	if err == nil || !strings.Contains(err.Error(), "noProxi is not a key of Fleet's fleet-agent chart (did you mean noProxy?)") {
		t.Errorf("fleet-agent: error %v", err)
	}
	for _, name := range []string{charts.Fleet, charts.Agent} {
		knownKeysAreTheSchemas(t, name)
	}
}

func knownKeysAreTheSchemas(t *testing.T, chart string) {
	t.Helper()
	c, err := charts.Load(chart)
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if err := yaml.Unmarshal(c.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	var known string
	for _, f := range c.Files {
		if f.Name == "known-keys" {
			known = string(f.Data)
		}
	}
	want := slices.Sorted(maps.Keys(schema.Properties))
	if got := strings.Fields(known); !slices.Equal(got, want) {
		t.Errorf("%s: known-keys %v, the schema's properties %v", chart, got, want)
	}
}

// global.cattle.imagePullSecrets (names, or {name: ...}) reach the controller's and the agent's
// pods, as Rancher's private-registry setting expects.
func TestImagePullSecrets(t *testing.T) {
	values := map[string]any{"global": map[string]any{"cattle": map[string]any{"imagePullSecrets": []any{"regcred", map[string]any{"name": "other"}}}}}
	for chart, deployment := range map[string]string{charts.Fleet: "Deployment/fleet-controller", charts.Agent: "Deployment/fleet-agent"} {
		out, err := Render(chart, chart, "cattle-fleet-system", values)
		if err != nil {
			t.Fatal(err)
		}
		pod := podOf(t, objectsOf(t, out)[deployment])
		var names []string
		for _, s := range pod.ImagePullSecrets {
			names = append(names, s.Name)
		}
		if !slices.Equal(names, []string{"regcred", "other"}) {
			t.Errorf("%s: imagePullSecrets %v", chart, names)
		}
	}
}

// Fleet's migrations run as post-upgrade hook Jobs, as the controller's ServiceAccount:
// migrations.gitrepoHelmURLRegexMigration runs `fleet migrate gitrepo-helm-url-regex`,
// clusterRegistrationCleanup and gitrepoJobsCleanup `fleet cleanup`; off, a migration has none.
func TestMigrationHook(t *testing.T) {
	hooks := func(t *testing.T, values map[string]any) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, h := range dryRunFleet(t, values).Hooks {
			out[h.Name] = h.Manifest
		}
		return out
	}
	jobs := []struct {
		key, name string
		want      []string
	}{
		{"gitrepoHelmURLRegexMigration", "fleet-migrate-gitrepo-helm-url-regex",
			[]string{"- migrate", "- gitrepo-helm-url-regex", "- --system-namespace=cattle-fleet-system"}},
		{"clusterRegistrationCleanup", "fleet-cleanup-clusterregistrations", []string{"- cleanup", "- clusterregistration"}},
		{"gitrepoJobsCleanup", "fleet-cleanup-gitrepo-jobs", []string{"- cleanup", "- gitjob"}},
	}
	// Fleet's defaults: every migration on.
	on := hooks(t, nil)
	for _, j := range jobs {
		job := on[j.name]
		if job == "" {
			t.Errorf("%s on by default, yet no Job %s", j.key, j.name)
			continue
		}
		for _, want := range append(j.want, "helm.sh/hook: post-upgrade", "serviceAccountName: fleet-controller") {
			if !strings.Contains(job, want) {
				t.Errorf("hook Job %s lacks %q:\n%s", j.name, want, job)
			}
		}
		// Off: no Job, the others stay.
		off := hooks(t, map[string]any{"migrations": map[string]any{j.key: false}})
		if _, ok := off[j.name]; ok {
			t.Errorf("%s off, yet its Job", j.key)
		}
		if len(off) != len(on)-1 {
			t.Errorf("%s off: %d hooks, want %d", j.key, len(off), len(on)-1)
		}
	}
	// resources.fleetCleanup is the cleanup Jobs' resources.
	res := hooks(t, map[string]any{"resources": map[string]any{"fleetCleanup": map[string]any{"limits": map[string]any{"memory": "77Mi"}}}})
	for _, name := range []string{"fleet-cleanup-clusterregistrations", "fleet-cleanup-gitrepo-jobs"} {
		if !strings.Contains(res[name], "memory: 77Mi") {
			t.Errorf("%s does not take resources.fleetCleanup:\n%s", name, res[name])
		}
	}
	if strings.Contains(res["fleet-migrate-gitrepo-helm-url-regex"], "77Mi") {
		t.Error("the helmRepoURLRegex migration took the cleanup Jobs' resources")
	}
}
