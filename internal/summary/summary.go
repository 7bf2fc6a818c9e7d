// Package summary computes BundleDeployment states and rolls them up into the summaries,
// display strings and Ready conditions of Bundles, Clusters, ClusterGroups and GitRepos. Pure
// logic, used by the manager's controllers.
package summary

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// MaxNonReady bounds the non-ready entries a summary lists, so statuses stay small at any scale.
const MaxNonReady = 10

// State is a BundleDeployment's state, checked in Fleet's order: a failed or pending apply first,
// then readiness, then staged-but-not-promoted options, then drift.
func State(bd *fleet.BundleDeployment) fleet.BundleState {
	// Fleet's states compare the two IDs alone: a deployment held back (no deploymentID) and
	// never applied counts as applied here, where fleet.Applied says not.
	applied := bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID
	switch {
	case !applied && deployFailed(bd):
		return fleet.ErrApplied
	case !applied:
		return fleet.WaitApplied
	case !bd.Status.Ready:
		return fleet.NotReady
	case bd.Spec.DeploymentID != bd.Spec.StagedDeploymentID:
		return fleet.OutOfSync
	case !bd.Status.NonModified:
		return fleet.Modified
	}
	return fleet.Ready
}

func deployFailed(bd *fleet.BundleDeployment) bool {
	c := fleet.FindCondition(bd.Status.Conditions, fleet.ConditionDeployed)
	return c != nil && c.Status == corev1.ConditionFalse
}

// Message explains a BundleDeployment's state in a few words.
func Message(bd *fleet.BundleDeployment, state fleet.BundleState) string {
	switch state {
	case fleet.ErrApplied:
		if c := fleet.FindCondition(bd.Status.Conditions, fleet.ConditionDeployed); c != nil && c.Message != "" {
			return c.Message
		}
	case fleet.NotReady:
		var parts []string
		for _, r := range bd.Status.NonReadyStatus {
			parts = append(parts, ResourceName(r.APIVersion, r.Kind, r.Namespace, r.Name)+" "+strings.Join(r.Summary.Message, "; "))
		}
		return strings.Join(parts, ", ")
	case fleet.Modified:
		var parts []string
		for _, r := range bd.Status.ModifiedStatus {
			what := "modified"
			switch {
			case r.Create:
				what = "missing"
			case r.Delete:
				what = "extra"
			case r.Patch != "":
				what = "modified " + r.Patch
			}
			parts = append(parts, ResourceName(r.APIVersion, r.Kind, r.Namespace, r.Name)+" "+what)
		}
		return strings.Join(parts, ", ")
	}
	return ""
}

// ResourceName names a resource in messages as Fleet's summaries do (scripts match on them):
// the kind in lower case, a dot and the API group (the version for the core group), then
// namespace/name: "job.batch default/migrate", "configmap.v1 default/settings".
func ResourceName(apiVersion, kind, namespace, name string) string {
	what := strings.ToLower(kind)
	if apiVersion != "" {
		group, _, _ := strings.Cut(apiVersion, "/")
		what += "." + group
	}
	if namespace == "" {
		return what + " " + name
	}
	return what + " " + namespace + "/" + name
}

// Add counts one BundleDeployment in a summary, listing it as non-ready (up to MaxNonReady)
// under name.
func Add(s *fleet.BundleSummary, name string, bd *fleet.BundleDeployment) fleet.BundleState {
	state := State(bd)
	Increment(s, state)
	if state != fleet.Ready && len(s.NonReadyResources) < MaxNonReady {
		s.NonReadyResources = append(s.NonReadyResources, fleet.NonReadyResource{
			Name: name, State: state, Message: Message(bd, state),
			NonReadyStatus: first(bd.Status.NonReadyStatus), ModifiedStatus: firstModified(bd.Status.ModifiedStatus),
		})
	}
	return state
}

// Increment counts one item in a state.
func Increment(s *fleet.BundleSummary, state fleet.BundleState) {
	s.DesiredReady++
	switch state {
	case fleet.Ready:
		s.Ready++
	case fleet.NotReady:
		s.NotReady++
	case fleet.WaitApplied:
		s.WaitApplied++
	case fleet.ErrApplied:
		s.ErrApplied++
	case fleet.OutOfSync:
		s.OutOfSync++
	case fleet.Modified:
		s.Modified++
	case fleet.Pending:
		s.Pending++
	}
}

// Merge adds summary b to a, keeping the non-ready list bounded.
func Merge(a *fleet.BundleSummary, b fleet.BundleSummary) {
	a.Ready += b.Ready
	a.NotReady += b.NotReady
	a.WaitApplied += b.WaitApplied
	a.ErrApplied += b.ErrApplied
	a.OutOfSync += b.OutOfSync
	a.Modified += b.Modified
	a.Pending += b.Pending
	a.DesiredReady += b.DesiredReady
	for _, r := range b.NonReadyResources {
		if len(a.NonReadyResources) >= MaxNonReady {
			break
		}
		a.NonReadyResources = append(a.NonReadyResources, r)
	}
}

// WorstState is the highest-ranked state with a non-zero count; empty when all are ready.
func WorstState(s fleet.BundleSummary) fleet.BundleState {
	var worst fleet.BundleState
	for st, n := range nonReadyCounts(s) {
		if n > 0 && fleet.StateRank[st] > fleet.StateRank[worst] {
			worst = st
		}
	}
	return worst
}

// nonReadyCounts is a summary's count for each state but Ready.
func nonReadyCounts(s fleet.BundleSummary) map[fleet.BundleState]int {
	return map[fleet.BundleState]int{
		fleet.NotReady: s.NotReady, fleet.WaitApplied: s.WaitApplied, fleet.ErrApplied: s.ErrApplied,
		fleet.OutOfSync: s.OutOfSync, fleet.Modified: s.Modified, fleet.Pending: s.Pending,
	}
}

// ReadyReason is the reason of a roll-up's Ready condition: empty when ready, otherwise its
// display state (the worst state, or Offline).
func ReadyReason(ready corev1.ConditionStatus, state string) string {
	if ready == corev1.ConditionTrue {
		return ""
	}
	if state == "" {
		return string(fleet.NotReady)
	}
	return state
}

// ReadyMessage is the message of a roll-up's Ready condition: empty when ready, otherwise the
// counts by state and the first non-ready items with their reasons.
func ReadyMessage(s fleet.BundleSummary) string {
	if WorstState(s) == "" {
		return ""
	}
	var states []string
	for st, n := range nonReadyCounts(s) {
		if n > 0 {
			states = append(states, fmt.Sprintf("%s(%d)", st, n))
		}
	}
	sort.Slice(states, func(i, j int) bool { return states[i] < states[j] })
	var items []string
	for _, r := range s.NonReadyResources {
		item := fmt.Sprintf("%s: %s", r.Name, r.State)
		if r.Message != "" {
			item += " " + r.Message
		}
		items = append(items, item)
	}
	msg := strings.Join(states, ", ")
	if len(items) > 0 {
		msg += " [" + strings.Join(items, "; ") + "]"
	}
	return msg
}

func first(in []fleet.NonReadyStatus) []fleet.NonReadyStatus {
	if len(in) > 4 {
		in = in[:4]
	}
	return append([]fleet.NonReadyStatus(nil), in...)
}

func firstModified(in []fleet.ModifiedStatus) []fleet.ModifiedStatus {
	if len(in) > 4 {
		in = in[:4]
	}
	return append([]fleet.ModifiedStatus(nil), in...)
}

// AddCounts adds resource counts b to a.
func AddCounts(a *fleet.ResourceCounts, b fleet.ResourceCounts) {
	a.Ready += b.Ready
	a.DesiredReady += b.DesiredReady
	a.WaitApplied += b.WaitApplied
	a.Modified += b.Modified
	a.Orphaned += b.Orphaned
	a.Missing += b.Missing
	a.Unknown += b.Unknown
	a.NotReady += b.NotReady
}

// OfflineAfter is how many missed check-in intervals make a cluster Offline.
const OfflineAfter = 3

// Offline reports whether a cluster's agent has checked in before but not for more than
// OfflineAfter check-in intervals: what it last reported may no longer be true.
func Offline(c *fleet.Cluster, interval time.Duration, now time.Time) bool {
	seen := c.Status.Agent.LastSeen
	return !seen.IsZero() && now.Sub(seen.Time) > OfflineAfter*interval
}

// Sealed states of a BundleDeployment whose bundle carries secrets (spec.sealedFiles).
const (
	SealedWaiting  = "waiting"
	SealedUnsealed = "unsealed"
)

// Sealed is where a deployment's sealed secrets stand: SealedUnsealed once its agent opened
// them and deployed the deployment they came with, SealedWaiting before, "" when it has none.
func Sealed(bd *fleet.BundleDeployment) string {
	if len(bd.Spec.SealedFiles) == 0 {
		return ""
	}
	if bd.Spec.DeploymentID != "" && bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID && !deployFailed(bd) {
		return SealedUnsealed
	}
	return SealedWaiting
}

// SealedNames adds the names of bd's sealed files to names, each once, in order.
func SealedNames(names []string, bd *fleet.BundleDeployment) []string {
	for _, f := range bd.Spec.SealedFiles {
		if !slices.Contains(names, f.Name) {
			names = append(names, f.Name)
		}
	}
	slices.Sort(names)
	return names
}
