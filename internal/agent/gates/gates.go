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

// Checker runs the gates of a cluster's BundleDeployments.
type Checker struct {
	clientFor ClientFor
	http      *http.Client
	mu        sync.Mutex
	// fails counts failed checks in a row, by "bundledeployment/deploymentID/gate".
	fails map[string]int
}

// New returns a Checker whose Jobs are made in the agent's cluster as the bundle deploys: as its
// serviceAccount when it names one (clientFor), so a gate may do no more than the bundle.
func New(clientFor ClientFor) *Checker {
	return &Checker{clientFor: clientFor, http: &http.Client{Transport: http.DefaultTransport}, fails: map[string]int{}}
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

// Evaluate checks bd's gates once its deployment is applied and ready, records each result in
// status, and returns how soon to check again (zero when bd has no gates).
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
	if bd.Spec.DeploymentID == "" || status.AppliedDeploymentID != bd.Spec.DeploymentID {
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
		out, msg := c.check(ctx, bd, g)
		c.record(bd, g, out, msg, status, now)
	}
	return every
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
		threshold := g.FailureThreshold
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

func intervalOf(g fleet.HealthGate) time.Duration {
	if g.Interval != nil && g.Interval.Duration > 0 {
		return g.Interval.Duration
	}
	return rollout.DefaultGateInterval
}

func minPositive(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}
