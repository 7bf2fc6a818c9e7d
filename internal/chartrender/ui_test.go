package chartrender

import (
	"strings"
	"testing"
)

// ui.enabled runs the web UI with --in-cluster and a ServiceAccount bound to nothing: it acts
// only with its viewers' credentials.
func TestUIHasNoRightsOfItsOwn(t *testing.T) {
	if _, ok := renderObjects(t, nil)["Deployment/fleet-ui"]; ok {
		t.Fatal("the UI is off by default")
	}
	objs := renderObjects(t, map[string]any{"ui": map[string]any{"enabled": true, "auth": "header"}})
	dep, ok := objs["Deployment/fleet-ui"]
	if !ok {
		t.Fatalf("no fleet-ui Deployment: %v", keys(objs))
	}
	pod := podOf(t, dep)
	if pod.ServiceAccountName != "fleet-ui" || !strings.Contains(strings.Join(pod.Containers[0].Args, " "), "ui --in-cluster --addr=0.0.0.0:8088 --auth=header --max-viewers=8") {
		t.Fatalf("pod %+v", pod.Containers[0].Args)
	}
	if _, ok := objs["Service/fleet-ui"]; !ok {
		t.Fatal("no Service")
	}
	for k, doc := range objs {
		if (strings.HasPrefix(k, "RoleBinding/") || strings.HasPrefix(k, "ClusterRoleBinding/")) && strings.Contains(doc, "name: fleet-ui\n") {
			t.Errorf("%s binds the UI's ServiceAccount", k)
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
