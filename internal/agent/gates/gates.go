// Package gates evaluates, inside the agent's own cluster, the health gates a progressive
// rollout asks of a BundleDeployment (its fleetgo.io/rollout-gates annotation): an HTTP GET, a
// Job that must succeed, a Prometheus query compared with a threshold. Each gate's result is a
// condition of the BundleDeployment's status ("Gate/<name>": True passed, False failed, Unknown
// pending, the message says why), which the manager reads to move the rollout on or halt it.
// Nothing needs inbound access to the cluster. (agent)
package gates

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/rollout"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// outcome is one check's result.
type outcome int

const (
	passed outcome = iota
	failed
	// pending: not decided yet (a Job still running).
	pending
	// broken: failed for good (a Job that failed): no more tries.
	broken
)

// ClientFor is the clientset to act as downstream for a bundle naming serviceAccount.
type ClientFor func(ctx context.Context, serviceAccount string) (kubernetes.Interface, error)

// MaxChecksInFlight is how many gate checks one agent (one cluster) runs at once; a check that
// finds no free slot waits for the next pass.
const MaxChecksInFlight = 4

// AllowLocalEnv, set to "true" in the agent's environment (a Cluster's agentEnvVars), lets
// httpGet and prometheus gates reach loopback and link-local addresses (the node itself, cloud
// metadata services), which they are refused otherwise.
const AllowLocalEnv = "FLEET_GATES_ALLOW_LOCAL"

// Options of a Checker.
type Options struct {
	// AllowLocal lets HTTP gates reach loopback and link-local addresses.
	AllowLocal bool
}

// Checker runs the gates of a cluster's BundleDeployments, off the deploy workers: a pass
// starts a check (at most MaxChecksInFlight at once) and returns; the check's end brings the
// BundleDeployment back (Notify), and the next pass records its result.
type Checker struct {
	clientFor ClientFor
	http      *http.Client
	slots     chan struct{}
	// clock is the time checks are scheduled by.
	clock func() time.Time
	mu    sync.Mutex
	// notify brings a BundleDeployment back once one of its checks ended.
	notify func(name string)
	// fails counts failed checks in a row, by "bundledeployment/deploymentID/gate".
	fails map[string]int
	// runs are the checks of each gate, by the same key.
	runs map[string]*run
}

// run is the state of one gate's checks.
type run struct {
	running bool
	started time.Time
	// done: a result the next pass records.
	done bool
	out  outcome
	msg  string
}

// New returns a Checker whose Jobs are made in the agent's cluster as the bundle deploys: as its
// serviceAccount when it names one (clientFor), so a gate may do no more than the bundle. Its
// HTTP gates go straight to their address (no proxy), follow no redirect, and reach no loopback
// or link-local address unless o allows it.
func New(clientFor ClientFor, o Options) *Checker {
	return &Checker{clientFor: clientFor, http: httpClient(o.AllowLocal), slots: make(chan struct{}, MaxChecksInFlight),
		clock: time.Now, fails: map[string]int{}, runs: map[string]*run{}}
}

// Notify sets what brings a BundleDeployment back when one of its checks ended.
func (c *Checker) Notify(f func(name string)) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notify = f
}

// Clear drops every gate result from a status: a new deployment is gated afresh.
func Clear(status *fleet.BundleDeploymentStatus) {
	kept := status.Conditions[:0]
	for _, c := range status.Conditions {
		if !strings.HasPrefix(c.Type, fleet.GateConditionPrefix) {
			kept = append(kept, c)
		}
	}
	status.Conditions = kept
}

// Evaluate records the results of bd's gate checks that ended, starts the checks that are due
// once its deployment is applied and ready, and returns how soon to look again (zero when bd
// has no gates). It never waits for a check.
func (c *Checker) Evaluate(ctx context.Context, bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus, now time.Time) time.Duration {
	raw := bd.Annotations[fleet.RolloutGatesAnnotation]
	if raw == "" || c == nil {
		return 0
	}
	var gates []fleet.HealthGate
	if err := json.Unmarshal([]byte(raw), &gates); err != nil {
		fleet.SetCondition(&status.Conditions, fleet.GateCondition("gates"), corev1.ConditionFalse, "Invalid",
			fmt.Sprintf("annotation %s: %v", fleet.RolloutGatesAnnotation, err), now)
		return 0
	}
	if len(gates) > rollout.MaxGates {
		fleet.SetCondition(&status.Conditions, fleet.GateCondition("gates"), corev1.ConditionFalse, "Invalid",
			fmt.Sprintf("annotation %s: %d gates, at most %d", fleet.RolloutGatesAnnotation, len(gates), rollout.MaxGates), now)
		return 0
	}
	if !fleet.Applied(&bd.Spec, status) {
		return 0 // the pass that deploys it clears the results and checks after
	}
	ready := fleet.FindCondition(status.Conditions, fleet.ConditionReady)
	every := time.Duration(0)
	for _, g := range gates {
		every = minPositive(every, intervalOf(g))
		cond := fleet.GateCondition(g.Name)
		if ready == nil || ready.Status != corev1.ConditionTrue {
			if fleet.FindCondition(status.Conditions, cond) == nil {
				fleet.SetCondition(&status.Conditions, cond, corev1.ConditionUnknown, "Waiting", "waiting for the bundle to be ready", now)
			}
			continue
		}
		if out, msg, ok := c.take(ctx, bd, g); ok {
			c.record(bd, g, out, msg, status, now)
		} else if fleet.FindCondition(status.Conditions, cond) == nil {
			fleet.SetCondition(&status.Conditions, cond, corev1.ConditionUnknown, "Checking", "checking", now)
		}
	}
	return every
}

// take returns the result of g's last check when one ended since the last pass, and starts the
// next check when it is due and a slot is free.
func (c *Checker) take(ctx context.Context, bd *fleet.BundleDeployment, g fleet.HealthGate) (outcome, string, bool) {
	key := bd.Name + "/" + bd.Spec.DeploymentID + "/" + g.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.runs[key]
	if r == nil {
		r = &run{}
		c.runs[key] = r
	}
	out, msg, ended := r.out, r.msg, r.done
	r.done = false
	now := c.clock()
	if r.running || !r.started.IsZero() && now.Sub(r.started) < intervalOf(g) {
		return out, msg, ended
	}
	select {
	case c.slots <- struct{}{}:
	default:
		return out, msg, ended // every slot is busy: the next pass tries again
	}
	r.running, r.started = true, now
	bd = bd.DeepCopy()
	go func() {
		defer func() { <-c.slots }()
		out, msg := c.check(ctx, bd, g)
		c.mu.Lock()
		r.running, r.done, r.out, r.msg = false, true, out, msg
		notify := c.notify
		c.mu.Unlock()
		if notify != nil {
			notify(bd.Name)
		}
	}()
	return out, msg, ended
}

// record turns a check's outcome into the gate's condition: a gate fails after
// failureThreshold failed checks in a row (a broken one at once), and keeps its last result
// meanwhile.
func (c *Checker) record(bd *fleet.BundleDeployment, g fleet.HealthGate, out outcome, msg string, status *fleet.BundleDeploymentStatus, now time.Time) {
	cond := fleet.GateCondition(g.Name)
	key := bd.Name + "/" + bd.Spec.DeploymentID + "/" + g.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	switch out {
	case passed:
		delete(c.fails, key)
		fleet.SetCondition(&status.Conditions, cond, corev1.ConditionTrue, "Passed", msg, now)
	case pending:
		if cur := fleet.FindCondition(status.Conditions, cond); cur == nil || cur.Status != corev1.ConditionFalse {
			fleet.SetCondition(&status.Conditions, cond, corev1.ConditionUnknown, "Checking", msg, now)
		}
	default:
		threshold := min(g.FailureThreshold, rollout.MaxFailureThreshold)
		if threshold <= 0 {
			threshold = rollout.DefaultFailureThreshold
		}
		c.fails[key]++
		n := c.fails[key]
		if out == broken || n >= threshold {
			fleet.SetCondition(&status.Conditions, cond, corev1.ConditionFalse, "Failed", msg, now)
			return
		}
		if cur := fleet.FindCondition(status.Conditions, cond); cur == nil || cur.Status == corev1.ConditionUnknown {
			fleet.SetCondition(&status.Conditions, cond, corev1.ConditionUnknown, "Checking",
				fmt.Sprintf("failed %d of %d checks in a row: %s", n, threshold, msg), now)
		}
	}
}

// Forget drops what is counted for a BundleDeployment (it was deleted).
func (c *Checker) Forget(name string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.fails {
		if strings.HasPrefix(k, name+"/") {
			delete(c.fails, k)
		}
	}
	for k := range c.runs {
		if strings.HasPrefix(k, name+"/") {
			delete(c.runs, k)
		}
	}
}

// check runs one gate.
func (c *Checker) check(ctx context.Context, bd *fleet.BundleDeployment, g fleet.HealthGate) (outcome, string) {
	switch {
	case g.HTTPGet != nil:
		return c.httpGet(ctx, g.HTTPGet)
	case g.Prometheus != nil:
		return c.prometheus(ctx, g.Prometheus)
	case g.Job != nil:
		return c.job(ctx, bd, g)
	}
	return broken, "the gate sets none of httpGet, job and prometheus"
}

// intervalOf is how often g is checked, within the bounds whatever the gate asks.
func intervalOf(g fleet.HealthGate) time.Duration {
	if g.Interval != nil && g.Interval.Duration > 0 {
		return min(max(g.Interval.Duration, rollout.MinGateInterval), rollout.MaxGateInterval)
	}
	return rollout.DefaultGateInterval
}

func minPositive(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}
