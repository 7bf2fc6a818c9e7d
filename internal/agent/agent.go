// Package agent wires the agent that runs in every downstream cluster: a namespace-restricted
// factory on the manager for its BundleDeployments, the deployer and monitor, the heartbeat,
// release garbage collection, leader election in its own cluster and its health and metrics
// endpoints. `fleet agent` runs it.
package agent

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"

	lassocache "github.com/rancher/lasso/pkg/cache"
	lassocontroller "github.com/rancher/lasso/pkg/controller"
	"github.com/rancher/wrangler/v3/pkg/schemes"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/agent/clusterstatus"
	"github.com/fleetgo/fleet/internal/agent/deployer"
	"github.com/fleetgo/fleet/internal/agent/gates"
	"github.com/fleetgo/fleet/internal/agent/monitor"
	"github.com/fleetgo/fleet/internal/agent/register"
	"github.com/fleetgo/fleet/internal/agent/sealkey"
	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/leader"
	"github.com/fleetgo/fleet/internal/metrics"
	"github.com/fleetgo/fleet/internal/render"
	"github.com/fleetgo/fleet/internal/serve"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Options configure the agent process.
type Options struct {
	// Namespace is the downstream namespace the agent runs in (leader Lease, impersonated
	// ServiceAccounts).
	Namespace string
	// ClusterNamespace is the namespace on the manager holding this cluster's
	// BundleDeployments.
	ClusterNamespace string
	// ClusterName and ClusterObjectNamespace name this cluster's Cluster object on the manager
	// (for the heartbeat); empty ClusterName disables the heartbeat.
	ClusterName, ClusterObjectNamespace string
	// CheckinInterval, MonitorInterval and GCInterval; zero means their defaults.
	CheckinInterval, MonitorInterval, GCInterval time.Duration
	// Workers deploying BundleDeployments in parallel.
	Workers int
	// LeaderElect runs the agent only while holding a Lease in its own cluster, with LeaderTiming.
	LeaderElect  bool
	LeaderTiming leader.Timing
	// HealthAddr serves /healthz and /readyz; MetricsAddr serves /metrics. Empty disables.
	HealthAddr, MetricsAddr string
	// ProfileAddr serves Go's runtime profiles under /debug/pprof/. Empty (the default) disables.
	ProfileAddr string
}

// Local client rates: Helm builds and applies many objects per release, and the agent's own
// cluster is not shared with thousands of other clients, so client-side throttling would only
// slow deploys down.
//
// Manager client rates: the agent's writes there are its own BundleDeployments' status (about
// two per rollout) and its heartbeat, and the manager's API Priority and Fairness shares the
// server between agents. client-go's default of 5 per second would hold a rollout of fifty
// bundles back by twenty seconds.
const (
	localQPS      = 200
	localBurst    = 400
	upstreamQPS   = 50
	upstreamBurst = 100
)

// RunRegistered runs the agent with its own credential until ctx ends: the one it stored, or one
// obtained by registering with the bootstrap token Secret first. The credential is renewed every
// renewEvery (zero: hourly, or after a third of its lifetime).
func RunRegistered(ctx context.Context, local *rest.Config, o Options, reg register.Options, renewEvery time.Duration) error {
	kube, err := kubernetes.NewForConfig(local)
	if err != nil {
		return err
	}
	// Health is served while the agent registers too: alive, not ready.
	health := endpoints(ctx, o)
	reg.Namespace = o.Namespace
	cred, err := register.Obtain(ctx, kube, reg)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if moved(cred, reg) {
		// The manager is somewhere else now: keep the new place with the credential.
		if err := register.Store(ctx, kube, o.Namespace, cred); err != nil {
			logrus.WithError(err).Warn("storing the manager's new address with the credential")
		}
	}
	s := register.NewSession(cred)
	s.TLSMode = reg.TLSMode
	go s.Renew(ctx, kube, o.Namespace, renewEvery)
	o.ClusterNamespace, o.ClusterName, o.ClusterObjectNamespace = cred.ClusterNamespace, cred.ClusterName, cred.ClusterObjectNamespace
	return run(ctx, s.RESTConfig(), local, o, health)
}

// moved applies the manager's address given to the agent (reg.APIServerURL, reg.APIServerCA)
// to cred and says whether that changed it.
func moved(cred *register.Credential, reg register.Options) bool {
	changed := false
	if reg.APIServerURL != "" && reg.APIServerURL != cred.APIServerURL {
		cred.APIServerURL, changed = reg.APIServerURL, true
	}
	if reg.APIServerCA != "" && reg.APIServerCA != cred.APIServerCA {
		cred.APIServerCA, changed = reg.APIServerCA, true
	}
	return changed
}

// endpoints serves the agent's health, metrics and profiles until ctx ends.
func endpoints(ctx context.Context, o Options) *serve.Status {
	metrics.RegisterAgent()
	health := &serve.Status{}
	serve.Endpoints(ctx, o.HealthAddr, o.MetricsAddr, o.ProfileAddr, health)
	return health
}

// Run runs the agent until ctx ends. upstream reaches the manager, local the agent's cluster.
func Run(ctx context.Context, upstream, local *rest.Config, o Options) error {
	return run(ctx, upstream, local, o, endpoints(ctx, o))
}

func run(ctx context.Context, upstream, local *rest.Config, o Options, health *serve.Status) error {
	if o.ClusterNamespace == "" {
		return fmt.Errorf("the cluster namespace on the manager is required")
	}
	if o.Workers <= 0 {
		o.Workers = 50
	}
	local = rest.CopyConfig(local)
	local.QPS, local.Burst = localQPS, localBurst
	upstream = rest.CopyConfig(upstream)
	if upstream.QPS == 0 && upstream.RateLimiter == nil {
		upstream.QPS, upstream.Burst = upstreamQPS, upstreamBurst
	}
	kube, err := kubernetes.NewForConfig(local)
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, kube, o.Namespace); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return leader.Run(ctx, leader.Options{Elect: o.LeaderElect, Namespace: o.Namespace, Name: "fleet-agent-lock", Kube: kube,
		Health: health, Timing: o.LeaderTiming, Start: func(ctx context.Context) error {
			if err := start(ctx, upstream, local, kube, o); err != nil {
				return err
			}
			logrus.WithField("namespace", o.ClusterNamespace).Info("fleet agent running")
			return nil
		}})
}

func start(ctx context.Context, upstream, local *rest.Config, kube kubernetes.Interface, o Options) error {
	scf, err := lassocontroller.NewSharedControllerFactoryFromConfigWithOptions(upstream, schemes.All,
		&lassocontroller.SharedControllerFactoryOptions{DefaultWorkers: o.Workers,
			// The agent may only read its own cluster namespace on the manager.
			CacheOptions: &lassocache.SharedCacheFactoryOptions{DefaultNamespace: o.ClusterNamespace}})
	if err != nil {
		return err
	}
	ff, err := fleetfactory.NewFactoryFromConfigWithOptions(upstream, &fleetfactory.FactoryOptions{
		Namespace: o.ClusterNamespace, SharedControllerFactory: scf})
	if err != nil {
		return err
	}
	f := ff.Fleet().V1alpha1()
	dep, err := helmdeployer.New(local, o.Namespace)
	if err != nil {
		return err
	}
	// Releases a Fleet agent (or this agent before it kept a ledger) made here for this
	// cluster's BundleDeployments become this agent's to upgrade and collect.
	if n, err := adoptReleases(ctx, f.BundleDeployment(), o.ClusterNamespace, dep); err != nil {
		logrus.WithError(err).Warn("adopting the releases made before this agent's ledger")
	} else if n > 0 {
		logrus.WithField("releases", n).Info("adopted the releases made before this agent's ledger")
	}
	go func() {
		if err := dep.Warm(); err != nil {
			logrus.WithError(err).Debug("reading ahead for the first deploy")
		}
	}()
	disc, mapper, err := dep.Discovery()
	if err != nil {
		return err
	}
	bds := f.BundleDeployment()
	changes := deployer.NewChanges(bds, o.ClusterNamespace)
	mon, err := monitor.New(ctx, local, disc, mapper, changes.Changed)
	if err != nil {
		return err
	}
	up, err := kubernetes.NewForConfig(upstream)
	if err != nil {
		return err
	}
	sealingKey := sealingKeyOf(ctx, kube, o.Namespace)
	deployer.Register(ctx, deployer.Deps{Sealing: sealingKey, BundleDeployments: bds, Contents: f.Content(), Deployer: dep, Monitor: mon,
		Namespace: o.ClusterNamespace, MonitorInterval: o.MonitorInterval, Changes: changes, Upstream: up, Gates: gates.New(dep.BundleClient, gates.Options{AllowLocal: os.Getenv(gates.AllowLocalEnv) == "true"})})
	if err := scf.Start(ctx, o.Workers); err != nil {
		return err
	}
	go deployer.RunGC(ctx, o.GCInterval, bds, o.ClusterNamespace, dep)
	if o.ClusterName != "" {
		hb := &clusterstatus.Heartbeat{Clusters: f.Cluster(), ClusterNamespace: o.ClusterObjectNamespace,
			ClusterName: o.ClusterName, AgentNamespace: o.Namespace, Local: kube, Interval: o.CheckinInterval, SealingKey: sealingKey.Public}
		go hb.Run(ctx)
	}
	return nil
}

// sealingKeyOf is the agent's sealing key. Files sealed to this cluster need it; without one,
// the rest deploys as before.
func sealingKeyOf(ctx context.Context, kube kubernetes.Interface, ns string) deployer.SealingKey {
	var k deployer.SealingKey
	var err error
	if k.Private, k.Public, err = sealkey.Ensure(ctx, kube, ns); err != nil {
		logrus.WithError(err).Warn("no sealing key: the bundles' secret files cannot be sealed to this cluster")
	}
	return k
}

// ensureNamespace creates the agent's namespace, retrying with backoff while its cluster's
// apiserver cannot be reached (an agent that exits would only crash-loop); it gives up on
// errors a retry cannot fix, such as a forbidden request.
func ensureNamespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: time.Second, Factor: 2, Cap: time.Minute, Steps: math.MaxInt32},
		func(ctx context.Context) (bool, error) {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			switch {
			case err == nil || apierrors.IsAlreadyExists(err):
				return true, nil
			case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err):
				return false, err
			}
			last = err
			logrus.WithError(err).WithField("namespace", name).Warn("cannot reach this cluster's apiserver yet; retrying")
			return false, nil
		})
	if err != nil {
		if last != nil && ctx.Err() != nil {
			err = last
		}
		return fmt.Errorf("creating agent namespace %s: %w", name, err)
	}
	return nil
}

// adoptReleases enters into the agent's ledger the releases of this cluster's BundleDeployments
// that have none yet.
func adoptReleases(ctx context.Context, bds fleetcontrollers.BundleDeploymentClient, ns string, dep *helmdeployer.Deployer) (int, error) {
	list, err := bds.List(ns, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	expected := make([]helmdeployer.Expected, 0, len(list.Items))
	for i := range list.Items {
		bd := &list.Items[i]
		opts := &bd.Spec.Options
		expected = append(expected, helmdeployer.Expected{Namespace: render.Namespace(opts), Name: render.ReleaseName(opts, bd.Name),
			BundleID: bd.Name, DeleteNamespace: opts.DeleteNamespace, ServiceAccount: opts.ServiceAccount})
	}
	return dep.AdoptReleases(ctx, expected)
}
