package agentmanifest

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/config"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestObjectsFollowConfigAndCluster(t *testing.T) {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "fleet-default"}, Spec: fleet.ClusterSpec{
		RedeployAgentGeneration: 7,
		AgentEnvVars:            []corev1.EnvVar{{Name: "FLEET_API_SERVER_URL", Value: "https://override"}, {Name: "EXTRA", Value: "1"}},
		AgentAffinity:           &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}},
	}}
	s := Settings{Image: "reg.local/fleet:v1", Debug: true, Config: config.Config{APIServerURL: "https://manager",
		AgentCheckinInterval: metav1.Duration{Duration: 30 * time.Second}}}
	objs, err := Objects(c, s, "agents")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("%d objects, want the Deployment alone (no scheduling customization)", len(objs))
	}
	d := objs[0].(interface{ GetNamespace() string })
	if d.GetNamespace() != "agents" {
		t.Errorf("namespace %q", d.GetNamespace())
	}
	dep, _ := chartDeployment(Values(c, s), "agents")
	Customize(dep, c)
	ct := dep.Spec.Template.Spec.Containers[0]
	for _, arg := range []string{"--checkin-interval=30s", "--gc-interval=15m0s", "--agent-tls-mode=system-store", "--debug"} {
		if !slices.Contains(ct.Args, arg) {
			t.Errorf("args %v lack %s", ct.Args, arg)
		}
	}
	if ct.Image != "reg.local/fleet:v1" {
		t.Errorf("image %s", ct.Image)
	}
	// The Cluster's variable wins over the manager's of the same name, once.
	var urls []string
	for _, e := range ct.Env {
		if e.Name == "FLEET_API_SERVER_URL" {
			urls = append(urls, e.Value)
		}
	}
	if !slices.Equal(urls, []string{"https://override"}) {
		t.Errorf("FLEET_API_SERVER_URL values %v", urls)
	}
	if dep.Spec.Template.Annotations[GenerationAnnotation] != "7" {
		t.Errorf("annotations %v", dep.Spec.Template.Annotations)
	}
	if dep.Spec.Template.Spec.Affinity == nil || dep.Spec.Template.Spec.Affinity.NodeAffinity == nil {
		t.Error("affinity not applied")
	}
	// The memo hands out copies: customizing one leaves the next render as the chart made it.
	again, _ := chartDeployment(Values(c, s), "agents")
	if _, ok := again.Spec.Template.Annotations[GenerationAnnotation]; ok {
		t.Error("a customized Deployment leaked into the memo")
	}
}

func TestHash(t *testing.T) {
	if Hash(nil) != "" || Hash([]corev1.Toleration{}) != "" || Hash("") != "" {
		t.Error("unset settings hash to empty")
	}
	a := Hash([]corev1.EnvVar{{Name: "A", Value: "1"}})
	if a == "" || a != Hash([]corev1.EnvVar{{Name: "A", Value: "1"}}) || a == Hash([]corev1.EnvVar{{Name: "A", Value: "2"}}) {
		t.Error("hash is not a stable function of the value")
	}
}
