package notify

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	"github.com/rancher/wrangler/v3/pkg/genericcondition"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Health event reasons: what a source's clusters show, whatever its rollout.
const (
	// Drifted: some deployments' live resources differ from what the source deploys;
	// DriftCorrected: none do any more, after a Drifted was sent.
	Drifted        = "Drifted"
	DriftCorrected = "DriftCorrected"
	// NotReady: clusters have been not ready for longer than the Alert's notReadyAfter; Ready:
	// every cluster is ready again, after a NotReady was sent.
	NotReady = "NotReady"
	Ready    = "Ready"
	// Offline: agents stopped checking in; Online: every one checks in again, after an
	// Offline was sent.
	Offline = "Offline"
	Online  = "Online"
)

// Suffixes of the health sources: a GitRepo's drift and readiness are told apart from its
// own events and its commit's.
const (
	DriftSuffix = "#drift"
	ReadySuffix = "#ready"
	// ClustersSource is the source of an Alert's clusters' offline messages.
	ClustersSource = "Clusters"
)

// Drift is the drift event of a source ("Kind/name") whose status summary is s: Drifted while
// some of its deployments drifted (per set of them), DriftCorrected when none do and a message
// was sent for it before (lastKey: that message's; a DriftCorrected stays one); false otherwise.
// A state, not a change: a Drifted held back (Alert.spec.digestWindow) and corrected still
// has its DriftCorrected.
func Drift(source string, s fleet.BundleSummary, lastKey string) (Event, bool) {
	e := Event{Source: source + DriftSuffix, Folds: true, Counts: summaryCounts(s)}
	lastKey, what := BaseKey(lastKey), strings.Replace(source, "/", " ", 1)
	if s.Modified == 0 {
		if lastKey == "" { // never told drifted
			return Event{}, false
		}
		e.Reason, e.Severity, e.Key = DriftCorrected, fleet.SeverityInfo, "drift/"+DriftCorrected
		e.Summary = fmt.Sprintf("%s: the drift is gone: %d of %d deployments ready", what, s.Ready, s.DesiredReady)
		return e, true
	}
	e.Groups = groupedResources(s.NonReadyResources, func(r fleet.NonReadyResource) bool { return r.State == fleet.Modified })
	e.Reason, e.Severity = Drifted, fleet.SeverityError
	e.Key = fmt.Sprintf("drift/%s/%d/%s", Drifted, s.Modified, groupsHash(e.Groups))
	e.Summary = fmt.Sprintf("%s: %d of %d deployments drifted from what git says", what, s.Modified, s.DesiredReady)
	if len(e.Groups) > 0 {
		e.Summary += " (" + e.Groups[0].Signature + ")"
	}
	return e, true
}

// Late is the readiness event of a source whose status summary is s and Ready condition ready:
// NotReady once clusters (neither drifted nor offline) have been not ready for longer than after
// (one per stretch of not being ready), Ready when all are and a message was sent for it
// before (lastKey). wake, when above zero, is how long until it would be late.
func Late(source string, s fleet.BundleSummary, ready *genericcondition.GenericCondition, after time.Duration, now time.Time, lastKey string) (e Event, ok bool, wake time.Duration) {
	e = Event{Source: source + ReadySuffix, Folds: true, Counts: summaryCounts(s)}
	lastKey, what := BaseKey(lastKey), strings.Replace(source, "/", " ", 1)
	// Drifted deployments are Drift's to tell, offline clusters (desired, in no state) OfClusters'.
	notReady := s.NotReady + s.WaitApplied + s.ErrApplied + s.OutOfSync + s.Pending
	if ready == nil {
		return Event{}, false, 0
	}
	if ready.Status == "True" || notReady <= 0 {
		if lastKey == "" { // never told not ready
			return Event{}, false, 0
		}
		e.Reason, e.Severity, e.Key = Ready, fleet.SeverityInfo, strings.TrimSuffix(lastKey, "/"+NotReady)
		if e.Key == lastKey { // Ready already: its state stays
			e.Key = strings.TrimSuffix(lastKey, "/"+Ready)
		}
		e.Key += "/" + Ready
		e.Summary = fmt.Sprintf("%s is ready again: %d of %d deployments ready", what, s.Ready, s.DesiredReady)
		return e, true, 0
	}
	since, err := time.Parse(time.RFC3339, ready.LastTransitionTime)
	if err != nil {
		since = now
	}
	if left := since.Add(after).Sub(now); left > 0 {
		return Event{}, false, left
	}
	e.Groups = groupedResources(s.NonReadyResources, func(r fleet.NonReadyResource) bool { return r.State != fleet.Modified })
	e.Reason, e.Severity = NotReady, fleet.SeverityError
	e.Key = fmt.Sprintf("ready/%s/%s", ready.LastTransitionTime, NotReady)
	e.Summary = fmt.Sprintf("%s not ready for over %s: %d of %d deployments not ready", what, after, notReady, s.DesiredReady)
	if len(e.Groups) > 0 {
		e.Summary += " (" + e.Groups[0].Signature + ")"
	}
	return e, true, 0
}

// OfClusters is the offline event of an Alert's clusters: Offline while some of them are (per
// set of them), Online when none is and a message was sent before (lastKey).
func OfClusters(clusters []*fleet.Cluster, lastKey string) (Event, bool) {
	var offline []string
	for _, c := range clusters {
		if c.Status.Display.State == Offline {
			offline = append(offline, c.Name)
		}
	}
	sort.Strings(offline)
	e := Event{Source: ClustersSource, Folds: true, Counts: map[string]int{"Offline": len(offline), "Clusters": len(clusters)}}
	lastKey = BaseKey(lastKey)
	if len(offline) == 0 {
		if lastKey == "" { // never told offline
			return Event{}, false
		}
		e.Reason, e.Severity, e.Key = Online, fleet.SeverityInfo, "clusters/"+Online
		e.Summary = fmt.Sprintf("all %d clusters check in again", len(clusters))
		return e, true
	}
	g := Group{Signature: "the agent stopped checking in", Count: len(offline), Clusters: offline[:min(len(offline), MaxNamed)]}
	e.Groups = []Group{g}
	e.Reason, e.Severity = Offline, fleet.SeverityError
	e.Key = fmt.Sprintf("clusters/%s/%d/%s", Offline, len(offline), hashOf(offline))
	e.Summary = fmt.Sprintf("%d of %d clusters offline: %s", len(offline), len(clusters), strings.Join(g.Clusters, ", "))
	if len(offline) > len(g.Clusters) {
		e.Summary += fmt.Sprintf(" and %d more", len(offline)-len(g.Clusters))
	}
	return e, true
}

// groupedResources groups the listed deployments that keep by the signature of their message.
func groupedResources(rs []fleet.NonReadyResource, keep func(fleet.NonReadyResource) bool) []Group {
	var fs []fleet.RolloutFailure
	for _, r := range rs {
		if keep(r) {
			fs = append(fs, fleet.RolloutFailure{Cluster: r.Name, Gate: string(r.State), Reason: r.Message})
		}
	}
	return Grouped(fs)
}

func summaryCounts(s fleet.BundleSummary) map[string]int {
	return map[string]int{"Ready": s.Ready, "NotReady": s.NotReady + s.WaitApplied + s.ErrApplied + s.OutOfSync + s.Pending,
		"Modified": s.Modified, "Desired": s.DesiredReady}
}

func groupsHash(gs []Group) string {
	var parts []string
	for _, g := range gs {
		parts = append(parts, g.Signature, strings.Join(g.Clusters, ","))
	}
	return hashOf(parts)
}

func hashOf(parts []string) string {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%016x", h.Sum64())[:10]
}

// DigestMark separates a digest's key from the key of the state it came to.
const DigestMark = "#digest-"

// Digest is e, the state a source came to, sent as the digest of the changes held in the
// window that ended at end: changes counts them by reason. Its key is e's, marked (BaseKey
// gives e's back).
func Digest(e Event, changes map[string]int, end time.Time) Event {
	reasons := make([]string, 0, len(changes))
	total := 0
	for r, n := range changes {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
		total += n
	}
	sort.Strings(reasons)
	e.Key = fmt.Sprintf("%s%s%d", e.Key, DigestMark, end.Unix())
	e.Summary = fmt.Sprintf("%d changes held back (%s); now: %s", total, strings.Join(reasons, ", "), e.Summary)
	return e
}

// BaseKey is the key of the state a message told of: a digest's key without its mark.
func BaseKey(key string) string {
	k, _, _ := strings.Cut(key, DigestMark)
	return k
}
