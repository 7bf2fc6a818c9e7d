package install

import (
	"bufio"
	"bytes"
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
