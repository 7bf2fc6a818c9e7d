// Package agentmanifest renders the agent's Deployment as the manager wants it for one cluster:
// the fleet-agent chart's Deployment with the manager's agent configuration (check-in and
// garbage-collection intervals, TLS mode, API server URL and CA, debug, image) and the Cluster's
// agent settings (tolerations, affinity, resources, environment, pull secrets, private registry,
// host network, priority class and disruption budget). The manager ships it as the agent's own
// Bundle, fleet-agent-<cluster>, and installs it the same way into clusters it imports. (manager)
package agentmanifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	wyaml "github.com/rancher/wrangler/v3/pkg/yaml"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetgo/fleet/charts"
	"github.com/fleetgo/fleet/internal/chartrender"
	"github.com/fleetgo/fleet/internal/config"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

const (
	// GenerationAnnotation on the agent's pod template holds the Cluster's
	// spec.redeployAgentGeneration: raising it replaces the agent's pod.
	GenerationAnnotation = "fleet.cattle.io/redeploy-agent-generation"
	// PriorityClassName and PodDisruptionBudgetName are made for a Cluster's
	// agentSchedulingCustomization.
	PriorityClassName       = "fleet-agent-priority-class"
	PodDisruptionBudgetName = "fleet-agent-pod-disruption-budget"
)

// Settings are the manager's side of the agent's configuration.
type Settings struct {
	// Image is the agent image, "repository[:tag]"; empty means the chart's.
	Image string
	// Debug turns on the agent's debug log.
	Debug bool
	// Config is the manager's configuration in force.
	Config config.Config
	// Proxy is the manager's proxy settings (config.ProxyEnv), which its agents get too; a
	// Cluster's agentEnvVars win over them.
	Proxy map[string]string
	// ProxyCA is the proxy's CA (the fleet chart's proxyCACert), which its agents trust besides
	// their image's CA bundle.
	ProxyCA []byte
}

// Values are the fleet-agent chart values for cluster c under s (no token: a registered agent
// keeps its own credential).
func Values(c *fleet.Cluster, s Settings) map[string]any {
	cfg := s.Config.WithDefaults()
	v := map[string]any{
		"checkinInterval":           cfg.AgentCheckinInterval.Duration.String(),
		"garbageCollectionInterval": cfg.GarbageCollectionInterval.Duration.String(),
		"agentTLSMode":              cfg.AgentTLSMode,
		"apiServerURL":              cfg.APIServerURL,
		"apiServerCA":               cfg.APIServerCA,
		"debug":                     s.Debug,
		"agentConfig":               false,
		"global":                    map[string]any{"cattle": map[string]any{"systemDefaultRegistry": c.Spec.PrivateRepoURL}},
		"fleetAgent":                map[string]any{"hostNetwork": c.Spec.HostNetwork != nil && *c.Spec.HostNetwork},
	}
	if s.Image != "" {
		repo, tag := chartrender.SplitImage(s.Image)
		v["image"] = map[string]any{"repository": repo, "tag": tag}
	}
	return v
}

// Namespace is where cluster c's agent runs: spec.agentNamespace, else where it said it runs
// when it checked in, else the system namespace.
func Namespace(c *fleet.Cluster) string {
	switch {
	case c.Spec.AgentNamespace != "":
		return c.Spec.AgentNamespace
	case c.Status.Agent.Namespace != "":
		return c.Status.Agent.Namespace
	}
	return fleet.SystemNamespace
}

// Objects are the agent's Deployment for cluster c in namespace ns, customized by the Cluster's
// agent settings, and the PriorityClass and PodDisruptionBudget its scheduling customization asks
// for.
func Objects(c *fleet.Cluster, s Settings, ns string) ([]runtime.Object, error) {
	d, err := chartDeployment(Values(c, s), ns)
	if err != nil {
		return nil, err
	}
	out := append([]runtime.Object{d}, withProxy(d, s, ns)...)
	Customize(d, c)
	if sc := c.Spec.AgentSchedulingCustomization; sc != nil {
		if pc := sc.PriorityClass; pc != nil {
			out = append(out, &schedulingv1.PriorityClass{TypeMeta: metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
				ObjectMeta: metav1.ObjectMeta{Name: PriorityClassName}, Value: int32(pc.Value), PreemptionPolicy: pc.PreemptionPolicy,
				Description: "Priority of the fleet agent (Cluster spec.agentSchedulingCustomization)"})
		}
		if pdb := sc.PodDisruptionBudget; pdb != nil {
			out = append(out, disruptionBudget(pdb, ns, d.Spec.Selector))
		}
	}
	return out, nil
}

// rendered holds the chart's Deployment by values and namespace: clusters share a handful of
// those, and rendering a chart on every Cluster change would cost more than the rest of it.
var rendered = struct {
	sync.Mutex
	m map[string]*appsv1.Deployment
}{m: map[string]*appsv1.Deployment{}}

// renderedMax bounds the memo; past it, it starts over.
const renderedMax = 64

// chartDeployment is the fleet-agent chart's Deployment rendered with values into ns.
func chartDeployment(values map[string]any, ns string) (*appsv1.Deployment, error) {
	key, err := json.Marshal([]any{values, ns})
	if err != nil {
		return nil, err
	}
	rendered.Lock()
	d, ok := rendered.m[string(key)]
	rendered.Unlock()
	if ok {
		return d.DeepCopy(), nil
	}
	manifest, err := chartrender.Render(charts.Agent, "fleet-agent", ns, values)
	if err != nil {
		return nil, err
	}
	objs, err := wyaml.ToObjects(bytes.NewBufferString(manifest))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetObjectKind().GroupVersionKind().Kind != "Deployment" {
			continue
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		d = &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, d); err != nil {
			return nil, err
		}
	}
	if d == nil {
		return nil, fmt.Errorf("the %s chart rendered no Deployment", charts.Agent)
	}
	rendered.Lock()
	if len(rendered.m) >= renderedMax {
		rendered.m = map[string]*appsv1.Deployment{}
	}
	rendered.m[string(key)] = d
	rendered.Unlock()
	return d.DeepCopy(), nil
}

func disruptionBudget(s *fleet.PodDisruptionBudgetSpec, ns string, sel *metav1.LabelSelector) *policyv1.PodDisruptionBudget {
	p := &policyv1.PodDisruptionBudget{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: PodDisruptionBudgetName, Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: sel}}
	if s.MinAvailable != "" {
		v := intstr.Parse(s.MinAvailable)
		p.Spec.MinAvailable = &v
	}
	if s.MaxUnavailable != "" {
		v := intstr.Parse(s.MaxUnavailable)
		p.Spec.MaxUnavailable = &v
	}
	return p
}

// ProxyCAConfigMap holds the proxy's CA in the agent's namespace, mounted at ProxyCADir.
const (
	ProxyCAConfigMap = "fleet-agent-proxy-ca"
	ProxyCADir       = "/etc/fleet/proxy-ca"
	proxyCAKey       = "proxy-ca.crt"
)

// ProxySecret holds the manager's proxy settings, in the agent's namespace, when they carry
// credentials: the agent takes them from it, not from values of its Deployment's environment.
const ProxySecret = "fleet-agent-proxy"

// withProxy gives the agent the manager's proxy settings and, when there is one, the proxy's CA:
// the objects it returns are the ConfigMap mounted into the agent and named by SSL_CERT_DIR, and
// the Secret the settings come from when they carry credentials (config.ProxyHasCredentials).
func withProxy(d *appsv1.Deployment, s Settings, ns string) []runtime.Object {
	var out []runtime.Object
	env, data := config.ProxyEnvVars(s.Proxy, ProxySecret)
	if data != nil {
		out = append(out, &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: ProxySecret, Namespace: ns}, Data: data})
	}
	var cm *corev1.ConfigMap
	spec := &d.Spec.Template.Spec
	if len(s.ProxyCA) > 0 {
		cm = &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: ProxyCAConfigMap, Namespace: ns}, Data: map[string]string{proxyCAKey: string(s.ProxyCA)}}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "proxy-ca", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: ProxyCAConfigMap}}}})
		env = append(env, corev1.EnvVar{Name: "SSL_CERT_DIR", Value: ProxyCADir})
	}
	for i := range spec.Containers {
		ct := &spec.Containers[i]
		ct.Env = mergeEnv(ct.Env, env)
		if cm != nil {
			ct.VolumeMounts = append(ct.VolumeMounts, corev1.VolumeMount{Name: "proxy-ca", MountPath: ProxyCADir, ReadOnly: true})
		}
	}
	if cm != nil {
		out = append(out, cm)
	}
	return out
}

// Customize applies the Cluster's agent settings to the agent's Deployment d.
func Customize(d *appsv1.Deployment, c *fleet.Cluster) {
	pod := &d.Spec.Template
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[GenerationAnnotation] = strconv.FormatInt(c.Spec.RedeployAgentGeneration, 10)
	spec := &pod.Spec
	spec.Tolerations = append(spec.Tolerations, c.Spec.AgentTolerations...)
	if c.Spec.AgentAffinity != nil {
		spec.Affinity = c.Spec.AgentAffinity.DeepCopy()
	}
	spec.ImagePullSecrets = append(spec.ImagePullSecrets, c.Spec.AgentPullSecrets...)
	if sc := c.Spec.AgentSchedulingCustomization; sc != nil && sc.PriorityClass != nil {
		spec.PriorityClassName = PriorityClassName
	}
	for i := range spec.Containers {
		ct := &spec.Containers[i]
		if c.Spec.AgentResources != nil {
			ct.Resources = *c.Spec.AgentResources.DeepCopy()
		}
		ct.Env = mergeEnv(ct.Env, c.Spec.AgentEnvVars)
	}
}

// mergeEnv sets each of extra in env, replacing a variable of the same name.
func mergeEnv(env, extra []corev1.EnvVar) []corev1.EnvVar {
	for _, e := range extra {
		replaced := false
		for i := range env {
			if env[i].Name == e.Name {
				env[i], replaced = e, true
			}
		}
		if !replaced {
			env = append(env, e)
		}
	}
	return env
}

// Hash is a short stable hash of v's JSON ("" for a nil or empty value), as the Cluster's
// status.agent*Hash fields hold it.
func Hash(v any) string {
	data, err := json.Marshal(v)
	if err != nil || string(data) == "null" || string(data) == `""` || string(data) == "[]" || string(data) == "{}" {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:32]
}
