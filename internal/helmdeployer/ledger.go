package helmdeployer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/sirupsen/logrus"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/helmrelease"
)

// The ledger is the agent's own record of the releases it made: one ConfigMap per release in the
// agent's namespace, where only the agent (and cluster administrators) write. A Helm release is
// a Secret in the release namespace, and anyone who may create Secrets there can write one that
// looks like the agent's, labels and all. The agent acts with its own cluster-wide identity only
// on releases its ledger names, at the revision and content it recorded: garbage collection,
// uninstalls (and their hooks), upgrades and rollbacks never start from a revision someone else
// wrote, and a release namespace is deleted only when the ledger says the agent created it.
const (
	// LedgerLabel marks the ledger's ConfigMaps.
	LedgerLabel  = "fleet.cattle.io/release-ledger"
	ledgerPrefix = "fleet-release-"
)

// entry is one release of the ledger.
type entry struct {
	Namespace, Name, BundleID string
	// Version is the newest revision the agent wrote; Digest fingerprints its manifest and hooks.
	Version int
	Digest  string
	// Pending is the revision an action of the agent is writing (0: none) and PendingDigest its
	// digest, recorded before Helm wrote it: an agent killed in the middle leaves it
	// pending-upgrade, and it is the agent's to recover only while its content is that digest's.
	Pending       int
	PendingDigest string
	// DeleteNamespace: the bundle asked for the namespace to go with the release.
	DeleteNamespace bool
	// CreatedNamespace: the agent created the release namespace for it.
	CreatedNamespace bool
	// ServiceAccount is who the bundle deploys as ("": the agent): its uninstall runs as it too.
	ServiceAccount string
	// IgnoredRendered (JSON) holds what the chart rendered, at the newest revision, for the
	// fields comparePatches ignore (see ignoredFields): the next upgrade tells from it whether
	// the chart changed one.
	IgnoredRendered string
}

func ledgerName(ns, name string) string {
	sum := sha256.Sum256([]byte(ns + "/" + name))
	return ledgerPrefix + hex.EncodeToString(sum[:10])
}

func (e entry) configMap(agentNS string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ledgerName(e.Namespace, e.Name), Namespace: agentNS,
			Labels: map[string]string{LedgerLabel: "true", BundleIDLabel: e.BundleID}},
		Data: map[string]string{"namespace": e.Namespace, "name": e.Name, "bundleID": e.BundleID,
			"version": strconv.Itoa(e.Version), "digest": e.Digest, "pending": strconv.Itoa(e.Pending), "pendingDigest": e.PendingDigest,
			"deleteNamespace": strconv.FormatBool(e.DeleteNamespace), "createdNamespace": strconv.FormatBool(e.CreatedNamespace),
			"serviceAccount": e.ServiceAccount, "ignoredRendered": e.IgnoredRendered}}
}

func entryOf(cm *corev1.ConfigMap) entry {
	d := cm.Data
	v, _ := strconv.Atoi(d["version"])
	pending, _ := strconv.Atoi(d["pending"])
	return entry{Namespace: d["namespace"], Name: d["name"], BundleID: d["bundleID"], Version: v, Digest: d["digest"], Pending: pending, PendingDigest: d["pendingDigest"],
		DeleteNamespace: d["deleteNamespace"] == "true", CreatedNamespace: d["createdNamespace"] == "true", ServiceAccount: d["serviceAccount"],
		IgnoredRendered: d["ignoredRendered"]}
}

// digest fingerprints what a revision would make the agent do: its manifest and its hooks.
func digest(rel *release.Release) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00", rel.Namespace, rel.Name, rel.Version, rel.Manifest)
	for _, hook := range rel.Hooks {
		fmt.Fprintf(h, "%s\x00%s\x00%v\x00%d\x00%v\x00", hook.Path, hook.Manifest, hook.Events, hook.Weight, hook.DeletePolicies)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ledgerEntry is the ledger's entry of a release, nil when the agent has none.
func (d *Deployer) ledgerEntry(ctx context.Context, ns, name string) (*entry, error) {
	cm, err := d.kube.CoreV1().ConfigMaps(d.agentNamespace).Get(ctx, ledgerName(ns, name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the ledger entry of release %s/%s: %w", ns, name, err)
	}
	e := entryOf(cm)
	// The ConfigMap's name is derived from the release's: an entry saying otherwise is not one.
	if e.Namespace != ns || e.Name != name {
		return nil, nil
	}
	return &e, nil
}

// ledgerEntries lists the ledger, with a bundleID only that BundleDeployment's releases.
func (d *Deployer) ledgerEntries(ctx context.Context, bundleID string) ([]entry, error) {
	sel := LedgerLabel + "=true"
	if bundleID != "" {
		sel += "," + BundleIDLabel + "=" + bundleID
	}
	list, err := d.kube.CoreV1().ConfigMaps(d.agentNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the release ledger: %w", err)
	}
	out := make([]entry, 0, len(list.Items))
	for i := range list.Items {
		e := entryOf(&list.Items[i])
		if list.Items[i].Name == ledgerName(e.Namespace, e.Name) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return ledgerName(out[i].Namespace, out[i].Name) < ledgerName(out[j].Namespace, out[j].Name)
	})
	return out, nil
}

// writeLedger records the release's newest revision, as the agent just left it, for e (its
// namespace, name, BundleDeployment, service account and namespace facts).
func (d *Deployer) writeLedger(ctx context.Context, ac *action.Configuration, e entry) error {
	last, err := ac.Releases.Last(e.Name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return d.forgetLedger(ctx, e.Namespace, e.Name)
	}
	if err != nil {
		return fmt.Errorf("reading release %s/%s to record it: %w", e.Namespace, e.Name, err)
	}
	return d.record(ctx, e, last, nil)
}

// record writes e with rel as its newest revision (nil: none) and pending as the one an action
// is writing (nil: none).
func (d *Deployer) record(ctx context.Context, e entry, rel, pending *release.Release) error {
	if prev, err := d.ledgerEntry(ctx, e.Namespace, e.Name); err != nil {
		return err
	} else if prev != nil && prev.CreatedNamespace {
		e.CreatedNamespace = true
	}
	e.Version, e.Digest, e.Pending, e.PendingDigest = 0, "", 0, ""
	if rel != nil {
		e.Version, e.Digest = rel.Version, digest(rel)
	}
	if pending != nil {
		e.Pending, e.PendingDigest = pending.Version, digest(pending)
	}
	if err := createOrUpdate(ctx, d.kube.CoreV1().ConfigMaps(d.agentNamespace), e.configMap(d.agentNamespace)); err != nil {
		return fmt.Errorf("recording release %s/%s in the ledger: %w", e.Namespace, e.Name, err)
	}
	return nil
}

func (d *Deployer) forgetLedger(ctx context.Context, ns, name string) error {
	err := d.kube.CoreV1().ConfigMaps(d.agentNamespace).Delete(ctx, ledgerName(ns, name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing release %s/%s from the ledger: %w", ns, name, err)
	}
	return nil
}

// errNotRecorded: the release is not in the agent's ledger.
var errNotRecorded = errors.New("not made by this agent")

// verified makes the release's history what the agent left it: revisions newer than the one it
// recorded were written by someone else and are removed (Helm would otherwise start its next
// action, hooks and deletions included, from them), and the recorded revision must still be the
// one the agent wrote. It returns the ledger entry and that revision (nil: the release has none),
// and from then on Helm reads of the release only what the ledger vouches for (vouched): what
// it checked is what Helm acts from.
func (d *Deployer) verified(ctx context.Context, ac *action.Configuration, ns, name string) (*entry, *release.Release, error) {
	e, err := d.ledgerEntry(ctx, ns, name)
	if err != nil {
		return nil, nil, err
	}
	if e == nil {
		return nil, nil, fmt.Errorf("release %s/%s: %w", ns, name, errNotRecorded)
	}
	history, err := ac.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		ac.Releases.Driver = d.vouch(ctx, ac.Releases.Driver, *e, nil)
		return e, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading release %s/%s: %w", ns, name, err)
	}
	var recorded *release.Release
	for _, r := range history {
		switch {
		case r.Version == e.Pending && e.PendingDigest != "" && digest(r) == e.PendingDigest:
			// Written by an action of the agent that did not get to record it: the digest
			// it recorded before Helm wrote the revision says so.
			recorded, e.Version, e.Digest = r, r.Version, digest(r)
		case r.Version > e.Version:
			if _, err := ac.Releases.Delete(name, r.Version); err != nil {
				return nil, nil, fmt.Errorf("removing revision %d of release %s/%s, which this agent did not write: %w", r.Version, ns, name, err)
			}
			logrus.WithFields(logrus.Fields{"namespace": ns, "release": name, "revision": r.Version}).
				Warn("removed a release revision this agent did not write")
		case r.Version == e.Version:
			recorded = r
		}
	}
	remaining := len(history)
	for _, r := range history {
		if r.Version > e.Version {
			remaining--
		}
	}
	if recorded == nil && remaining > 0 || recorded != nil && digest(recorded) != e.Digest {
		return nil, nil, helmrelease.Permanent(fmt.Errorf("release %s/%s revision %d was changed by someone other than this agent; it is left alone", ns, name, e.Version))
	}
	ac.Releases.Driver = d.vouch(ctx, ac.Releases.Driver, *e, recorded)
	return e, recorded, nil
}
