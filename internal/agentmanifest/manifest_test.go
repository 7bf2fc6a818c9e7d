package agentmanifest

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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

// objectOf is the first object of type T among objs (nil when there is none).
func objectOf[T runtime.Object](objs []runtime.Object) T {
	for _, o := range objs {
		if t, ok := o.(T); ok {
			return t
		}
	}
	var zero T
	return zero
}

// The agents the manager deploys get its proxy settings and trust its proxy's CA; a Cluster's
// agentEnvVars win over the manager's settings.
func TestObjectsCarryTheManagersProxy(t *testing.T) {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "fleet-default"}, Spec: fleet.ClusterSpec{
		AgentEnvVars: []corev1.EnvVar{{Name: "NO_PROXY", Value: "cluster.local"}}}}
	s := Settings{Config: config.Config{APIServerURL: "https://manager"},
		Proxy: map[string]string{"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "10.0.0.0/8"}, ProxyCA: []byte("-----CA-----\n")}
	objs, err := Objects(c, s, "agents")
	if err != nil {
		t.Fatal(err)
	}
	dep, cm := objectOf[*appsv1.Deployment](objs), objectOf[*corev1.ConfigMap](objs)
	if dep == nil || cm == nil {
		t.Fatalf("objects %v: want the Deployment and the proxy CA ConfigMap", objs)
	}
	if cm.Name != ProxyCAConfigMap || cm.Namespace != "agents" || cm.Data[proxyCAKey] != "-----CA-----\n" {
		t.Errorf("ConfigMap %s/%s %v", cm.Namespace, cm.Name, cm.Data)
	}
	env := map[string]string{}
	ct := dep.Spec.Template.Spec.Containers[0]
	for _, e := range ct.Env {
		env[e.Name] = e.Value
	}
	if env["HTTPS_PROXY"] != "http://proxy:3128" || env["NO_PROXY"] != "cluster.local" || env["SSL_CERT_DIR"] != ProxyCADir {
		t.Errorf("env %v: want the manager's HTTPS_PROXY, the Cluster's NO_PROXY and SSL_CERT_DIR", env)
	}
	if _, ok := env["HTTP_PROXY"]; ok {
		t.Error("HTTP_PROXY set though the manager has none")
	}
	if !slices.ContainsFunc(ct.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "proxy-ca" && m.MountPath == ProxyCADir }) {
		t.Errorf("mounts %v lack the proxy CA", ct.VolumeMounts)
	}
	// No proxy: nothing of it, and the chart's rendering is not changed for the next cluster.
	plain, err := Objects(c, Settings{Config: s.Config}, "agents")
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != 1 {
		t.Fatalf("%d objects without a proxy CA, want 1", len(plain))
	}
	for _, e := range plain[0].(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Env {
		if e.Name == "HTTPS_PROXY" || e.Name == "SSL_CERT_DIR" {
			t.Errorf("without a proxy the agent has %s", e.Name)
		}
	}
}

// A manager proxy with credentials reaches its agents from a Secret of the agent's namespace:
// the Deployment's environment holds no password.
func TestProxyCredentialsReachTheAgentFromASecret(t *testing.T) {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "fleet-default"}}
	s := Settings{Config: config.Config{APIServerURL: "https://manager"},
		Proxy: map[string]string{"HTTPS_PROXY": "http://fleet:hunter2@proxy:3128", "NO_PROXY": "10.0.0.0/8"}}
	objs, err := Objects(c, s, "agents")
	if err != nil {
		t.Fatal(err)
	}
	dep, secret := objectOf[*appsv1.Deployment](objs), objectOf[*corev1.Secret](objs)
	if dep == nil || secret == nil || secret.Name != ProxySecret || secret.Namespace != "agents" ||
		string(secret.Data["HTTPS_PROXY"]) != "http://fleet:hunter2@proxy:3128" {
		t.Fatalf("objects %v: want the Deployment and the proxy Secret", objs)
	}
	from := map[string]string{}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if strings.Contains(e.Value, "hunter2") {
			t.Errorf("%s holds the proxy password", e.Name)
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			from[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	if from["HTTPS_PROXY"] != ProxySecret+"/HTTPS_PROXY" || from["NO_PROXY"] != ProxySecret+"/NO_PROXY" {
		t.Errorf("proxy settings from %v", from)
	}
}
