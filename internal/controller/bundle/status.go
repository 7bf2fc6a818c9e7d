package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetgo/fleet/internal/rollout"
	"github.com/fleetgo/fleet/internal/summary"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// rollup is the Bundle's status rolled up from its BundleDeployments (or saying why it cannot
// be planned).
func (h *handler) rollup(b *fleet.Bundle, status fleet.BundleStatus, result []synced, d *decider, planErr error) fleet.BundleStatus {
	status.ObservedGeneration = b.Generation
	status.ResourcesSHA256Sum = h.resourcesSum(b)
	ready, message := corev1.ConditionTrue, ""
	if planErr != nil {
		ready, message = corev1.ConditionFalse, planErr.Error()
	} else {
		s, offline := h.summarize(result)
		status.Summary = s
		status.NewlyCreated = d.created
		status.ResourceKey = resourceKeys(result)
		status.Unavailable = countUnavailable(result)
		status.PartitionStatus, status.UnavailablePartitions = d.status(result)
		status.MaxUnavailable = d.partitions.MaxUnavailable
		status.MaxUnavailablePartitions = d.partitions.MaxUnavailablePartitions
		status.Display = fleet.BundleDisplay{
			ReadyClusters: fmt.Sprintf("%d/%d", s.Ready, s.DesiredReady),
			State:         string(summary.WorstState(s)),
		}
		switch {
		case summary.WorstState(s) != "":
			ready, message = corev1.ConditionFalse, summary.ReadyMessage(s)
		case len(offline) > 0:
			status.Display.State = "Offline"
			ready = corev1.ConditionUnknown
		}
		if len(offline) > 0 {
			note := fmt.Sprintf("Offline(%d) %v", len(offline), firstN(offline, summary.MaxNonReady))
			if message != "" {
				message = note + "; " + message
			} else {
				message = note
			}
		}
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionReady, ready, summary.ReadyReason(ready, status.Display.State), message, h.now())
	return status
}

// summarize counts the targets' states. A target without its BundleDeployment yet is Pending;
// one whose cluster is offline counts as desired but in no state (what its agent last reported
// may be stale), and is named in offline.
func (h *handler) summarize(result []synced) (s fleet.BundleSummary, offline []string) {
	for _, r := range result {
		name := r.cluster.Namespace + "/" + r.cluster.Name
		if r.bd != nil && h.offline(r.cluster) {
			// What an offline agent last reported may be stale: count the target as desired
			// but in no state, rather than as Ready.
			s.DesiredReady++
			offline = append(offline, name)
			continue
		}
		if r.bd == nil {
			summary.Increment(&s, fleet.Pending)
			if len(s.NonReadyResources) < summary.MaxNonReady {
				msg := "waiting for the cluster's namespace"
				if r.cluster.Status.Namespace == target.ClusterNamespace(r.cluster) {
					msg = "waiting to be created"
				}
				s.NonReadyResources = append(s.NonReadyResources, fleet.NonReadyResource{Name: name, State: fleet.Pending, Message: msg})
			}
			continue
		}
		summary.Add(&s, name, r.bd)
	}
	return s, offline
}

// offline says whether the cluster's agent stopped checking in, read from the cache's copy: a
// plan reused keeps an older one, whose lastSeen can be past the Offline threshold while the
// agent checks in. A cluster counted Offline is remembered, so that its next check-in brings the
// Bundle back even when the targeting watch never saw it Offline (a pass between a late check-in
// and the cluster controller's Offline write).
func (h *handler) offline(c *fleet.Cluster) bool {
	interval, now := h.checkin(), h.now()
	// A newer copy was seen no earlier: only an Offline one needs the cache's.
	if !summary.Offline(c, interval, now) {
		return false
	}
	if cur, err := h.clusters.Get(c.Namespace, c.Name); err == nil && !summary.Offline(cur, interval, now) {
		return false
	}
	h.mem.countedOffline(c.Namespace + "/" + c.Name)
	return true
}

func countUnavailable(result []synced) int {
	n := 0
	for _, r := range result {
		if r.bd != nil && rollout.Unavailable(r.bd) {
			n++
		}
	}
	return n
}

// resourceKeys are the objects the Bundle's BundleDeployments reported deploying, each once,
// sorted (Fleet's status.resourceKey).
func resourceKeys(result []synced) []fleet.ResourceKey {
	seen := map[fleet.ResourceKey]bool{}
	var out []fleet.ResourceKey
	for _, r := range result {
		if r.bd == nil {
			continue
		}
		for _, res := range r.bd.Status.Resources {
			k := fleet.ResourceKey{APIVersion: res.APIVersion, Kind: res.Kind, Namespace: res.Namespace, Name: res.Name}
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.SortFunc(out, func(a, b fleet.ResourceKey) int {
		return strings.Compare(a.APIVersion+"/"+a.Kind+"/"+a.Namespace+"/"+a.Name, b.APIVersion+"/"+b.Kind+"/"+b.Namespace+"/"+b.Name)
	})
	return out
}

// resourcesSum is the sha256 of the Bundle's resources (status.resourcesSha256Sum), computed
// once per generation.
func (h *handler) resourcesSum(b *fleet.Bundle) string {
	return h.mem.resourcesSum(b, func() string {
		data, err := json.Marshal(b.Spec.Resources)
		if err != nil {
			return ""
		}
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:])
	})
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
