// Package sim plays many Fleet agents against a manager in one process, as healthy agents do.
// Each simulated agent registers through a ClusterRegistrationToken with the agent's own
// registration code (internal/agent/register) and gets its own credential; with that credential it
// lists and watches only its cluster namespace's BundleDeployments and writes their status as the
// agent's pass does (the pass's own steps from internal/bdstatus: applied, ready, resource counts), and checks in
// on its Cluster's status subresource with the agent's heartbeat (internal/agent/clusterstatus). Only
// the Helm install and the downstream cluster are simulated: a deploy succeeds at once, every
// resource is ready, and the downstream cluster is an in-memory clientset with one ready node.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/fleetgo/fleet/internal/agent/clusterstatus"
	"github.com/fleetgo/fleet/internal/agent/register"
	"github.com/fleetgo/fleet/internal/registration"
	"github.com/fleetgo/fleet/internal/sealing"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// agentNamespace is where each simulated agent "runs" in its downstream cluster.
const agentNamespace = "cattle-fleet-system"

// Options say how many agents to play and how they behave.
type Options struct {
	// Values are the ClusterRegistrationToken's values (its Secret's "values" key), as the
	// fleet-agent chart puts them into the bootstrap Secret.
	Values registration.Values
	// Prefix names the agents: their clientIDs are Prefix-00000, Prefix-00001, ...
	Prefix string
	// Labels are the agents' Cluster labels (the agent ConfigMap's, as the chart's labels value).
	Labels map[string]string
	// CheckinInterval is each agent's heartbeat interval (zero: Fleet's default, 15 minutes).
	CheckinInterval time.Duration
	// Resources is how many resources each deployed bundle reports ready (default
	// DefaultResources).
	Resources int
	// Workers write BundleDeployment status for all agents together (default 32).
	Workers int
	// QPS and Burst of each agent's client on the manager (zero: the agent's 50 and 100).
	QPS   float32
	Burst int
	// GateFailure, when set, says why the agent of clientID fails the rollout gates bd asks for
	// ("" : they pass): chosen clusters fail a gate, for tests and benchmarks.
	GateFailure func(clientID string, bd *fleet.BundleDeployment) string
	// Sealing gives each agent a sealing key, reported at check-in, with which it unseals the
	// files the manager sealed to its cluster (spec.sealedFiles) before reporting them applied.
	Sealing bool
}

// Agent is one simulated agent.
type Agent struct {
	ClientID   string
	Credential *register.Credential
	bds        fleetcontrollers.BundleDeploymentClient
	clusters   fleetcontrollers.ClusterClient
	store      cache.Store
	revisions  sync.Map // BundleDeployment name -> int: the simulated Helm revision
	cancel     context.CancelFunc
	// sealPrivate and sealPublic are its sealing key (Options.Sealing).
	sealPrivate, sealPublic string
}

// Sim is the running simulation.
type Sim struct {
	o Options
	// nodes is the downstream cluster every agent's heartbeat counts the nodes of: all have one
	// Ready node. One for all: a fake clientset per agent, kept for the heartbeat after its
	// registration, made up much of the simulator's memory at 10,000 agents.
	nodes  *fake.Clientset
	mu     sync.Mutex
	agents []*Agent
	queue  workqueue.TypedRateLimitingInterface[item]
	// Writes counts status writes accepted, Conflicts those refused as stale (retried), Errors
	// the others.
	Writes, Conflicts, Errors atomic.Int64
	// Unsealed counts the sealed files the agents opened, UnsealFailures those that did not
	// open (their deployments are not reported applied).
	Unsealed, UnsealFailures atomic.Int64
	// Progress, when set, is called after each accepted status write.
	Progress func(bd *fleet.BundleDeployment)
}

type item struct {
	agent     int
	namespace string
	name      string
}

// DefaultResources is how many resources a deployed bundle reports ready unless Options say
// otherwise.
const DefaultResources = 3

// Reported is the status a simulated agent with the default options writes for bd once release
// revision rev of it is deployed: what a plain client writes to do the same writes as the agents.
func Reported(bd *fleet.BundleDeployment, rev int, now time.Time) fleet.BundleDeploymentStatus {
	return simulated(bd, bd.Status, rev, DefaultResources, "", now)
}

// New returns a simulation of no agents yet; Start runs its status writers.
func New(o Options) *Sim {
	if o.Resources <= 0 {
		o.Resources = DefaultResources
	}
	if o.Workers <= 0 {
		o.Workers = 32
	}
	return &Sim{o: o, nodes: fake.NewClientset(readyNode()), queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[item]())}
}

// Start runs the status writers until ctx ends.
func (s *Sim) Start(ctx context.Context) {
	for range s.o.Workers {
		go func() {
			for s.work(ctx) {
			}
		}()
	}
	go func() { <-ctx.Done(); s.queue.ShutDown() }()
}

// Register registers n more agents at once, each through the token as the real agent does;
// each runs (watches its BundleDeployments, checks in) as soon as it has its credential, until
// ctx ends. Register returns when all have registered (or with every error).
func (s *Sim) Register(ctx context.Context, n int) error {
	s.mu.Lock()
	first := len(s.agents)
	s.agents = append(s.agents, make([]*Agent, n)...)
	s.mu.Unlock()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a, err := s.register(ctx, fmt.Sprintf("%s-%05d", s.o.Prefix, first+i))
			if err == nil {
				s.mu.Lock()
				s.agents[first+i] = a
				s.mu.Unlock()
				err = s.run(ctx, first+i, a)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	var err error
	for e := range errs {
		err = errors.Join(err, e)
	}
	return err
}

// register plays one agent's start: a downstream cluster holding the bootstrap Secret (as the
// fleet-agent chart leaves it), then the agent's own registration.
func (s *Sim) register(ctx context.Context, clientID string) (*Agent, error) {
	v := s.o.Values
	data := map[string][]byte{registration.KeyToken: []byte(v.Token), registration.KeyAPIServerURL: []byte(v.APIServerURL),
		registration.KeyAPIServerCA: []byte(v.APIServerCA), registration.KeyClusterNamespace: []byte(v.ClusterNamespace),
		registration.KeySystemRegistrationNS: []byte(v.SystemRegistrationNamespace)}
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: types.UID(clientID)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registration.BootstrapSecret, Namespace: agentNamespace}, Data: data},
		readyNode(),
	}
	if len(s.o.Labels) > 0 {
		cfg, err := json.Marshal(map[string]any{"labels": s.o.Labels})
		if err != nil {
			return nil, err
		}
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: registration.AgentConfigMap, Namespace: agentNamespace},
			Data: map[string]string{registration.ConfigKey: string(cfg)}})
	}
	// The simple fake, without field management: NewClientset's costs 3.7 ms of CPU and 2.2 MB
	// per agent to build and write to (a REST mapper and type converter each time), about 40 s
	// of CPU and 22 GB of garbage at the start of a 10,000-agent storm, taken from the apiserver
	// on the same two cores. The agent's registration only gets, creates, updates and deletes
	// here.
	local := fake.NewSimpleClientset(objs...)
	cred, err := register.Obtain(ctx, local, register.Options{Namespace: agentNamespace})
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", clientID, err)
	}
	return &Agent{ClientID: clientID, Credential: cred}, nil
}

func readyNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// run starts the agent's watch of its BundleDeployments and its heartbeat.
func (s *Sim) run(ctx context.Context, i int, a *Agent) error {
	cfg := register.NewSession(a.Credential).RESTConfig()
	cfg.QPS, cfg.Burst = s.o.QPS, s.o.Burst
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	ff, err := fleetfactory.NewFactoryFromConfigWithOptions(cfg, &fleetfactory.FactoryOptions{Namespace: a.Credential.ClusterNamespace})
	if err != nil {
		return err
	}
	f := ff.Fleet().V1alpha1()
	a.bds, a.clusters = f.BundleDeployment(), f.Cluster()
	if s.o.Sealing {
		if a.sealPrivate, a.sealPublic, err = sealing.NewKey(); err != nil {
			return err
		}
	}
	ns := a.Credential.ClusterNamespace
	enqueue := func(obj any) {
		if bd, ok := obj.(*fleet.BundleDeployment); ok && needsStatus(bd) {
			s.queue.Add(item{agent: i, namespace: bd.Namespace, name: bd.Name})
		}
	}
	// A plain informer, not a shared one: its handler is called directly, without a shared
	// informer's per-listener buffer (about 16 KiB for each of thousands of agents).
	var run cache.Controller
	a.store, run = cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return a.bds.List(ns, o) },
			WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return a.bds.Watch(ns, o) },
		},
		ObjectType: &fleet.BundleDeployment{},
		Handler:    cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }},
	})
	actx, cancel := context.WithCancel(ctx)
	a.cancel = cancel
	go run.RunWithContext(actx)
	hb := &clusterstatus.Heartbeat{Clusters: a.clusters, ClusterNamespace: a.Credential.ClusterObjectNamespace,
		ClusterName: a.Credential.ClusterName, AgentNamespace: agentNamespace, Local: s.nodes, Interval: s.o.CheckinInterval,
		SealingKey: a.sealPublic}
	go spreadHeartbeat(actx, hb, a.ClientID)
	return nil
}

// spreadHeartbeat checks in at once, as an agent does when it starts, then runs the agent's
// heartbeat from a point of the interval drawn at random. Agents that registered together
// would otherwise check in together, in waves one interval apart, and how many check-ins a
// window of time sees would depend on where it falls; agents of a real fleet started at
// different times, so their check-ins are spread over the interval.
func spreadHeartbeat(ctx context.Context, hb *clusterstatus.Heartbeat, clientID string) {
	if err := hb.CheckIn(ctx); err != nil {
		// The heartbeat retries it as the agent does.
		logrus.WithField("agent", clientID).WithError(err).Debug("first check-in failed")
		hb.Run(ctx)
		return
	}
	interval := hb.Interval
	if interval <= 0 {
		interval = clusterstatus.DefaultInterval
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(rand.N(interval)):
	}
	hb.Run(ctx)
}

// needsStatus: the agent has not reported the deployment the spec asks for as ready.
func needsStatus(bd *fleet.BundleDeployment) bool {
	if bd.DeletionTimestamp != nil || bd.Spec.DeploymentID == "" {
		return false
	}
	return bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID || !bd.Status.Ready || bd.Status.Display.State != string(fleet.Ready) ||
		gatesPending(bd)
}

// work writes one BundleDeployment's status as the agent's pass would.
func (s *Sim) work(ctx context.Context) bool {
	it, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(it)
	s.mu.Lock()
	a := s.agents[it.agent]
	s.mu.Unlock()
	obj, exists, err := a.store.GetByKey(it.namespace + "/" + it.name)
	if err != nil || !exists {
		s.queue.Forget(it)
		return true
	}
	bd := obj.(*fleet.BundleDeployment)
	if !needsStatus(bd) {
		s.queue.Forget(it)
		return true
	}
	rev := 1
	if v, ok := a.revisions.Load(bd.Name); ok {
		rev = v.(int)
		if bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID {
			rev++
		}
	}
	if !s.unseal(a, bd) {
		s.queue.Forget(it)
		return true
	}
	cur := bd.DeepCopy()
	failure := ""
	if s.o.GateFailure != nil {
		failure = s.o.GateFailure(a.ClientID, bd)
	}
	cur.Status = simulated(bd, bd.Status, rev, s.o.Resources, failure, time.Now())
	updated, err := a.bds.UpdateStatus(cur)
	switch {
	case err == nil:
		a.revisions.Store(bd.Name, rev)
		s.Writes.Add(1)
		s.queue.Forget(it)
		if s.Progress != nil {
			s.Progress(updated)
		}
	case apierrors.IsConflict(err):
		s.Conflicts.Add(1)
		s.queue.AddRateLimited(it)
	case apierrors.IsNotFound(err) || ctx.Err() != nil:
		s.queue.Forget(it)
	default:
		s.Errors.Add(1)
		logrus.WithError(err).WithField("bundleDeployment", it.namespace+"/"+it.name).Debug("simulated agent: status write failed")
		s.queue.AddRateLimited(it)
	}
	return true
}

// Agents returns the registered agents.
func (s *Sim) Agents() []*Agent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Agent
	for _, a := range s.agents {
		if a != nil {
			out = append(out, a)
		}
	}
	return out
}

// Client is the agent's own client of its BundleDeployments on the manager (its credential).
func (a *Agent) Client() fleetcontrollers.BundleDeploymentClient { return a.bds }

// Clusters is the agent's own client of Clusters on the manager (its credential).
func (a *Agent) Clusters() fleetcontrollers.ClusterClient { return a.clusters }

// Stop ends the agent's watch and heartbeat.
func (a *Agent) Stop() {
	if a.cancel != nil {
		a.cancel()
	}
}

// RESTConfig is a client configuration with the agent's credential.
func (a *Agent) RESTConfig() *rest.Config { return register.NewSession(a.Credential).RESTConfig() }

// unseal opens the files the manager sealed to a's cluster for bd, as the agent does before it
// deploys: false when one does not open (bd is then not reported applied).
func (s *Sim) unseal(a *Agent, bd *fleet.BundleDeployment) bool {
	for _, f := range bd.Spec.SealedFiles {
		if _, err := sealing.Unseal(a.sealPrivate, sealing.Binding(bd.Namespace, bd.Name, f.Name), f.Sealed); err != nil {
			s.UnsealFailures.Add(1)
			logrus.WithError(err).WithField("bundleDeployment", bd.Namespace+"/"+bd.Name).Debug("simulated agent: unsealing failed")
			return false
		}
		s.Unsealed.Add(1)
	}
	return true
}
