// Package clusterimport installs the agent into clusters the manager can reach itself: a Cluster
// with spec.kubeConfigSecret gets a short-lived registration token and the fleet-agent chart,
// with the Cluster's clientID, applied through that kubeconfig. The agent then registers like
// any other, and its registration maps to this Cluster. (manager)
package clusterimport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rancher/wrangler/v3/pkg/apply"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	wyaml "github.com/rancher/wrangler/v3/pkg/yaml"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/charts"
	"github.com/fleetgo/fleet/internal/agentmanifest"
	"github.com/fleetgo/fleet/internal/chartrender"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// errTokenPending: the Cluster's registration token is not issued yet (the token controller
// does that in a moment).
var errTokenPending = errors.New("registration token not issued yet")

// TokenTTL is how long the registration token of an imported cluster is valid.
const TokenTTL = 12 * time.Hour

// ConditionImported says whether the manager installed the agent through the kubeconfig.
const ConditionImported = "Imported"

// Deps are what the controller reads and writes.
type Deps struct {
	Kube     kubernetes.Interface
	Clusters fleetcontrollers.ClusterController
	Tokens   fleetcontrollers.ClusterRegistrationTokenController
	// Settings are the manager's side of the agent's configuration (image, intervals...).
	Settings func() agentmanifest.Settings
	// Config is the configuration in force.
	Config *config.Store
	// SystemNamespace is the manager's, which holds its credential for its own cluster.
	SystemNamespace string
}

type handler struct {
	Deps
	ctx context.Context
	// mem is what the controller remembers of each Cluster between passes (memory.go).
	mem *memory
}

// Requeue intervals.
const (
	// retryFailed is how soon a failed import is tried again when the Cluster did not change.
	retryFailed = time.Minute
	// tokenPendingRetry is how soon an import waiting for its registration token looks again.
	tokenPendingRetry = 500 * time.Millisecond
)

// Register starts importing Clusters that carry a kubeconfig. The import runs as the returned
// status step, which the cluster controller's status handler calls.
func Register(ctx context.Context, d Deps) func(*fleet.Cluster, fleet.ClusterStatus) (fleet.ClusterStatus, error) {
	h := &handler{Deps: d, ctx: ctx, mem: newMemory()}
	d.Clusters.OnChange(ctx, "cluster-import-identity", h.onChange)
	return h.status
}

// TokenName is the registration token the manager makes for importing a Cluster.
func TokenName(cluster string) string { return names.SafeConcatName("import-token", cluster) }

// onChange gives a Cluster to import the clientID its agent will present.
func (h *handler) onChange(key string, c *fleet.Cluster) (*fleet.Cluster, error) {
	if c == nil || c.DeletionTimestamp != nil || c.Spec.KubeConfigSecret == "" {
		h.mem.forget(key)
		return c, nil
	}
	if c.Spec.ClientID == "" {
		// The agent presents this identity, so its registration maps to this Cluster.
		c = c.DeepCopy()
		c.Spec.ClientID = string(c.UID)
		return h.Clusters.Update(c)
	}
	return c, nil
}

// status installs the agent when the Cluster asks for it (first import, or a new
// redeployAgentGeneration) and returns the status saying how that went (the generated status
// handler writes it when it changed).
func (h *handler) status(c *fleet.Cluster, status fleet.ClusterStatus) (fleet.ClusterStatus, error) {
	if c.DeletionTimestamp != nil || c.Spec.KubeConfigSecret == "" || c.Spec.ClientID == "" {
		return status, nil
	}
	key := c.Namespace + "/" + c.Name
	// Status changes (roll-ups, heartbeats) bring a Cluster here often; a failed import is
	// retried when the Cluster changes or after retryFailed.
	if h.mem.failedLately(key, c.Generation, time.Now()) {
		return status, nil
	}
	if g := status.AgentDeployedGeneration; g != nil && *g == c.Spec.RedeployAgentGeneration {
		h.mem.recorded(key)
		return status, nil
	}
	err := h.importCluster(c)
	if errors.Is(err, errTokenPending) {
		h.Clusters.EnqueueAfter(c.Namespace, c.Name, tokenPendingRetry)
		return status, nil
	}
	imported, msg := corev1.ConditionTrue, ""
	if err != nil {
		h.mem.importFailed(key, c.Generation, time.Now())
		h.Clusters.EnqueueAfter(c.Namespace, c.Name, retryFailed)
		imported, msg = corev1.ConditionFalse, importMessage(err)
		logrus.WithFields(logfields.For("cluster-import", c.Namespace, c.Name)).WithError(err).Warn("installing the agent")
	} else {
		h.mem.imported(key)
		gen := c.Spec.RedeployAgentGeneration
		status.AgentDeployedGeneration = &gen
	}
	fleet.SetCondition(&status.Conditions, ConditionImported, imported, "", msg, time.Now())
	return status, nil
}

func (h *handler) importCluster(c *fleet.Cluster) error {
	ctx := h.ctx
	secret, cfg, err := h.kubeconfig(ctx, c)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("kubeConfigSecret %s/%s", secret.Namespace, secret.Name)
	values, err := h.token(ctx, c)
	if err != nil {
		return err
	}
	if u := string(secret.Data[registration.KeyAPIServerURL]); u != "" {
		values.APIServerURL = u
	}
	if ca := string(secret.Data[registration.KeyAPIServerCA]); ca != "" {
		values.APIServerCA = ca
	}
	if values.APIServerURL == "" {
		return fmt.Errorf("no apiServerURL for the agent: set it in the fleet-controller configuration or in %s", where)
	}
	if values.RegistrationKey, err = h.newKey(c); err != nil {
		return err
	}
	objs, agentNS, err := h.agentObjects(c, values)
	if err != nil {
		return err
	}
	a, err := apply.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := a.WithDynamicLookup().WithSetID("fleet-agent-import").WithDefaultNamespace(agentNS).ApplyObjects(objs...); err != nil {
		return fmt.Errorf("installing the agent through %s: %w", where, err)
	}
	return nil
}

// newKey gives the agent the manager is about to install a registration key, recorded on the
// Cluster first: its registration is granted with it at once, even while an earlier agent
// checks in, and no other registration (a token holder who read the Cluster's clientID, its UID)
// is granted without it. Retries of one redeployAgentGeneration's import give the same key (the
// patch then changes nothing).
func (h *handler) newKey(c *fleet.Cluster) (string, error) {
	key, err := h.mem.keyFor(c.Namespace+"/"+c.Name, c.Spec.RedeployAgentGeneration, func() (string, error) {
		k, _, err := registration.NewKey()
		return k, err
	})
	if err != nil {
		return "", err
	}
	hash := registration.KeyHash(key)
	if c.Annotations[registration.KeyHashAnnotation] == hash {
		return key, nil
	}
	if _, err := h.Clusters.Patch(c.Namespace, c.Name, types.MergePatchType, registration.KeyPatch(hash, false)); err != nil {
		return "", fmt.Errorf("recording the registration key of cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	return key, nil
}

// kubeconfig reads the Cluster's kubeConfigSecret (from a namespace it may take it from, and
// meant for it) and the client configuration in it.
func (h *handler) kubeconfig(ctx context.Context, c *fleet.Cluster) (*corev1.Secret, *rest.Config, error) {
	secretNS := c.Spec.KubeConfigSecretNamespace
	if secretNS == "" {
		secretNS = c.Namespace
	}
	if err := secretNamespaceAllowed(c, secretNS, h.Config.Get().KubeConfigSecretNamespaces, h.SystemNamespace); err != nil {
		return nil, nil, err
	}
	secret, err := h.Kube.CoreV1().Secrets(secretNS).Get(ctx, c.Spec.KubeConfigSecret, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("reading kubeConfigSecret %s/%s: %w", secretNS, c.Spec.KubeConfigSecret, err)
	}
	if err := secretIsFor(secret, c, h.SystemNamespace); err != nil {
		return nil, nil, err
	}
	kubeconfig := secret.Data["value"]
	if len(kubeconfig) == 0 {
		return nil, nil, fmt.Errorf("kubeConfigSecret %s/%s: key value (the kubeconfig) is empty", secretNS, c.Spec.KubeConfigSecret)
	}
	cfg, err := inlineRESTConfig(kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeConfigSecret %s/%s, key value: %w", secretNS, c.Spec.KubeConfigSecret, err)
	}
	return secret, cfg, nil
}

// agentObjects are the fleet-agent chart's objects for the Cluster with the token's values, its
// Deployment exactly as the agent's own Bundle will hold it (so that the two never undo each
// other), and the namespace they go to.
func (h *handler) agentObjects(c *fleet.Cluster, values registration.Values) ([]runtime.Object, string, error) {
	agentNS := c.Spec.AgentNamespace
	if agentNS == "" {
		agentNS = fleet.SystemNamespace
	}
	settings := h.Settings()
	chartValues := agentmanifest.Values(c, settings)
	for k, v := range map[string]any{"token": values.Token, "apiServerURL": values.APIServerURL, "apiServerCA": values.APIServerCA,
		"clusterNamespace": values.ClusterNamespace, "systemRegistrationNamespace": values.SystemRegistrationNamespace,
		"registrationKey": values.RegistrationKey, "clientID": c.Spec.ClientID, "createNamespace": true, "agentConfig": true} {
		chartValues[k] = v
	}
	manifest, err := chartrender.Render(charts.Agent, "fleet-agent", agentNS, chartValues)
	if err != nil {
		return nil, "", err
	}
	objs, err := wyaml.ToObjects(bytes.NewBufferString(manifest))
	if err != nil {
		return nil, "", err
	}
	managed, err := agentmanifest.Objects(c, agentmanifest.Settings{Image: settings.Image, Debug: settings.Debug,
		Config: withAPIServer(settings.Config, values.APIServerURL, values.APIServerCA), Proxy: settings.Proxy, ProxyCA: settings.ProxyCA}, agentNS)
	if err != nil {
		return nil, "", err
	}
	objs = slices.DeleteFunc(objs, func(o runtime.Object) bool { return o.GetObjectKind().GroupVersionKind().Kind == "Deployment" })
	return append(objs, managed...), agentNS, nil
}

// AgentConfig returns, for a Cluster, the manager's configuration as its agent is given it: for
// an imported cluster whose kubeconfig Secret names the manager's URL and CA (keys apiServerURL,
// apiServerCA), those win, as they did when the agent was installed.
func AgentConfig(secrets corecontrollers.SecretCache, systemNS string) func(*fleet.Cluster, config.Config) config.Config {
	return func(c *fleet.Cluster, cfg config.Config) config.Config {
		if c.Spec.KubeConfigSecret == "" {
			return cfg
		}
		ns := c.Spec.KubeConfigSecretNamespace
		if ns == "" {
			ns = c.Namespace
		}
		if secretNamespaceAllowed(c, ns, cfg.KubeConfigSecretNamespaces, systemNS) != nil {
			return cfg
		}
		s, err := secrets.Get(ns, c.Spec.KubeConfigSecret)
		if err != nil || secretIsFor(s, c, systemNS) != nil {
			return cfg
		}
		url, ca := cfg.APIServerURL, cfg.APIServerCA
		if u := string(s.Data[registration.KeyAPIServerURL]); u != "" {
			url = u
		}
		if v := string(s.Data[registration.KeyAPIServerCA]); v != "" {
			ca = v
		}
		return withAPIServer(cfg, url, ca)
	}
}

// withAPIServer is cfg with the manager's URL and CA as this cluster's agent is told them.
func withAPIServer(cfg config.Config, url, ca string) config.Config {
	cfg.APIServerURL, cfg.APIServerCA = url, ca
	return cfg
}

// secretNamespaceAllowed: a Cluster's kubeconfig Secret is in the Cluster's own namespace, or in
// one the administrator opened to every Cluster (config kubeConfigSecretNamespaces). Otherwise
// anyone who may create a Cluster could have the manager use a kubeconfig they cannot read.
func secretNamespaceAllowed(c *fleet.Cluster, secretNS string, allowed []string, systemNS string) error {
	// The system namespace holds the manager's own credential for its cluster (secretIsFor).
	if secretNS == c.Namespace || slices.Contains(allowed, secretNS) || secretNS == systemNS && systemNS != "" {
		return nil
	}
	return fmt.Errorf("spec.kubeConfigSecretNamespace %q (kubeConfigSecret %s/%s): a Cluster may only use a kubeconfig Secret of its own namespace %q "+
		"(or of a namespace listed in the manager's configuration, kubeConfigSecretNamespaces)", secretNS, secretNS, c.Spec.KubeConfigSecret, c.Namespace)
}

// secretIsFor refuses a kubeconfig Secret the manager wrote for another Cluster: the
// local-cluster Secret holds the manager's own credential and serves the Cluster "local" only.
func secretIsFor(s *corev1.Secret, c *fleet.Cluster, systemNS string) error {
	if s.Labels[fleet.ManagedLabel] != "true" {
		if s.Namespace == systemNS {
			return fmt.Errorf("kubeConfigSecret %s/%s: of the manager's system namespace, a Cluster may use only the credential the manager keeps for it",
				s.Namespace, s.Name)
		}
		return nil
	}
	if s.Labels[fleet.ClusterLabel] == c.Name && s.Labels[fleet.ClusterNamespaceLabel] == c.Namespace {
		return nil
	}
	return fmt.Errorf("kubeConfigSecret %s/%s holds a credential the fleet manager keeps for cluster %s/%s; it cannot be used for cluster %s/%s",
		s.Namespace, s.Name, s.Labels[fleet.ClusterNamespaceLabel], s.Labels[fleet.ClusterLabel], c.Namespace, c.Name)
}

// token makes (or finds) the Cluster's registration token and returns its values.
func (h *handler) token(ctx context.Context, c *fleet.Cluster) (registration.Values, error) {
	var v registration.Values
	name := TokenName(c.Name)
	// Created once; while its Secret is pending the Cluster comes back here.
	_, err := h.Tokens.Cache().Get(c.Namespace, name)
	if apierrors.IsNotFound(err) {
		_, err = h.Tokens.Create(&fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace},
			Spec: fleet.ClusterRegistrationTokenSpec{TTL: &metav1.Duration{Duration: TokenTTL}}})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return v, fmt.Errorf("creating registration token %s/%s: %w", c.Namespace, name, err)
	}
	s, err := h.Kube.CoreV1().Secrets(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return v, errTokenPending
	}
	if err != nil {
		return v, fmt.Errorf("reading registration token %s/%s: %w", c.Namespace, name, err)
	}
	return v, yaml.Unmarshal(s.Data[registration.ValuesKey], &v)
}
