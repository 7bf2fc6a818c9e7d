// Package agentmanagement keeps every cluster's agent as the manager wants it, as Fleet does:
// each Cluster whose agent has checked in gets the agent's own Bundle, fleet-agent-<cluster>,
// targeting that cluster alone and holding the agent's Deployment (package agentmanifest). The
// agent deploys it into its own cluster, so a changed configuration, a changed agent setting
// on the Cluster or a raised spec.redeployAgentGeneration redeploys the agent of every kind of
// cluster, registered or imported. The Cluster's status says what the agent was given and
// whether it runs it. (manager)
package agentmanagement

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/agentmanifest"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

const (
	// GenerationLabel on the agent's Bundle (and so on its BundleDeployment) is the Cluster's
	// spec.redeployAgentGeneration the Bundle carries.
	GenerationLabel = "fleet.cattle.io/agent-generation"
	// ConfigHashLabel is a hash of the agent's manifest in the Bundle: the Cluster's agent runs
	// the current configuration once its BundleDeployment with this label is applied.
	ConfigHashLabel = "fleet.cattle.io/agent-config-hash"
	// manifestFile is the Bundle's one resource.
	manifestFile = "agent.yaml"
)

// BundleName is the agent's own Bundle for cluster, in the Cluster's namespace.
func BundleName(cluster string) string { return names.SafeConcatName("fleet-agent", cluster) }

// Deps are what the controller reads and writes.
type Deps struct {
	Clusters          fleetcontrollers.ClusterController
	Bundles           fleetcontrollers.BundleController
	BundleDeployments fleetcontrollers.BundleDeploymentController
	// Settings are the manager's side of every agent's configuration, read on each reconcile.
	Settings func() agentmanifest.Settings
	// AgentConfig adjusts the configuration for one Cluster's agent (an imported cluster's
	// kubeconfig Secret may name the manager's URL and CA for it); nil leaves it as it is.
	AgentConfig func(*fleet.Cluster, config.Config) config.Config
}

type handler struct {
	Deps
	// rendered holds each Cluster's last agent Bundle ("namespace/name" -> *rendering): a
	// heartbeat changes only the Cluster's status, and renders nothing again.
	rendered sync.Map
}

// rendering is an agent Bundle and what it was rendered from.
type rendering struct {
	uid        types.UID
	generation int64
	// namespace is where the agent runs (the Cluster's spec or its agent's check-in says).
	namespace string
	settings  agentmanifest.Settings
	bundle    *fleet.Bundle
}

// Agents manages every Cluster's agent through its own Bundle.
type Agents struct{ h *handler }

// New is agent management over d; Register starts it.
func New(d Deps) *Agents { return &Agents{h: &handler{Deps: d}} }

// Register starts managing agents. It returns the status step saying what each Cluster's agent
// was given, which the cluster controller's status handler calls. A configuration change brings
// every Cluster back through the cluster controller (cluster.Recheck), this handler included,
// and so does a change to a Cluster's agent Bundle, which is written back when it differs.
func (a *Agents) Register(ctx context.Context) (status func(*fleet.Cluster, fleet.ClusterStatus) (fleet.ClusterStatus, error)) {
	h, d := a.h, a.h.Deps
	d.Clusters.OnChange(ctx, "agent-bundle", h.onChange)
	_, _ = d.BundleDeployments.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    h.enqueueFor,
		UpdateFunc: func(_, cur any) { h.enqueueFor(cur) },
		DeleteFunc: h.enqueueFor,
	})
	_, _ = d.Bundles.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    h.enqueueOwner,
		UpdateFunc: func(_, cur any) { h.enqueueOwner(cur) },
		DeleteFunc: h.enqueueOwner,
	})
	return h.status
}

// Wrote says whether b is, to the letter (spec and labels), the agent Bundle the manager writes
// for c now: c's agent has checked in and b is c's agent Bundle with the content the manager
// renders for it. Name, labels and owner alone are not proof, as anyone who may write Bundles
// in the namespace can set them.
func (a *Agents) Wrote(b *fleet.Bundle, c *fleet.Cluster) bool {
	if !managed(c) || b.Namespace != c.Namespace || b.Name != BundleName(c.Name) {
		return false
	}
	owner := metav1.GetControllerOf(b)
	if owner == nil || owner.UID != c.UID {
		return false
	}
	want, err := a.h.cachedBundle(c.Namespace+"/"+c.Name, c)
	if err != nil {
		return false
	}
	return equality.Semantic.DeepEqual(b.Spec, want.Spec) && equality.Semantic.DeepEqual(b.Labels, want.Labels)
}

// enqueueOwner brings a Cluster back when a Bundle by its agent Bundle's name changes, so one
// someone else changed is written back.
func (h *handler) enqueueOwner(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	b, ok := obj.(*fleet.Bundle)
	if !ok {
		return
	}
	if owner := metav1.GetControllerOf(b); owner != nil && owner.Kind == "Cluster" && b.Name == BundleName(owner.Name) {
		h.Clusters.Enqueue(b.Namespace, owner.Name)
	}
}

// enqueueFor brings a Cluster back when its agent's BundleDeployment changes.
func (h *handler) enqueueFor(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	bd, ok := obj.(*fleet.BundleDeployment)
	if !ok || bd.Labels[GenerationLabel] == "" {
		return
	}
	if ns, name := bd.Labels[fleet.ClusterNamespaceLabel], bd.Labels[fleet.ClusterLabel]; ns != "" && name != "" {
		h.Clusters.Enqueue(ns, name)
	}
}

// managed: the agent has checked in, so it runs and can deploy its own Bundle.
func managed(c *fleet.Cluster) bool {
	return c != nil && c.DeletionTimestamp == nil && !c.Status.Agent.LastSeen.IsZero()
}

func (h *handler) onChange(key string, c *fleet.Cluster) (*fleet.Cluster, error) {
	if c == nil {
		h.rendered.Delete(key)
	}
	if !managed(c) {
		return c, nil
	}
	want, err := h.cachedBundle(key, c)
	if err != nil {
		logrus.WithFields(logrus.Fields{"controller": "agent-bundle", "namespace": c.Namespace, "cluster": c.Name}).WithError(err).Error("rendering the agent")
		return c, nil
	}
	cur, err := h.Bundles.Cache().Get(want.Namespace, want.Name)
	if apierrors.IsNotFound(err) {
		if _, err := h.Bundles.Create(want.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return c, fmt.Errorf("creating the agent's bundle %s/%s: %w", want.Namespace, want.Name, err)
		}
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if equality.Semantic.DeepEqual(cur.Spec, want.Spec) && equality.Semantic.DeepEqual(cur.Labels, want.Labels) {
		return c, nil
	}
	upd := cur.DeepCopy()
	want = want.DeepCopy()
	upd.Spec, upd.Labels, upd.OwnerReferences = want.Spec, want.Labels, want.OwnerReferences
	if _, err := h.Bundles.Update(upd); err != nil {
		return c, fmt.Errorf("updating the agent's bundle %s/%s: %w", want.Namespace, want.Name, err)
	}
	return c, nil
}

// cachedBundle is the agent's own Bundle for c, rendered again only when the Cluster's spec, its
// agent's namespace or the settings for its agent changed. The result is shared: copy it before changing it.
func (h *handler) cachedBundle(key string, c *fleet.Cluster) (*fleet.Bundle, error) {
	s := h.settings(c)
	if v, ok := h.rendered.Load(key); ok {
		r := v.(*rendering)
		if r.uid == c.UID && r.generation == c.Generation && r.namespace == agentmanifest.Namespace(c) &&
			equality.Semantic.DeepEqual(r.settings, s) {
			return r.bundle, nil
		}
	}
	b, err := h.bundle(c, s)
	if err != nil {
		return nil, err
	}
	h.rendered.Store(key, &rendering{uid: c.UID, generation: c.Generation, namespace: agentmanifest.Namespace(c), settings: s, bundle: b})
	return b, nil
}

// bundle is the agent's own Bundle for c with settings s.
func (h *handler) bundle(c *fleet.Cluster, s agentmanifest.Settings) (*fleet.Bundle, error) {
	ns := agentmanifest.Namespace(c)
	objs, err := agentmanifest.Objects(c, s, ns)
	if err != nil {
		return nil, err
	}
	manifest, err := toYAML(objs)
	if err != nil {
		return nil, err
	}
	gvk := fleet.SchemeGroupVersion.WithKind("Cluster")
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: BundleName(c.Name), Namespace: c.Namespace,
			Labels: map[string]string{fleet.ManagedLabel: "true", GenerationLabel: strconv.FormatInt(c.Spec.RedeployAgentGeneration, 10),
				ConfigHashLabel: agentmanifest.Hash(string(manifest))},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, gvk)}},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns,
				// The agent never removes itself, and adopts the Deployment it was installed with
				// (by helm install fleet-agent, or by the manager through a kubeconfig).
				KeepResources: true, Helm: &fleet.HelmOptions{TakeOwnership: true}},
			Resources: []fleet.BundleResource{{Name: manifestFile, Content: string(manifest)}},
			Targets:   []fleet.BundleTarget{{ClusterName: c.Name}},
			// The CRD's default, so that the Bundle read back equals the one rendered.
			TargetCustomizationMode: "FirstMatch",
		},
	}, nil
}

// settings are the manager's side of c's agent's configuration.
func (h *handler) settings(c *fleet.Cluster) agentmanifest.Settings {
	s := h.Settings()
	if h.AgentConfig != nil {
		s.Config = h.AgentConfig(c, s.Config)
	}
	return s
}

func toYAML(objs []runtime.Object) ([]byte, error) {
	var out []byte
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		out = append(append(out, "---\n"...), data...)
	}
	return out, nil
}

// status reports what c's agent was given and whether it runs it.
func (h *handler) status(c *fleet.Cluster, s fleet.ClusterStatus) (fleet.ClusterStatus, error) {
	if !managed(c) {
		return s, nil
	}
	cfg := h.settings(c).Config.WithDefaults()
	spec := c.Spec
	s.AgentEnvVarsHash = agentmanifest.Hash(spec.AgentEnvVars)
	s.AgentTolerationsHash = agentmanifest.Hash(spec.AgentTolerations)
	s.AgentAffinityHash = agentmanifest.Hash(spec.AgentAffinity)
	s.AgentResourcesHash = agentmanifest.Hash(spec.AgentResources)
	s.AgentSchedulingCustomizationHash = agentmanifest.Hash(spec.AgentSchedulingCustomization)
	s.AgentPrivateRepoURL = spec.PrivateRepoURL
	s.AgentHostNetwork = spec.HostNetwork != nil && *spec.HostNetwork
	s.APIServerURL = cfg.APIServerURL
	s.APIServerCAHash = agentmanifest.Hash(cfg.APIServerCA)
	s.AgentTLSMode = cfg.AgentTLSMode
	s.GarbageCollectionInterval = &metav1.Duration{Duration: cfg.GarbageCollectionInterval.Duration}
	// Fleet's migrations of agents from older layouts have nothing to do here.
	s.AgentMigrated, s.AgentNamespaceMigrated, s.CattleNamespaceMigrated = true, true, true

	b, err := h.Bundles.Cache().Get(c.Namespace, BundleName(c.Name))
	if err != nil {
		s.AgentConfigChanged = true
		return s, nil
	}
	bd, err := h.BundleDeployments.Cache().Get(s.Namespace, b.Name)
	applied := err == nil && fleet.Applied(&bd.Spec, &bd.Status) &&
		bd.Labels[ConfigHashLabel] == b.Labels[ConfigHashLabel]
	s.AgentConfigChanged = !applied
	if applied {
		if gen, err := strconv.ParseInt(bd.Labels[GenerationLabel], 10, 64); err == nil {
			s.AgentDeployedGeneration = &gen
		}
	}
	return s, nil
}

// Settings reads the manager's side of the agents' configuration from the configuration in
// force.
func Settings(image string, debug bool, store *config.Store) func() agentmanifest.Settings {
	proxy, ca := config.ProxyEnv(), config.ProxyCAFromEnv()
	return func() agentmanifest.Settings {
		return agentmanifest.Settings{Image: image, Debug: debug, Config: *store.Get(), Proxy: proxy, ProxyCA: ca}
	}
}
