// Package clusterstatus is the agent's heartbeat: it patches its Cluster's status subresource
// on the manager with the time it was last seen, its namespace and node counts. (agent)
package clusterstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/metrics"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// DefaultInterval is Fleet's default agentCheckinInterval.
const DefaultInterval = 15 * time.Minute

// retryInterval is how soon a failed check-in (manager unreachable) is tried again.
const retryInterval = 10 * time.Second

// Heartbeat checks in for one Cluster.
type Heartbeat struct {
	// Clusters patches Cluster status on the manager.
	Clusters fleetcontrollers.ClusterClient
	// ClusterNamespace and ClusterName name the agent's Cluster on the manager.
	ClusterNamespace, ClusterName string
	// AgentNamespace is the downstream namespace the agent runs in.
	AgentNamespace string
	// Local reads the downstream cluster's nodes.
	Local kubernetes.Interface
	// Interval is the check-in interval; zero means DefaultInterval.
	Interval time.Duration
	// SealingKey is the public half of the agent's sealing key (internal/agent/sealkey).
	SealingKey string
}

// Run checks in at once, then every interval, until ctx ends. Failures are retried sooner and
// never stop the agent.
func (h *Heartbeat) Run(ctx context.Context) {
	interval := h.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	for {
		wait := interval
		if err := h.CheckIn(ctx); err != nil {
			logrus.WithFields(logrus.Fields{"controller": "agent", "handler": "heartbeat", "cluster": h.ClusterName}).
				WithError(err).Warn("check-in failed")
			wait = min(interval, retryInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// CheckIn patches the Cluster's status once.
func (h *Heartbeat) CheckIn(ctx context.Context) error {
	agent := fleet.AgentStatus{LastSeen: metav1.NewTime(time.Now().UTC().Truncate(time.Second)), Namespace: h.AgentNamespace,
		SealingKey: h.SealingKey}
	if h.Local != nil {
		nodes, err := h.Local.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("counting nodes: %w", err)
		}
		for _, n := range nodes.Items {
			if nodeReady(&n) {
				agent.ReadyNodes++
			} else {
				agent.NonReadyNodes++
			}
		}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"agent": agent}})
	if err != nil {
		return err
	}
	_, err = h.Clusters.Patch(h.ClusterNamespace, h.ClusterName, types.MergePatchType, patch, "status")
	if err != nil {
		return fmt.Errorf("patching status of cluster %s/%s: %w", h.ClusterNamespace, h.ClusterName, err)
	}
	metrics.CheckedIn(agent.LastSeen.Time)
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
