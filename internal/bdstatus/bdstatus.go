// Package bdstatus holds the pure steps of an agent's pass over a BundleDeployment: what the
// release needs (Decide) and what the status says after a deploy (Applied), a failure
// (MarkFailed) and at the end of the pass (Report). The agent's deployer runs them around its
// Helm and cluster calls; they read nothing but their arguments.
package bdstatus

import (
	"errors"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetgo/fleet/internal/bundlevalues"
	"github.com/fleetgo/fleet/internal/helmrelease"
	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Action is what a pass does about the release.
type Action int

const (
	// Hold: the BundleDeployment is paused, off schedule or waiting for values: nothing is
	// deployed.
	Hold Action = iota
	// Record: the release is what the spec asks for (perhaps the status write after its deploy
	// was lost): it is recorded in the status as applied.
	Record
	// Upgrade: the release is missing or not what the spec asks for: install or upgrade.
	Upgrade
)

// Decide compares the release with what the BundleDeployment asks for, given the hash of the
// inputs read for it.
func Decide(bd *fleet.BundleDeployment, rel *helmrelease.Release, status *fleet.BundleDeploymentStatus, valuesHash string) Action {
	spec := &bd.Spec
	if Held(bd) {
		return Hold
	}
	upToDate := rel != nil && rel.Status == release.StatusDeployed && rel.DeploymentID == spec.DeploymentID &&
		rel.SyncGeneration == spec.Options.ForceSyncGeneration && rel.ValuesHash == valuesHash
	if rel != nil && rel.MadeByFleet {
		// A Fleet agent deployed it before the move: what it reported applying stands until the
		// manager asks for something else, so moving over upgrades each release at most once.
		upToDate = rel.Status == release.StatusDeployed && status.AppliedDeploymentID == spec.DeploymentID &&
			status.Release == rel.String()
	}
	if upToDate {
		return Record
	}
	return Upgrade
}

// Held: paused, off schedule or waiting for values.
func Held(bd *fleet.BundleDeployment) bool {
	return bd.Spec.Paused || bd.Spec.OffSchedule || bd.Spec.WaitingForValues
}

// Applied records the release as what the BundleDeployment asked for.
func Applied(bd *fleet.BundleDeployment, rel *helmrelease.Release, status *fleet.BundleDeploymentStatus, now time.Time) {
	status.AppliedDeploymentID = bd.Spec.DeploymentID
	status.Release = rel.String()
	gen := bd.Spec.Options.ForceSyncGeneration
	status.SyncGeneration = &gen
	status.DownstreamResourcesGeneration = bd.Spec.DownstreamResourcesGeneration
	fleet.SetCondition(&status.Conditions, fleet.ConditionDeployed, corev1.ConditionTrue, "", "", now)
	fleet.SetCondition(&status.Conditions, fleet.ConditionInstalled, corev1.ConditionTrue, "", "", now)
}

// MarkFailed records a deploy error: Deployed=False always, Installed=False when only the user
// can fix it.
func MarkFailed(status *fleet.BundleDeploymentStatus, err error, now time.Time) {
	msg := err.Error()
	reason := "Error"
	if errors.Is(err, bundlevalues.ErrMissing) {
		reason = fleet.ReasonValuesSecretMissing
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionDeployed, corev1.ConditionFalse, reason, msg, now)
	if helmrelease.IsPermanent(err) {
		fleet.SetCondition(&status.Conditions, fleet.ConditionInstalled, corev1.ConditionFalse, "Error", msg, now)
	}
}

// Report fills the Ready condition and the display strings from the status the pass computed.
func Report(bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus, now time.Time) {
	view := &fleet.BundleDeployment{Spec: bd.Spec, Status: *status}
	state := summary.State(view)
	status.Display.State = string(state)
	status.Display.Deployed = "Yes"
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionDeployed); c != nil && c.Status != corev1.ConditionTrue {
		status.Display.Deployed = c.Message
		if c.Reason != "" && c.Message == "" {
			status.Display.Deployed = c.Reason
		}
	}
	status.Display.Monitored = "Yes"
	if c := fleet.FindCondition(status.Conditions, fleet.ConditionMonitored); c == nil {
		status.Display.Monitored = ""
	} else if c.Status != corev1.ConditionTrue {
		status.Display.Monitored = c.Message
	}
	if state == fleet.Ready {
		fleet.SetCondition(&status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "", now)
		return
	}
	msg := summary.Message(view, state)
	if msg == "" {
		msg = string(state)
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, string(state), msg, now)
}
