// Package controller wires the manager: one lasso shared factory for the fleet and core wrangler
// factories, the shared indexers, every controller's Register, configuration reload, leader
// election and the health and metrics endpoints. `fleet controller` runs it.
package controller

import (
	"context"
	"sync/atomic"
	"time"

	lassocache "github.com/rancher/lasso/pkg/cache"
	lassoclient "github.com/rancher/lasso/pkg/client"
	lassocontroller "github.com/rancher/lasso/pkg/controller"
	"github.com/rancher/wrangler/v3/pkg/apply"
	"github.com/rancher/wrangler/v3/pkg/generated/controllers/batch"
	"github.com/rancher/wrangler/v3/pkg/generated/controllers/core"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/rancher/wrangler/v3/pkg/generated/controllers/rbac"
	rbaccontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/rbac/v1"
	"github.com/rancher/wrangler/v3/pkg/schemes"
	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller/agentmanagement"
	"github.com/fleetgo/fleet/internal/controller/bootstrap"
	"github.com/fleetgo/fleet/internal/controller/bundle"
	"github.com/fleetgo/fleet/internal/controller/cluster"
	"github.com/fleetgo/fleet/internal/controller/clustergroup"
	"github.com/fleetgo/fleet/internal/controller/clusterimport"
	"github.com/fleetgo/fleet/internal/controller/content"
	"github.com/fleetgo/fleet/internal/controller/downstream"
	"github.com/fleetgo/fleet/internal/controller/events"
	"github.com/fleetgo/fleet/internal/controller/gitrepo"
	"github.com/fleetgo/fleet/internal/controller/helmop"
	"github.com/fleetgo/fleet/internal/controller/history"
	"github.com/fleetgo/fleet/internal/controller/imagescan"
	"github.com/fleetgo/fleet/internal/controller/index"
	"github.com/fleetgo/fleet/internal/controller/notify"
	"github.com/fleetgo/fleet/internal/controller/registration"
	"github.com/fleetgo/fleet/internal/controller/schedule"
	"github.com/fleetgo/fleet/internal/leader"
	"github.com/fleetgo/fleet/internal/metrics"
	"github.com/fleetgo/fleet/internal/secretuse"
	"github.com/fleetgo/fleet/internal/serve"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Options configure the manager process.
type Options struct {
	// SystemNamespace holds the config ConfigMap and the leader-election Lease.
	SystemNamespace string
	// Workers per controller.
	Workers int
	// DisableGitOps leaves GitRepos alone (no GitRepo controller, no webhook receiver): Bundles
	// are created by other means (Fleet's gitops.enabled=false).
	DisableGitOps bool
	// DisableHelmOps leaves HelmOps alone (Fleet's helmops.enabled=false).
	DisableHelmOps bool
	// Bootstrap shapes the manager's own Cluster (the fleet chart's bootstrap values).
	Bootstrap bootstrap.Options
	// LeaderElect runs the controllers only while holding the Lease, with LeaderTiming.
	LeaderElect bool
	// ColdStandby leaves the caches empty until the Lease is held; by default a replica fills
	// them while it stands by (warm.go).
	ColdStandby  bool
	LeaderTiming leader.Timing
	// HealthAddr serves /healthz and /readyz; MetricsAddr serves /metrics. Empty disables.
	HealthAddr, MetricsAddr string
	// ProfileAddr serves Go's runtime profiles under /debug/pprof/. Empty (the default) disables.
	ProfileAddr string
	// QPS and Burst limit the controllers' requests to the apiserver; zero means the defaults.
	QPS   float32
	Burst int
	// RegistrationNamespace holds agents' credentials while they pick them up; empty means
	// cattle-fleet-clusters-system.
	RegistrationNamespace string
	// WebhookAddr serves the git providers' push webhooks (empty disables).
	WebhookAddr string
	// GitJobImage, when set, runs GitRepos' clone-and-apply as Jobs of this image (holding the
	// fleet binary); empty runs them in this process.
	GitJobImage string
	// GitRuns bounds the GitRepo clone-and-apply runs in flight (in the controller's process);
	// zero means 4.
	GitRuns int
	// GitRunTimeout bounds one in-process clone-and-apply; zero means ten minutes.
	GitRunTimeout time.Duration
	// AgentImage is the agent the manager installs into clusters it imports itself, and keeps
	// every agent at when ManageAgents is set.
	AgentImage string
	// ManageAgents gives every Cluster's agent its own Bundle (fleet-agent-<cluster>) holding
	// its Deployment as the manager's configuration and the Cluster's agent settings say (needs
	// AgentImage).
	ManageAgents bool
	// AgentDebug turns on the managed agents' debug log.
	AgentDebug bool
	// StartTimeout bounds the retries of a start that fails (bootstrap, registration setup):
	// past it Run returns the error; zero means five minutes.
	StartTimeout time.Duration
	// CredentialLifetime is how long an agent's credential is valid before it must renew it;
	// zero means a day (the apiserver issues none shorter than ten minutes).
	CredentialLifetime time.Duration
	// Config holds the configuration in force, which the fleet-controller ConfigMap replaces
	// whenever it changes; nil starts from the defaults.
	Config *config.Store
	// ContentGracePeriod protects a new Content from collection until its BundleDeployments
	// refer to it; zero means content.DefaultGracePeriod.
	ContentGracePeriod time.Duration
	// Clock is what Schedules' windows are measured by; nil means time.Now (tests drive it).
	Clock func() time.Time
	// InsecureSkipHostKeyChecks trusts SSH git hosts no known_hosts names (the fleet chart's
	// insecureSkipHostKeyChecks); the ConfigMap known-hosts of SystemNamespace names the rest.
	InsecureSkipHostKeyChecks bool
	// ImageScanEnabled runs ImageScans (Fleet's --imagescan-enabled): registry scans that
	// commit newer tags to their GitRepo's repository.
	ImageScanEnabled bool
	// ShardID, when set, makes this controller the shard of that ID: it handles only the
	// GitOps objects labelled fleet.cattle.io/shard-ref=ID (shard.go) and leaves everything
	// that is one per management cluster to the unsharded controller.
	ShardID string
	// ShardNodeSelector is the nodeSelector of the GitRepo Jobs this controller runs (a shard's
	// nodes; Jobs only, with GitJobImage).
	ShardNodeSelector map[string]string
}

// Client rate defaults: generous enough that a pass over thousands of clusters is not held back
// by client-side throttling, while the apiserver's own priority and fairness protects it.
const (
	DefaultQPS   = 500
	DefaultBurst = 1000
)

// Run runs the manager until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	if o.Workers <= 0 {
		o.Workers = 50
	}
	if o.Config == nil {
		o.Config = config.NewStore(nil)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	if cfg.QPS <= 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	lock := "fleet-controller-lock"
	if o.ShardID != "" {
		// The shard's writes carry its name (the field manager of what it writes).
		cfg.UserAgent = "fleet-shard-" + o.ShardID + "/" + rest.DefaultKubernetesUserAgent()
		lock += "-shard-" + o.ShardID
		// Webhooks reach the unsharded controller, which sees every GitRepo.
		o.WebhookAddr = ""
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	health := &serve.Status{}
	serve.Endpoints(ctx, o.HealthAddr, o.MetricsAddr, o.ProfileAddr, health)
	var standby warmCaches
	lo := leader.Options{Elect: o.LeaderElect, Namespace: o.SystemNamespace, Name: lock,
		Kube: kube, Health: health, StartTimeout: o.StartTimeout, Timing: o.LeaderTiming,
		Start: func(ctx context.Context) error {
			if err := start(ctx, cfg, kube, o, standby.take()); err != nil {
				return err
			}
			logrus.Info("fleet controllers running")
			return nil
		}}
	if !o.ColdStandby {
		lo.Warm = func(ctx context.Context) { standby.fill(ctx, cfg, o) }
	}
	return leader.Run(ctx, lo)
}

// fewWorkers are the worker counts of kinds that change rarely (registration, restrictions, the
// configuration): every worker is a goroutine waiting on its queue, and fifty each would only
// hold stacks.
var fewWorkers = map[schema.GroupVersionKind]int{
	// Registration storms (thousands of agents at once) are the exception: each grant writes
	// eight objects one after another, so its time is the apiserver's latency, not the
	// manager's CPU. Sixty-four (the benchmark's plain client's parallelism) registered a storm
	// of 1,000 in 45.4, 47.1 and 57.4 s, sixteen in 59.2, 59.7 and 60.8 s (benchmarks/scale,
	// 2026-12-03, runs alternated); at 5,000 both took 269 s, the apiserver being full.
	fleet.SchemeGroupVersion.WithKind("ClusterRegistration"):      64,
	fleet.SchemeGroupVersion.WithKind("ClusterRegistrationToken"): 2,
	fleet.SchemeGroupVersion.WithKind("GitRepoRestriction"):       1,
	fleet.SchemeGroupVersion.WithKind("Policy"):                   1,
	fleet.SchemeGroupVersion.WithKind("BundleNamespaceMapping"):   1,
	corev1.SchemeGroupVersion.WithKind("ConfigMap"):               1,
}

// wiring is what the controllers are registered with.
type wiring struct {
	kube     kubernetes.Interface
	f        fleetcontrollers.Interface
	c        corecontrollers.Interface
	r        rbaccontrollers.Interface
	children apply.Apply
	recorder record.EventRecorder
	checkin  func() time.Duration
	// guard decides which Secrets objects may name (package secretuse).
	guard secretuse.Guard
	// agents is agent management, when the manager writes every Cluster's agent Bundle.
	agents *agentmanagement.Agents
	// sealKey seals the revisions kept for rollbacks (bundle.SealKey).
	sealKey []byte
	// configChanged brings every Cluster back (its agent Bundle, its staleness) once the Cluster
	// controller runs.
	configChanged atomic.Pointer[func()]
}

// start registers every controller and starts the caches and workers, on the caches filled
// while standing by when there are some (warm), else on new ones.
func start(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, o Options, warm *caches) (err error) {
	cs := warm
	if cs == nil {
		cs, err = factories(cfg, o)
	}
	if err != nil {
		return err
	}
	// A start that fails stops what it filled: a retry starts on new caches.
	defer func() {
		if err != nil {
			cs.stop()
		}
	}()
	scf, f, c, r := cs.scf, cs.f, cs.c, cs.r
	children, err := applier(cfg, c, r)
	if err != nil {
		return err
	}
	sharded := o.ShardID != ""
	if !sharded {
		if err := bootstrap.Run(ctx, o.SystemNamespace, o.Bootstrap, cfg, kube, f); err != nil {
			return err
		}
	}
	w := &wiring{kube: kube, f: f, c: c, r: r, children: children, recorder: events.NewRecorder(ctx, kube, "fleet-controller"),
		checkin: func() time.Duration { return o.Config.Get().AgentCheckinInterval.Duration },
		guard:   secretuse.ForClusters(f.Cluster().Cache())}
	index.Register(f.BundleDeployment())
	watchConfig(ctx, c, o.SystemNamespace, o.Config, &w.configChanged)
	if w.sealKey, err = bundle.SealKey(ctx, kube, o.SystemNamespace); err != nil {
		return err
	}
	startBundles(ctx, w, o)
	if !o.DisableGitOps {
		if err := startGitOps(ctx, cfg, scf, w, o); err != nil {
			return err
		}
	}
	bundles, err := apply.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if !o.DisableHelmOps {
		helmop.Register(ctx, helmop.Deps{HelmOps: f.HelmOp(), Bundles: f.Bundle(), BundleDeployments: f.BundleDeployment(),
			Secrets: c.Secret().Cache(), Apply: bundles.WithSetOwnerReference(false, false), Policies: f.Policy(), Guard: w.guard})
	}
	observe(ctx, w, o)
	downstream.Register(ctx, kube, f.BundleDeployment(), c.Secret(), f.Cluster(), w.guard, w.recorder)
	if !sharded {
		if err := startManagement(ctx, w, o); err != nil {
			return err
		}
	}
	return cs.start(ctx, o.Workers)
}

// caches are the controller's shared factory and the fleet, core and rbac groups on it.
type caches struct {
	scf lassocontroller.SharedControllerFactory
	f   fleetcontrollers.Interface
	c   corecontrollers.Interface
	r   rbaccontrollers.Interface
	// cancel ends the informers filled while standing by (nil when start made them: they end
	// with its ctx).
	cancel context.CancelFunc
	// filled are the kinds filled while standing by.
	filled map[schema.GroupVersionKind]bool
}

// start starts the caches (those filled while standing by are) and the controllers.
func (cs *caches) start(ctx context.Context, workers int) error {
	if err := cs.scf.Start(ctx, workers); err != nil {
		return err
	}
	if cs.filled != nil {
		cs.check()
	}
	return nil
}

// stop ends the informers filled while standing by, if any.
func (cs *caches) stop() {
	if cs.cancel != nil {
		cs.cancel()
	}
}

// factories are the controller's shared factory and the fleet, core and rbac groups on it, their
// caches trimmed to what the controllers read.
func factories(cfg *rest.Config, o Options) (*caches, error) {
	scf, err := controllerFactory(cfg, o)
	if err != nil {
		return nil, err
	}
	ff, err := fleetfactory.NewFactoryFromConfigWithOptions(cfg, &fleetfactory.FactoryOptions{SharedControllerFactory: scf})
	if err != nil {
		return nil, err
	}
	cf, err := core.NewFactoryFromConfigWithOptions(cfg, &core.FactoryOptions{SharedControllerFactory: scf})
	if err != nil {
		return nil, err
	}
	rf, err := rbac.NewFactoryFromConfigWithOptions(cfg, &rbac.FactoryOptions{SharedControllerFactory: scf})
	if err != nil {
		return nil, err
	}
	return &caches{scf: scf, f: ff.Fleet().V1alpha1(), c: cf.Core().V1(), r: rf.Rbac().V1()}, trimCaches(scf.SharedCacheFactory(), o)
}

// agentBundle is how the bundle controller tells the manager's own agent Bundles (exempt from
// GitRepoRestrictions) from forgeries: nil where the manager writes none (a shard, or agents
// not managed), so no Bundle is exempt.
func (w *wiring) agentBundle(o Options) func(*fleet.Bundle, *fleet.Cluster) bool {
	if o.ShardID != "" || !o.ManageAgents || o.AgentImage == "" {
		return nil
	}
	w.agents = agentmanagement.New(agentmanagement.Deps{Clusters: w.f.Cluster(), Bundles: w.f.Bundle(),
		BundleDeployments: w.f.BundleDeployment(), Settings: agentmanagement.Settings(o.AgentImage, o.AgentDebug, o.Config),
		AgentConfig: clusterimport.AgentConfig(w.c.Secret().Cache(), o.SystemNamespace)})
	return w.agents.Wrote
}

// startBundles registers the bundle controller and the deployment history's recorder: each
// controller (a shard, or the unsharded one) records the history of its own Bundles.
func startBundles(ctx context.Context, w *wiring, o Options) {
	f, c := w.f, w.c
	bundle.Register(ctx, bundle.Deps{
		Bundles: f.Bundle(), BundleDeployments: f.BundleDeployment(), Clusters: f.Cluster(),
		ClusterGroups: f.ClusterGroup(), Contents: f.Content(),
		Mappings: f.BundleNamespaceMapping(), Namespaces: c.Namespace().Cache(), CheckinInterval: w.checkin, Policies: f.Policy(),
		Restrictions: f.GitRepoRestriction(), Secrets: c.Secret().Cache(), SecretWriter: c.Secret(), GitRepos: f.GitRepo().Cache(), Guard: w.guard, SystemNamespace: o.SystemNamespace,
		Rollouts: f.Rollout(), RolloutPolicies: f.RolloutPolicy(), HelmOps: f.HelmOp().Cache(), AgentBundle: w.agentBundle(o),
		Apply: w.children, SealKey: w.sealKey, Histories: f.BundleHistory(), Revisions: f.BundleRevision(),
	})
	history.Register(ctx, history.Deps{BundleDeployments: f.BundleDeployment(), Histories: f.BundleHistory(), Revisions: f.BundleRevision(),
		Bundles: f.Bundle().Cache(), Secrets: c.Secret().Cache(), SecretWriter: c.Secret(), SealKey: w.sealKey, Mine: ShardSelector(o.ShardID),
		Retention: func() (time.Duration, int) {
			c := o.Config.Get()
			return c.HistoryRetention.Duration, c.HistoryRevisions
		}})
}

// startManagement registers what is one per management cluster, the unsharded controller's
// alone: registration, Clusters and their groups, the collection of Contents, and the notifier
// (which reads every shard's GitRepos and Rollouts: one message per transition, whatever the
// number of shards).
func startManagement(ctx context.Context, w *wiring, o Options) error {
	f := w.f
	if o.RegistrationNamespace == "" {
		o.RegistrationNamespace = fleet.ClustersSystemNamespace
	}
	if err := registration.Register(ctx, registration.Deps{Kube: w.kube, Apply: w.children, Tokens: f.ClusterRegistrationToken(),
		ClusterRegistrations: f.ClusterRegistration(), Clusters: f.Cluster(), ClusterGroups: f.ClusterGroup().Cache(), Secrets: w.c.Secret().Cache(),
		RoleBindings: w.r.RoleBinding().Cache(), RegistrationNamespace: o.RegistrationNamespace, CredentialLifetime: o.CredentialLifetime, Recorder: w.recorder, Config: o.Config}); err != nil {
		return err
	}
	startClusters(ctx, w, o)
	content.Register(ctx, f.Content(), f.BundleDeployment(), f.Rollout(), f.BundleRevision(), o.ContentGracePeriod)
	clustergroup.Register(ctx, f.ClusterGroup(), f.Cluster())
	notify.Register(ctx, notify.Deps{Alerts: f.Alert(), Providers: f.AlertProvider(), GitRepos: f.GitRepo(), Bundles: f.Bundle(),
		HelmOps: f.HelmOp(), Clusters: f.Cluster(), Rollouts: f.Rollout(), Secrets: w.c.Secret().Cache(), Guard: w.guard})
	return nil
}

// startClusters registers the Cluster controller and the parts of a Cluster's status other
// controllers give it as steps (import, agent management, schedules), so it is written once.
func startClusters(ctx context.Context, w *wiring, o Options) {
	kube, f, c, children, checkin := w.kube, w.f, w.c, w.children, w.checkin
	settings := agentmanagement.Settings(o.AgentImage, o.AgentDebug, o.Config)
	steps := []cluster.StatusStep{clusterimport.Register(ctx, clusterimport.Deps{Kube: kube, Clusters: f.Cluster(),
		Tokens: f.ClusterRegistrationToken(), Settings: settings, Config: o.Config, SystemNamespace: o.SystemNamespace})}
	if w.agents != nil {
		steps = append(steps, w.agents.Register(ctx))
	}
	// A new configuration brings every Cluster back: its agent Bundle (agent management's
	// handler) and its staleness (the check-in interval) may change.
	recheck := cluster.Recheck(f.Cluster())
	w.configChanged.Store(&recheck)
	steps = append(steps, schedule.Register(ctx, schedule.Deps{Schedules: f.Schedule(), Clusters: f.Cluster(),
		ClusterGroups: f.ClusterGroup().Cache(), Now: o.Clock}))
	cluster.Register(ctx, cluster.Deps{Clusters: f.Cluster(), BundleDeployments: f.BundleDeployment(), Namespaces: c.Namespace(),
		CheckinInterval: checkin, Revoke: registration.Revoke(ctx, children, kube), StatusSteps: steps})
}

// controllerFactory makes the shared controllers and caches, with the few kinds that change
// rarely on fewer workers and the Secret and ConfigMap caches narrowed to what the manager reads.
func controllerFactory(cfg *rest.Config, o Options) (lassocontroller.SharedControllerFactory, error) {
	t := tweaks()
	shardTweaks(o.ShardID, t)
	clients, err := lassoclient.NewSharedClientFactory(cfg, &lassoclient.SharedClientFactoryOptions{Scheme: schemes.All})
	if err != nil {
		return nil, err
	}
	caches := lassocache.NewSharedCachedFactory(&leadingMetaClients{SharedClientFactory: clients, scheme: schemes.All}, &lassocache.SharedCacheFactoryOptions{
		// The only ConfigMap the manager reads is its configuration.
		KindNamespace: map[schema.GroupVersionKind]string{corev1.SchemeGroupVersion.WithKind("ConfigMap"): o.SystemNamespace},
		KindTweakList: t,
	})
	scf := lassocontroller.NewSharedControllerFactory(caches, &lassocontroller.SharedControllerFactoryOptions{DefaultWorkers: o.Workers, KindWorkers: fewWorkers})
	return shardFactory{SharedControllerFactory: scf, id: o.ShardID}, nil
}

// tweaks narrow the caches of kinds the manager writes as apply sets (identities, roles, Jobs) to
// the objects of such sets: the cluster's other ServiceAccounts, roles and Jobs are not its own.
func tweaks() map[schema.GroupVersionKind]lassocache.TweakListOptionsFunc {
	ownOnly := func(lo *metav1.ListOptions) { lo.LabelSelector = apply.LabelHash }
	t := map[schema.GroupVersionKind]lassocache.TweakListOptionsFunc{
		// Secrets are cached for GitRepos' credentials and the sets' Secrets: Helm's release
		// records and token Secrets, the bulk of a cluster's Secrets, are none of those; nor are
		// the BundleDeployments' options Secrets (one per deployment with values), which the
		// bundle controller writes by name (bdvalues.go).
		corev1.SchemeGroupVersion.WithKind("Secret"): func(lo *metav1.ListOptions) {
			lo.FieldSelector = "type!=helm.sh/release.v1,type!=" + string(corev1.SecretTypeServiceAccountToken) +
				",type!=" + fleet.SecretTypeBundleDeploymentOptions
		},
		batchv1.SchemeGroupVersion.WithKind("Job"): ownOnly,
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		t[rbacv1.SchemeGroupVersion.WithKind(kind)] = ownOnly
	}
	// Nor do they hold the agent identity namespace: its ServiceAccounts, Roles and bindings,
	// several per registered cluster, are written and deleted by name (registration/direct.go).
	ownOutsideIdentities := func(lo *metav1.ListOptions) {
		ownOnly(lo)
		lo.FieldSelector = registration.IdentityNamespaceUncached
	}
	t[corev1.SchemeGroupVersion.WithKind("ServiceAccount")] = ownOutsideIdentities
	for _, kind := range []string{"Role", "RoleBinding"} {
		t[rbacv1.SchemeGroupVersion.WithKind(kind)] = ownOutsideIdentities
	}
	return t
}

// applier applies the objects controllers derive from their own (identities, roles, credentials)
// as wrangler apply sets, reading what exists from the shared caches.
func applier(cfg *rest.Config, c corecontrollers.Interface, r rbaccontrollers.Interface) (apply.Apply, error) {
	a, err := apply.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return a.WithCacheTypes(c.ServiceAccount(), c.Secret(), r.Role(), r.RoleBinding(), r.ClusterRole(), r.ClusterRoleBinding()).
		WithSetOwnerReference(false, false), nil
}

// trimCaches sets the transforms that keep the caches small (transform.go), on the informers
// themselves: no controller is made before the manager leads. The identities and roles of every
// registered cluster are cached too (the apply sets read them): at 10,000 clusters their
// server-side-apply bookkeeping alone was a large part of the manager's heap.
func trimCaches(cf lassocache.SharedCacheFactory, o Options) error {
	trims := map[schema.GroupVersionKind]cache.TransformFunc{
		fleet.SchemeGroupVersion.WithKind("BundleDeployment"):    slimDeployment,
		fleet.SchemeGroupVersion.WithKind("Content"):             slimContent,
		fleet.SchemeGroupVersion.WithKind("Bundle"):              stripManagedFields,
		fleet.SchemeGroupVersion.WithKind("Cluster"):             slimCluster,
		fleet.SchemeGroupVersion.WithKind("ClusterGroup"):        stripManagedFields,
		fleet.SchemeGroupVersion.WithKind("GitRepo"):             stripManagedFields,
		corev1.SchemeGroupVersion.WithKind("Namespace"):          slimOwned,
		corev1.SchemeGroupVersion.WithKind("Secret"):             slimOwned,
		corev1.SchemeGroupVersion.WithKind("ServiceAccount"):     slimOwned,
		rbacv1.SchemeGroupVersion.WithKind("Role"):               slimOwned,
		rbacv1.SchemeGroupVersion.WithKind("RoleBinding"):        slimOwned,
		rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"): slimOwned,
	}
	if o.ShardID == "" {
		// Registrations are the unsharded controller's only (a shard does not cache them).
		trims[fleet.SchemeGroupVersion.WithKind("ClusterRegistration")] = slimOwned
	}
	for gvk, trim := range trims {
		informer, err := cf.ForKind(gvk)
		if err != nil {
			return err
		}
		if err := informer.SetTransform(trim); err != nil {
			return err
		}
	}
	return nil
}

// watchConfig puts the fleet-controller ConfigMap's configuration in force whenever it changes
// (an invalid one is logged and ignored), then calls changed when set.
func watchConfig(ctx context.Context, c corecontrollers.Interface, systemNamespace string, store *config.Store, changed *atomic.Pointer[func()]) {
	c.ConfigMap().OnChange(ctx, "config-reload", func(_ string, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		if cm == nil || cm.Namespace != systemNamespace || cm.Name != config.ConfigMapName {
			return cm, nil
		}
		parsed, err := config.Parse(cm.Data[config.Key])
		if err != nil {
			// A user error: keep the configuration in force and say why.
			logrus.WithError(err).Warn("ignoring invalid configuration")
			return cm, nil
		}
		store.Set(parsed)
		logrus.Info("configuration reloaded")
		if f := changed.Load(); f != nil {
			(*f)()
		}
		return cm, nil
	})
}

// observe exports the status metrics from the caches and records the status transitions as
// Events.
func observe(ctx context.Context, w *wiring, o Options) {
	f := w.f
	mine := ShardSelector(o.ShardID)
	caches := &metrics.Caches{Bundles: f.Bundle().Cache(), BundleDeployments: f.BundleDeployment().Cache(), Shard: mine}
	ed := events.Deps{Recorder: w.recorder, Bundles: f.Bundle(), BundleDeployments: f.BundleDeployment(), Shard: mine}
	if o.ShardID == "" {
		// Clusters and their groups are the unsharded controller's.
		caches.Clusters, caches.ClusterGroups, ed.Clusters = f.Cluster().Cache(), f.ClusterGroup().Cache(), f.Cluster()
	}
	if !o.DisableGitOps {
		caches.GitRepos, ed.GitRepos = f.GitRepo().Cache(), f.GitRepo()
	}
	metrics.Export(ctx, caches)
	events.Register(ed)
}

// startGitOps registers the GitRepo controller and the git providers' webhook receiver.
func startGitOps(ctx context.Context, cfg *rest.Config, scf lassocontroller.SharedControllerFactory, w *wiring, o Options) error {
	kube, f, c, children := w.kube, w.f, w.c, w.children
	var jobs *gitrepo.JobRunner
	if o.GitJobImage != "" {
		bf, err := batch.NewFactoryFromConfigWithOptions(cfg, &batch.FactoryOptions{SharedControllerFactory: scf})
		if err != nil {
			return err
		}
		job := bf.Batch().V1().Job()
		// A Job's ConfigMap is not cached (the ConfigMap cache holds the system namespace only): the
		// set lists ConfigMaps from the apiserver, once per new commit.
		jobs = &gitrepo.JobRunner{Jobs: job, Image: o.GitJobImage, NodeSelector: o.ShardNodeSelector, ProxyCA: config.ProxyCAFromEnv(),
			Apply: children.WithCacheTypes(job).WithGVK(corev1.SchemeGroupVersion.WithKind("ConfigMap")).WithDynamicLookup()}
	}
	gitrepo.Register(ctx, gitrepo.Deps{Kube: kube, GitRepos: f.GitRepo(), Bundles: f.Bundle(), BundleDeployments: f.BundleDeployment(),
		Clusters: f.Cluster(), Runs: o.GitRuns, RunTimeout: o.GitRunTimeout, CheckinInterval: w.checkin, Config: o.Config,
		JobRunner: jobs, Restrictions: f.GitRepoRestriction(), Secrets: c.Secret(), Policies: f.Policy(), ImageScans: f.ImageScan(),
		Guard: w.guard, KnownHosts: &gitrepo.KnownHosts{Kube: kube, Namespace: o.SystemNamespace, Insecure: o.InsecureSkipHostKeyChecks}})
	serve.Run(ctx, o.WebhookAddr, &gitrepo.Webhook{Kube: kube, GitRepos: f.GitRepo(), SystemNamespace: o.SystemNamespace})
	if o.ImageScanEnabled {
		imagescan.Register(ctx, imagescan.Deps{ImageScans: f.ImageScan(), GitRepos: f.GitRepo().Cache(), Secrets: c.Secret().Cache(),
			Guard: w.guard})
	}
	return nil
}
